"""A finished run read back from its directory as one typed object
(:class:`Run`, :func:`read_run`): its config, summary, log, predictions and
kept samples, the chains' roles, and predictions at new inputs from them.

Flow position: results -> **finished_run** -> reports, plots, export, elpd, CLI.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import numpy as np
import yaml

from ..config import Config, ConfigError, DensityConfig, parse
from ..data import Standardizer
from ..models.mlp import MLPSpec
from .posterior import Posterior
from ..engine.network_options import chain_indices
from ..tuners.registry import tuner_from_state
from .results import CONFIG, LOG, POSTERIOR, PREDICTIONS, SAMPLES, SUMMARY, TUNER, RunDir, RunError, is_density_run
from .store import npz_problem


class Run(NamedTuple):
    """A finished run of a network, as read from its directory; :meth:`predict` and
    :meth:`predict_proba` use its kept samples on new inputs. ``network``
    (True) is what a verb asks of a run read by :func:`read_run`."""

    network = True

    dir: Path
    config: Config
    spec: MLPSpec
    summary: dict
    log: list
    predictions: dict   # arrays of predictions.npz
    samples: dict       # weights (S, D), noise_precision (S, n_out), chain and weight (S,) of the kept samples
    tuner_state: dict

    def tuner(self):
        """The tuner as it ended (a BanditTuner refits its reward model from its history)."""
        return tuner_from_state(self.tuner_state)

    def with_network(self, what: str) -> "Run":
        """This run (a verb that needs a network's ``what`` asks it: :meth:`DensityRun.with_network`)."""
        return self

    @property
    def likelihood(self) -> str:
        return self.spec.likelihood

    @property
    def n_cv(self) -> int:
        """Cross-validation replicas: the first ``n_cv`` chains; the others sample the posterior."""
        layout = self.config.layout
        return layout.k if layout.data == "folds" else 0

    def chain_role(self, r: int) -> str:
        """What chain ``r`` samples: "full j" (the posterior given every training
        case) or "fold j" (a cross-validation replica, its fold left out)."""
        return f"fold {r}" if r < self.n_cv else f"full {r - self.n_cv}"

    def chain_indices(self, chains: str) -> np.ndarray:
        """Rows of ``chains`` ("all", "full", "replicas") in the per-chain arrays."""
        return chain_indices(chains, self.n_cv, self.predictions["history_count"].shape[1])

    def posterior(self, chains: str | None = None, keep=None) -> Posterior:
        """The kept samples of ``chains`` (default: the config's
        ``replicas.predict_from``), or those ``keep`` picks (a mask or indices
        into samples.npz's rows), as a :class:`~adaptive_hmc.rundir.posterior.Posterior`."""
        chains = chains or self.config.layout.predict_from
        if keep is None:
            keep = np.isin(self.samples["chain"], self.chain_indices(chains))
        if not np.asarray(keep).any():
            raise RunError(f"{self.dir}: no kept samples of chains {chains!r} (run.thin: 0 keeps none, and "
                           f"burn-in keeps none of its super-transitions); rerun with run.thin > 0")
        s = self.samples
        return Posterior(self.spec, s["weights"][keep], s["noise_precision"][keep], s["weight"][keep],
                         self.input_map, s["target_mean"], s["target_sd"])

    @property
    def input_map(self) -> Standardizer:
        """The map from a raw input row to the network's inputs (selection, log1p, standardisation)."""
        s = self.samples
        return Standardizer(s["input_mean"], s["input_sd"], s.get("input_columns", np.empty(0, np.int64)),
                            bool(s.get("input_log1p", False)), int(s.get("input_width", s["input_mean"].size)),
                            tuple(str(n) for n in s.get("input_names", ())),
                            tuple(str(n) for n in s.get("target_names", ())),
                            tuple(str(n) for n in s.get("target_classes", ())),
                            tuple((c, tuple(lv)) for c, lv in json.loads(str(s.get("input_levels", "[]")))))

    @property
    def n_raw_inputs(self) -> int:
        """Columns of a raw input row (a feature selection keeps fewer for the network)."""
        return self.input_map.width

    def predict(self, X, return_std: bool = False, chains: str | None = None):
        """:meth:`Posterior.predict <adaptive_hmc.rundir.posterior.Posterior.predict>` of :meth:`posterior`."""
        return self.posterior(chains).predict(X, return_std)

    def predict_proba(self, X, chains: str | None = None) -> np.ndarray:
        """Class probabilities (N, K), averaged over the kept samples (by their weights)."""
        if self.likelihood == "gaussian":
            raise RunError(f"{self.dir}: a regression run has no class probabilities; use predict")
        return self.posterior(chains).predict_proba(X)

    def test_sets(self) -> list:
        """(name, slice of the test cases) of each test set."""
        return [(str(n), slice(int(a), int(b)))
                for n, (a, b) in zip(self.predictions["test_names"], self.predictions["test_bounds"])]


class DensityRun(NamedTuple):
    """A finished run of a user's log density (``model.kind: density``), as
    read from its directory: its config, summary and log, and its draws
    (:meth:`inference_data`, from ``posterior.nc``). It has no network
    (``network`` False): no predictions, cases or kept weights."""

    dir: Path
    config: DensityConfig
    summary: dict
    log: list

    network = False

    @property
    def posterior_file(self) -> Path:
        """The run's draws, ArviZ InferenceData in netCDF."""
        return self.dir / POSTERIOR

    def inference_data(self):
        """The run's draws (posterior, sample_stats, the tuner's log in attrs); RunError naming a damaged file."""
        from ..diagnostics import arviz
        try:
            return arviz().from_netcdf(str(self.posterior_file))
        except (OSError, ValueError, KeyError) as e:
            raise RunError(f"{self.posterior_file}: missing or damaged ({type(e).__name__}: {e})") from None

    def with_network(self, what: str):
        """RunError: a verb asked this run for a network's ``what``."""
        raise RunError(f"{self.dir}: a run of a log density, which has no network and so no {what}; compare, "
                       f"plot and export read it")


def read_run(d) -> Run | DensityRun:
    """The finished run in directory ``d``, of a network (:class:`Run`) or of a
    log density (:class:`DensityRun`); :class:`RunError` says what is missing
    or damaged, naming the file."""
    rd = RunDir(d)
    if not rd.is_finished:
        raise RunError(f"{rd.path}: not a finished run directory (no {SUMMARY})")

    def read(name, how):
        try:
            return how(rd.file(name))
        except (OSError, ValueError, KeyError, ConfigError, yaml.YAMLError) as e:
            raise RunError(f"{rd.file(name)}: missing or damaged ({npz_problem(e)})") from None

    if is_density_run(rd.path):
        return _density_run(rd, read)

    def arrays(path):
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    cfg = read(CONFIG, lambda p: parse(yaml.safe_load(p.read_text()), str(p)))
    pred, samples = read(PREDICTIONS, arrays), read(SAMPLES, arrays)
    summary = read(SUMMARY, lambda p: json.loads(p.read_text()))
    tuner = read(TUNER, lambda p: json.loads(p.read_text()))
    if not isinstance(summary, dict) or "compile_s" not in summary or "chain" not in samples:
        raise RunError(f"{rd.path}: written by an older version of adaptive_hmc, whose run directories this "
                       f"one does not read; run the config again")
    try:
        n_out = pred["Y_test"].shape[1]
        samples.setdefault("target_mean", np.zeros(n_out))      # runs from before target standardisation
        samples.setdefault("target_sd", np.ones(n_out))
        samples.setdefault("weight", np.ones(len(samples["chain"])))   # runs from before sample weights
        return Run(rd.path, cfg, MLPSpec.from_arch(samples["arch"]), summary, rd.read_log(), pred, samples, tuner)
    except (OSError, ValueError, KeyError, IndexError) as e:
        raise RunError(f"{rd.path}: a file of the run directory is missing or damaged "
                       f"({type(e).__name__}: {e})") from None


def _density_run(rd: RunDir, read) -> DensityRun:
    """:func:`read_run` of a density run (``read(name, how)`` reads a file of it, naming it when damaged);
    the log of a run written before log.jsonl was kept comes from its posterior.nc."""
    if not rd.file(POSTERIOR).is_file():
        raise RunError(f"{rd.path}: a density run without its {POSTERIOR}: not finished (resume it with --resume)")
    cfg = read(CONFIG, lambda p: parse(yaml.safe_load(p.read_text()), str(p)))
    summary = read(SUMMARY, lambda p: json.loads(p.read_text()))
    if rd.file(LOG).is_file():
        log = rd.read_log()
    else:
        import ast
        from ..diagnostics import arviz
        log = read(POSTERIOR, lambda p: ast.literal_eval(arviz().from_netcdf(str(p)).attrs["tuner_log"]))
    return DensityRun(rd.path, cfg, summary, log)
