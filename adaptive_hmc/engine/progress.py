"""What a run says while it works: the compile announced with how long it
usually takes, and the progress of its super-transitions (a bar on a terminal
that can draw one, plain lines with the elapsed and remaining time elsewhere),
the same for every kind of run.

Flow position: runner -> **progress** -> general, experiment, estimator, cli.
"""
from __future__ import annotations

import math
import os
import sys
import threading
import time

import numpy as np

from .. import COMPILE_TIME
from .runner import ChainSet


def can_draw_bar() -> bool:
    """Whether stderr is a terminal that reports a width (one of width 0 would draw nothing)."""
    try:
        return sys.stderr.isatty() and os.get_terminal_size(sys.stderr.fileno()).columns > 0
    except (OSError, ValueError):
        return False


def compile_kernels(net: ChainSet, quiet: bool = False) -> float:
    """``net.compile()`` (of any :class:`ChainSet`), saying while it runs, when the kernels are not in
    the compile cache yet, that the sampler is being compiled for this model,
    how long that usually takes and the seconds so far (a line that counts on
    a terminal, a line before and one after elsewhere). Returns its seconds."""
    if quiet or net.kernels_ready():
        return net.compile()
    what = f"compiling the sampler for this model (first run only; {COMPILE_TIME}, later runs load it from the cache)"
    done = threading.Event()
    t0 = time.perf_counter()
    if can_draw_bar():
        def tick():
            while not done.wait(1.0):
                print(f"\r{what}: {time.perf_counter() - t0:.0f} s", end="", file=sys.stderr, flush=True)
        print(f"{what}: 0 s", end="", file=sys.stderr, flush=True)
        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
    else:
        print(f"{what} ...", file=sys.stderr, flush=True)
        ticker = None
    try:
        seconds = net.compile()
    finally:
        done.set()
        if ticker is not None:
            ticker.join()
            print(file=sys.stderr, flush=True)
    print(f"compiled in {seconds:.1f} s", file=sys.stderr, flush=True)
    return seconds


def start_chains(chains: ChainSet, quiet: bool = False) -> dict | None:
    """``chains.start_chains()`` (a network's optimized starts), saying what it did; its seconds and gradients
    count in the first super-transition's. What it did, or None."""
    info = chains.start_chains()
    if info is not None and not quiet:
        n = len(info["chains"])
        print(f"{n} chain{'s' * (n != 1)} started from optimized networks (L-BFGS from each chain's random "
              f"weights) in {info['seconds']:.1f} s ({info['gradients']:,} gradients"
              f"{'; cut short at the time limit' if info['cut_short'] else ''})", file=sys.stderr, flush=True)
    return info


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (where tqdm's notebook bar draws, though stderr is no terminal)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


#: Without a bar, a plain progress line at most this often (seconds), besides the first, the last and each
#: tenth of a run of known length.
PLAIN_EVERY_S = 10.0


class Progress:
    """tqdm bar on a terminal that can draw one (it shows the elapsed and
    remaining time), plain log lines otherwise, each with the elapsed time and,
    when the length is known, the time left at the pace so far (``total``
    None: a run whose length is not known in advance; ``limit_s``: its time
    limit, which applies from super-transition ``limit_from`` on, said beside
    the elapsed time)."""

    def __init__(self, total: int | None, initial: int, quiet: bool = False, limit_s: float | None = None,
                 limit_from: int = 0):
        self.quiet = quiet
        self.bar = None
        if not quiet and (can_draw_bar() or in_notebook()):
            from tqdm.auto import tqdm              # a widget in a notebook, text on a terminal
            self.bar = tqdm(total=total, initial=initial, unit="st", desc="super-transitions",
                            bar_format="{l_bar}{bar:20}{r_bar}")          # the bar keeps its width
        self.total, self.initial, self.limit_s, self.limit_from = total, initial, limit_s, limit_from
        self.t0 = time.perf_counter()
        self._said_at, self._said_tenth = -math.inf, -1

    def timing(self, done: int) -> str:
        """Elapsed time after ``done`` super-transitions (of this process) and what is left."""
        elapsed = time.perf_counter() - self.t0
        if self.total is not None:
            left = elapsed / max(done, 1) * (self.total - self.initial - done)
            return f"elapsed {elapsed:.0f} s, about {left:.0f} s left"
        if self.limit_s is None:
            return f"elapsed {elapsed:.0f} s"
        return (f"elapsed {elapsed:.0f} s, at most about {max(self.limit_s - elapsed, 0.0):.0f} s left (time limit "
                f"{self.limit_s:g} s, from super-transition {self.limit_from} on)")

    def update(self, e: dict):
        acc = float(np.mean(e["acceptance"]))
        reward = "failed" if e["reward"] is None else f"{e['reward']:.6g}"
        stuck = f" STUCK: chains {e['stuck_chains']} accepted nothing" if e["stuck_chains"] else ""
        probed = "".join(f" (probed eps={p['step_factor']:.3f} L={p['num_steps']}: a chain's acceptance "
                         f"{p['min_accept_prob']:.2f}, not run)" for p in e.get("probes", ()) if not p["passed"])
        if self.bar is not None:
            self.bar.set_postfix_str(f"eps={e['step_factor']:.3f} L={e['num_steps']} reward={reward} acc={acc:.2f}"
                                     + (f" stuck={len(e['stuck_chains'])}" if stuck else ""))
            self.bar.update(1)
        elif not self.quiet and self._due(e["i"] + 1, bool(stuck or probed)):
            of = "" if self.total is None else f"/{self.total}"
            print(f"super-transition {e['i'] + 1}{of}: eps={e['step_factor']:.4f} "
                  f"L={e['num_steps']} reward={reward} acceptance={acc:.3f} divergences={e['divergences']} "
                  f"{e['seconds']:.2f}s; {self.timing(e['i'] + 1 - self.initial)}{stuck}{probed}",
                  file=sys.stderr, flush=True)

    def _due(self, n: int, notable: bool) -> bool:
        """Whether the plain line of super-transition ``n`` is printed: the first of this process, the last of
        a run of known length, each tenth of one, anything notable (a stuck chain, a failed probe), and
        otherwise at most every :data:`PLAIN_EVERY_S` seconds."""
        now = time.perf_counter()
        tenth = -1 if self.total is None else (10 * n) // max(self.total, 1)
        due = (n == self.initial + 1 or notable or n == self.total or tenth > self._said_tenth
               or now - self._said_at >= PLAIN_EVERY_S)
        if due:
            self._said_at, self._said_tenth = now, max(tenth, self._said_tenth)
        return due

    def close(self):
        if self.bar is not None:
            self.bar.close()
