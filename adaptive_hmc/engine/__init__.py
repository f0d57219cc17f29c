"""The engine: chains of any model (a network's chains, a user density's
chains) and the one driver that runs them at the tuner's actions (ask ->
super-transition -> reward -> tell), with what a run says while it works and
how long it will take. Nothing here reads or writes a run directory."""
