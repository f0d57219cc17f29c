"""The slowest quantity's movement (reward "slowest"): its value on records whose answer is known, its
invariance to the quantities' units, and that it ranks a fast-mixing super-transition above a slow one."""
import numpy as np
import pytest

from adaptive_hmc.engine.rewards import LAG_SHARE, slowest_movement
from adaptive_hmc.engine.super_transition import SuperTransitionResult
from adaptive_hmc.samplers.chain import new_record


def _result(hyper, energy, L=10, extra=0):
    R, n, H = hyper.shape
    rec = new_record(R, n, H)
    rec.hyper[...] = hyper
    rec.energy[...] = energy
    rec.num_steps[...] = L
    rec.gradients[...] = L + extra
    return SuperTransitionResult(0, 0.1, L, n, rec, 1.0, None)


def _ar1(rng, R, n, rho, v):
    y = np.empty((R, n, v))
    y[:, 0] = rng.normal(size=(R, v))
    for t in range(1, n):
        y[:, t] = rho * y[:, t - 1] + np.sqrt(1 - rho ** 2) * rng.normal(size=(R, v))
    return y


def test_independent_draws_move_about_one_spread_and_the_slowest_quantity_decides():
    rng = np.random.default_rng(0)
    iid = np.exp(rng.normal(size=(4, 400, 3)))
    r = slowest_movement(_result(iid, rng.normal(size=(4, 400))))
    assert r == pytest.approx(1.0, abs=0.1)
    slow = iid.copy()
    slow[:, :, 1] = np.exp(_ar1(rng, 4, 400, 0.999, 1)[:, :, 0])         # one slow hyperparameter decides
    assert slowest_movement(_result(slow, rng.normal(size=(4, 400)))) < 0.3
    assert LAG_SHARE == 0.25


def test_units_do_not_matter_and_fixed_quantities_are_left_out():
    rng = np.random.default_rng(1)
    h = np.exp(_ar1(rng, 4, 200, 0.95, 2))
    e = _ar1(rng, 4, 200, 0.9, 1)[:, :, 0]
    r = slowest_movement(_result(h, e))
    assert slowest_movement(_result(h * [10.0, 0.001], 50 * e + 3)) == pytest.approx(r, rel=1e-9)
    fixed = np.concatenate([h, np.ones((4, 200, 1))], axis=2)                # a fixed hyperparameter (shape inf)
    assert slowest_movement(_result(fixed, e)) == pytest.approx(r, rel=1e-9)


def test_faster_mixing_is_rewarded_more_and_extra_gradients_cost():
    """Power: AR(1) chains of autocorrelation 0.9 per iteration score above those of 0.999, in every seed; a
    super-transition whose Gibbs updates cost a gradient per leapfrog step scores half."""
    for s in range(10):
        rng = np.random.default_rng(s)
        fast, slow = (_ar1(rng, 4, 200, rho, 3) for rho in (0.9, 0.999))
        assert slowest_movement(_result(np.exp(fast[:, :, :2]), fast[:, :, 2])) > \
            slowest_movement(_result(np.exp(slow[:, :, :2]), slow[:, :, 2]))
    r = _result(np.exp(fast[:, :, :2]), fast[:, :, 2])
    assert slowest_movement(_result(np.exp(fast[:, :, :2]), fast[:, :, 2], extra=10)) == \
        pytest.approx(0.5 * slowest_movement(r))
    assert slowest_movement(_result(np.exp(fast[:, :1, :2]), fast[:, :1, 2])) == 0.0
