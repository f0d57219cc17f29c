"""What a network run's figures say in words: the end-of-run line (its answer and what it cost) and the
warning of chains that have not met (which quantities, why they are apart, what to change).

Flow position: diagnostics -> **verdicts** -> metrics, experiment, estimator. Reads the diagnostics
dict :func:`~adaptive_hmc.rundir.metrics.run_diagnostics` makes; computes nothing from draws.
"""
from __future__ import annotations

import numpy as np

from ..diagnostics import APART, MOVING, RHAT_LIMIT, SETTLED_RHAT, run_longer


def rhat_of(diagnostics: dict) -> str:
    """What the ``rhat_max`` of :func:`~adaptive_hmc.rundir.metrics.run_diagnostics` is taken over, in words."""
    return (f"the {', '.join(diagnostics.get('test') or {})} predictions"
            + (" and the log hyperparameters" if diagnostics.get("hyper") else ""))


def diagnostics_line(summary: dict) -> str:
    """One line of a finished run's answer and what it cost: the chains that
    predict, the largest R-hat, the smallest and median ESS of the first test
    set's predictions, per 1000 gradients and per second of sampling."""
    d = summary.get("diagnostics") or {}
    if not d.get("test"):
        return (f"{summary.get('gradients', summary['leapfrog_steps']):,} gradients, {summary['wall_s']:.1f} s "
                f"sampling (no test-set ESS)")
    name, t = next(iter(d["test"].items()))
    r = d["rhat_max"]
    per_g, per_s = t["ess_per_1000_gradients"], t["ess_per_second"]
    bound = (" (a lower bound: near the number of diagnostic draws, 16 a super-transition a chain: the chains' "
             "draws are nearly independent at that spacing)"
             if thin_limited(d) else "")
    return (f"{t['chains']} {d['chains']!r} chain{'s' * (t['chains'] != 1)}; R-hat max of {rhat_of(d)} "
            f"{'not finite' if r is None else f'{r:.3f}'}; "
            f"ESS of the {name} predictions (smallest / median over outputs) {t['ess_bulk']['min']:.0f} / "
            f"{t['ess_bulk']['median']:.0f}, per 1000 gradients {per_g['min']:.3f} / {per_g['median']:.3f} "
            f"({d['gradients']:,} gradients, every chain), per second {per_s['min']:.2f} / {per_s['median']:.2f} "
            f"({d['sampling_s']:.1f} s sampling, compiling apart){bound}"
            + (f"; each chain's own split R-hat: {own_rhats(d)}; the chains {VERDICT_WORDS[d['verdict']]}"
               if d.get("verdict") else ""))


#: What the line says of each :func:`~adaptive_hmc.diagnostics.verdict`.
VERDICT_WORDS = {"met": "met", "moving": "are still moving (more time)",
                 "apart": "have settled apart (separate modes: see the stacked predictive)"}


def thin_limited(diagnostics: dict) -> bool:
    """Whether the median ESS of a test set's predictions exceeds half the
    number of distinct draws it was measured on: the diagnostic draws
    (:func:`~adaptive_hmc.rundir.metrics.draw_indices`) then limit the figure, which is a lower bound of
    the answer's ESS."""
    d = diagnostics or {}
    return any(t["ess_bulk"]["median"] > 0.5 * d["distinct_draws"] for t in d.get("test", {}).values())


def slowest(diagnostics: dict) -> tuple | None:
    """(what, bulk ESS) of the quantity with the smallest bulk ESS among the
    test predictions and the log hyperparameters, or None."""
    found = [(f"the {name} predictions", t.get("ess_bulk", {}).get("min"))
             for name, t in (diagnostics.get("test") or {}).items()]
    if diagnostics.get("hyper") is not None:
        found.append(("the log hyperparameters", diagnostics["hyper"].get("ess_bulk", {}).get("min")))
    found = [(w, e) for w, e in found if e is not None and np.isfinite(e) and e > 0]
    return min(found, key=lambda f: f[1]) if found else None


def rhat_warning(diagnostics: dict, hyper_moves: str | None = None, longer=None) -> str | None:
    """A warning when the chains have not met (R-hat above
    :data:`~adaptive_hmc.diagnostics.RHAT_LIMIT`, or a quantity stuck in a chain):
    which quantities, why they are apart (:func:`_why_apart`) and what to
    change: how many times the draws after the burn-in would bring the slowest
    quantity's bulk ESS to :data:`~adaptive_hmc.diagnostics.ENOUGH_ESS` at this pace (``longer(factor)``,
    when given, says how: the command or parameter), and where the run used
    Neal's Gibbs updates alone (``hyper_moves`` "gibbs"), the interweaving moves."""
    if not diagnostics or diagnostics.get("chains") is None:
        return None
    r = diagnostics["rhat_max"]
    if r is not None and r <= RHAT_LIMIT:
        return None
    shown = "not finite (a chain never moved)" if r is None else f"{r:.3f}"
    tests = diagnostics.get("test") or {}
    c = diagnostics["chains"]
    where, what, stuck = (f"between the halves of the one {c!r} chain", "its halves disagree", "super-transitions") \
        if tests and all(t["chains"] == 1 for t in tests.values()) else \
        (f"across the {c!r} chains", "the chains have not met", "chains")
    parts = [f"the {name} predictions {_shown_rhat(t)}" for name, t in tests.items()]
    if diagnostics.get("hyper") is not None:
        parts.append(f"the log hyperparameters {_shown_rhat(diagnostics['hyper'])}")
    of = f" ({'; '.join(parts)})" if parts else ""
    apart = (diagnostics.get("hyper") or {}).get("apart")
    slow = slowest(diagnostics) if r is not None and not (apart or {}).get("drifting") else None
    advice = run_longer(*slow, longer, rhat=r) if slow else run_longer("", None)
    moves = ("; where the hyperparameters' R-hat is the larger, model.priors.hyper_moves: interweave mixes them "
             "faster than gibbs" if hyper_moves == "gibbs" else "")
    case = diagnostics.get("verdict")
    if case == APART:
        why = _settled_apart(diagnostics)
    elif case == MOVING:                         # where every chain drifts one way, which quantity and how far
        why = _still_moving(diagnostics) + (_why_apart(apart) if (apart or {}).get("drifting") else "")
    else:                                        # a summary written before the verdict
        why = _why_apart(apart)
    return (f"the largest R-hat {where} is {shown}{of}, above {RHAT_LIMIT}: {what}, so the answer is not yet the "
            f"posterior's. {why}{advice}{moves}; a chain that never moved shows in the log as stuck {stuck}")


def own_rhats(diagnostics: dict) -> str:
    """Each chain's largest own split R-hat (``within_chain`` of :func:`~adaptive_hmc.rundir.metrics.run_diagnostics`), in words."""
    own = diagnostics.get("within_chain") or {}
    names = {"predictions": "predictions", "hyper": "log hyperparameters"}
    return "; ".join(f"{names[k]} " + ", ".join("not finite (a value the chain never changed)" if v is None
                                                  else f"{v:.3f}" for v in r)
                     for k, r in own.items())


def _still_moving(diagnostics: dict) -> str:
    return (f"The chains are still moving: each chain's own split R-hat (its first half against its second; "
            f"{own_rhats(diagnostics)}) is not yet within {SETTLED_RHAT} in every chain, so more time, not more "
            f"chains, brings them together. ")


def _settled_apart(diagnostics: dict) -> str:
    return (f"Each chain has settled (its own split R-hat: {own_rhats(diagnostics)}; all within {SETTLED_RHAT}) "
            f"and they sit apart: the posterior has separate modes, which more time does not cross. The chains' "
            f"stacked predictive (summary.json's \"stacking\", weights from each chain's leave-one-out density) "
            f"predicts from them all; it is a stacked predictive, not the posterior. ")


def _why_apart(apart: dict | None) -> str:
    """What :func:`~adaptive_hmc.diagnostics.chains_apart` found, as a sentence (or nothing)."""
    if not apart:
        return ""
    def means(v):
        return ", ".join(f"{x:.2f}" for x in v)
    if apart["drifting"]:
        return (f"The chains are still on their way: the log {apart['name']} moved the same way in every chain, "
                f"from chain means {means(apart['first'])} (first third of the draws) to {means(apart['last'])} "
                f"(last third; within-chain sd {apart['sd']:.2f}), so more time will bring them closer. ")
    return (f"No quantity drifts the same way in every chain, but the chains sit apart: the log {apart['name']}'s "
            f"chain means are {means(apart['last'])} (last third of the draws) with a within-chain sd of "
            f"{apart['sd']:.2f}: separate modes, or moves too slow to cross between them; more chains show how many "
            f"there are. ")


def _shown_rhat(d: dict) -> str:
    r = d.get("rhat_max")
    return "not finite" if r is None else f"{r:.3f}"
