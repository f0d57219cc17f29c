"""The posterior predictive of kept samples: the one object that turns a
run's (or a fitted estimator's) kept weight vectors into predictions on new
inputs, for :class:`~adaptive_hmc.rundir.finished_run.Run`, the estimators and the
reports alike.

Flow position: data, models -> **posterior** -> results, estimator.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..data import Standardizer
from ..models.mlp import MLPSpec, predict
from ..models.predictive import predictive_moments, predictive_probabilities


class Posterior(NamedTuple):
    """Kept samples of a network and the maps around it: ``weights`` (S, D),
    ``noise`` precisions (S, n_out) in the chains' units, each sample's
    ``sample_weight`` (S,) in the averages, ``input_map`` (a raw input row to
    the network's inputs) and, for regression, the chains' target scale
    (``target_mean``, ``target_sd``: original = mean + sd x network output)."""

    spec: MLPSpec
    weights: np.ndarray
    noise: np.ndarray
    sample_weight: np.ndarray
    input_map: Standardizer
    target_mean: np.ndarray
    target_sd: np.ndarray

    @property
    def likelihood(self) -> str:
        return self.spec.likelihood

    def outputs_at(self, Xs) -> tuple:
        """Network outputs (S, N, n_out) at inputs Xs in the network's units,
        and the noise precisions (S, n_out), both in the targets' original
        units (regression; logits and the stored precisions otherwise)."""
        F = predict(self.spec, self.weights, Xs)
        if self.likelihood != "gaussian":
            return F, self.noise
        return self.target_mean + self.target_sd * F, self.noise / self.target_sd ** 2

    def outputs(self, X) -> tuple:
        """:meth:`outputs_at` raw input rows X (N, width of the input map)."""
        X = np.asarray(X, dtype=np.float64)
        width = self.input_map.width or self.input_map.mean.size
        if X.ndim != 2 or X.shape[1] != width:
            raise ValueError(f"inputs have shape {X.shape}; the network takes (N, {width})")
        return self.outputs_at(self.input_map.transform(X))

    def predict(self, X, return_std: bool = False):
        """Regression: the predictive mean (N, n_out) in the targets' units,
        with ``return_std`` also its sd, noise included. Classification: the
        label (class index) of the averaged class probabilities."""
        if self.likelihood != "gaussian":
            return self.predict_proba(X).argmax(axis=1)
        F, noise = self.outputs(X)
        mean, var = predictive_moments(F, noise, self.sample_weight)
        return (mean, np.sqrt(var)) if return_std else mean

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (N, K) averaged over the samples by their weights."""
        if self.likelihood == "gaussian":
            raise ValueError("a regression posterior has no class probabilities; use predict")
        F, _ = self.outputs(X)
        return predictive_probabilities(F, self.likelihood, self.sample_weight)
