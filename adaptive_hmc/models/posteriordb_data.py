"""The shipped posteriordb files (data, reference summaries, thinned
reference draws) and the type each posterior is written as: its user log
density and the maps between unconstrained coordinates and the reference's
parameters (the posteriors themselves: :mod:`~adaptive_hmc.models.posteriordb`).

Flow position: **models**.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

FOLDER = Path(__file__).resolve().parent.parent / "datasets" / "posteriordb"
#: The posteriors, by posteriordb name (eight_schools_centered: the funnel, whose answer is the non-centred reference).
NAMES = ("eight_schools_noncentered", "eight_schools_centered", "arK", "garch11", "logmesquite", "blr",
         "gp_pois_regr", "diamonds")
#: The reference of each posterior (the file in FOLDER).
REFERENCE = {"eight_schools_noncentered": "eight_schools-eight_schools_noncentered",
             "eight_schools_centered": "eight_schools-eight_schools_noncentered", "arK": "arK-arK",
             "garch11": "garch-garch11", "logmesquite": "mesquite-logmesquite", "blr": "sblrc-blr",
             "gp_pois_regr": "gp_pois_regr-gp_pois_regr", "diamonds": "diamonds-diamonds"}


class Posterior(NamedTuple):
    """A posteriordb posterior as a user density: ``logp_grad(q) -> (log p,
    grad)`` over ``dim`` unconstrained coordinates; ``constrain(Q) -> {name:
    (n,)}`` gives the reference's parameters (names as in its draws) of draws
    Q (n, dim), ``unconstrain(draws) -> Q`` the inverse; ``initial(rng, n)``
    n starting points (uniform in (-2, 2) on the unconstrained scale, as Stan)."""

    name: str
    dim: int
    logp_grad: Callable
    constrain: Callable
    unconstrain: Callable
    parameters: tuple

    def initial(self, rng, n: int) -> np.ndarray:
        return rng.uniform(-2, 2, size=(n, self.dim))


def load(name: str) -> dict:
    """The shipped file of posterior ``name``: its data (``data/<key>``), the
    reference's parameter names, means, sds and their MCSEs, and its thinned
    draws ``draws`` (n, parameters)."""
    with np.load(FOLDER / f"{REFERENCE[name]}.npz") as f:
        return {k: f[k] for k in f.files}


def reference(name: str) -> dict:
    """{parameter: (mean, sd, mcse_mean, mcse_sd)} of posterior ``name``'s reference."""
    f = load(name)
    return {str(p): tuple(float(f[k][i]) for k in ("mean", "sd", "mcse_mean", "mcse_sd"))
            for i, p in enumerate(f["parameters"])}


def _names(base: str, n: int) -> list:
    return [f"{base}[{i + 1}]" for i in range(n)]


def _columns(Q, names) -> dict:
    return {n: Q[:, i] for i, n in enumerate(names)}


def _log_last(names: list) -> tuple:
    """(constrain, unconstrain) of coordinates that are the parameters ``names`` as they are but the last,
    whose log is the last coordinate (a scale sigma = exp(s))."""
    def constrain(Q):
        Q = np.atleast_2d(Q)
        return _columns(np.column_stack([Q[:, :-1], np.exp(Q[:, -1])]), names)

    def unconstrain(draws):
        return np.column_stack([draws[n] for n in names[:-1]] + [np.log(draws[names[-1]])])
    return constrain, unconstrain
