"""The run directory: the sample store, the checkpoint codecs, the summary and
every run file's name and reader (a finished run read back as a typed ``Run``),
and ``Posterior``, a run's kept samples with the one ``predict``."""
