"""What ``adaptive-hmc run`` does after a run when its config asks: the same chains with a hand-tuned fixed setting
at equal compute (``tuner.compare_with``: as many super-transitions of the same budget, into the sibling directory
``DIR-fixed``), said in one line, and the run's figures (``run.plots``: the learned reward surface and the rest of
``adaptive-hmc plot``).

Flow position: experiment, plots -> **versus** -> cli.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..config import Config, ConfigError, parse, to_dict
from .experiment import run_experiment

#: The hand-tuned run's directory: the tuned run's, with this after its name.
SUFFIX = "-fixed"


def sibling(out) -> Path:
    """Where the hand-tuned run of the run in ``out`` goes."""
    out = Path(out)
    return out.with_name(out.name + SUFFIX)


def fixed_config(cfg: Config, source: str, super_transitions: int | None = None) -> Config:
    """``cfg`` with its tuner replaced by a fixed one at ``tuner.compare_with``, run for exactly
    ``super_transitions`` (default: the config's; ``run.until`` off) with the same burn-in, chains, sampler and seed:
    the hand-tuned run at the tuned run's compute. ConfigError naming ``tuner.compare_with`` when the setting does
    not fit the sampler (a window longer than its L)."""
    raw = to_dict(cfg)
    t = raw["tuner"]
    hand = t["compare_with"]
    raw["name"] = f"{cfg.name}{SUFFIX}"[:100]
    raw["tuner"] = {"kind": "fixed", "step_factor": hand["step_factor"], "num_steps": hand["num_steps"],
                    "reward": t["reward"], "warmup_super_transitions": t["warmup_super_transitions"]}
    if t.get("cv_metric") is not None:
        raw["tuner"]["cv_metric"] = t["cv_metric"]
    raw["run"].update(super_transitions=super_transitions or cfg.run.super_transitions, until=None, plots=False)
    try:
        return parse(raw, f"{source} (tuner.compare_with)")
    except ConfigError as e:
        raise ConfigError(f"{source}: tuner.compare_with = {hand!r}: as a fixed tuner: {e}") from None


def check_sibling(cfg: Config, source: str, out, resume: bool) -> None:
    """Before a run with ``tuner.compare_with`` starts: its setting fits (:func:`fixed_config`), and a new run
    does not find a hand-tuned run of another in its sibling directory (ConfigError naming it)."""
    if cfg.tuner.compare_with is None:
        return
    fixed_config(cfg, source)
    there = sibling(out)
    if there.exists() and not resume:
        raise ConfigError(f"{source}: tuner.compare_with: {there} (where this run's hand-tuned comparison goes) "
                          f"already exists; choose another --out, or --resume the run it belongs to")


def run_fixed(cfg: Config, source: str, out, summary: dict, say=None) -> dict:
    """The hand-tuned run of the finished run in ``out`` (summary ``summary``): started, resumed when
    interrupted, or read when finished; its summary with ``run_dir``."""
    there = sibling(out)
    fixed = fixed_config(cfg, source, summary["super_transitions"])
    if (there / "summary.json").is_file():
        return {"run_dir": str(there), **json.loads((there / "summary.json").read_text())}
    if say is not None:
        h = cfg.tuner.compare_with
        say(f"the same {summary['super_transitions']} super-transitions with the hand-tuned setting eps="
            f"{h.step_factor:g} L={h.num_steps} (tuner.compare_with) into {there}")
    got = run_experiment(fixed, there, source=f"{source} (tuner.compare_with)", resume=there.exists(), quiet=True,
                         warn=False)                   # what it found: the comparison line, its summary.json
    return {"run_dir": str(there), **got}


def _first_test(summary: dict) -> tuple:
    """(test set name, its ESS per 1000 gradients {min, median} or {}, error name, its error) of the first test
    set (None where the run has none)."""
    d = summary.get("diagnostics") or {}
    metric = next((k for k in ("test_mse", "test_error_rate") if summary.get(k)), None)
    name = next(iter(d.get("test") or summary.get(metric) or {}), None)
    ess = ((d.get("test") or {}).get(name) or {}).get("ess_per_1000_gradients") or {}
    error = (summary.get(metric) or {}).get(name)
    return name, ess, metric and metric[5:], error


def versus_line(cfg: Config, tuned: dict, fixed: dict) -> str:
    """One line: the tuned run against its hand-tuned run at the same compute, by the ESS of the first test
    set's predictions per 1000 gradients (smallest over outputs), its test error and the largest R-hat (with the
    hand-tuned chains' verdict)."""
    h = cfg.tuner.compare_with
    name, ea, metric, a = _first_test(tuned)
    _, eb, _, b = _first_test(fixed)
    ga, gb = ((s.get("diagnostics") or {}).get("gradients", s.get("leapfrog_steps")) for s in (tuned, fixed))

    def num(v, f):
        return "-" if v is None else format(v, f)
    parts = []
    if ea.get("min") is not None and eb.get("min") is not None:
        ratio = f"{ea['min'] / eb['min']:.2f}x; " if eb["min"] else ""
        parts.append(f"ESS per 1000 gradients {ea['min']:.3f} vs {eb['min']:.3f} ({ratio}smallest over the {name} "
                     f"predictions)")
    if metric:
        parts.append(f"{name} {metric} {num(a, '.5g')} vs {num(b, '.5g')}")
    ra, rb = ((s.get("diagnostics") or {}).get("rhat_max") for s in (tuned, fixed))
    verdict = {"met": "met", "moving": "still moving", "apart": "settled apart"}.get(
        (fixed.get("diagnostics") or {}).get("verdict"))
    parts.append(f"R-hat {num(ra, '.3f')} vs {num(rb, '.3f')}" + (f" ({verdict})" if verdict else ""))
    return (f"versus hand-tuned eps={h.step_factor:g} L={h.num_steps}, the same {tuned['super_transitions']} "
            f"super-transitions ({num(ga, ',')} and {num(gb, ',')} gradients; {fixed['run_dir']}): "
            + ", ".join(parts))


def draw(out) -> list:
    """The figures of the finished run in ``out`` (``adaptive-hmc plot``), their paths."""
    from .plots import plot_run
    return [str(p) for p in plot_run(out)]
