"""A user's own log density: the target's kernels against plain NumPy, the
shipped posteriordb densities against their reference draws (zero-mean score,
finite differences), the warm-up's parts, and the whole path (warm-up, bandit,
InferenceData) on a Gaussian with known moments, within Monte Carlo standard
errors from the chains' own ESS, with a check that the test has power."""
import math
import re
import shutil

import arviz as az
import numba
import numpy as np
import pytest

from adaptive_hmc.front.general import sample
from adaptive_hmc.rundir.metrics import untimed
from adaptive_hmc.models.base import NoHyper, energy_grad
from adaptive_hmc.models.density import LogDensity
from adaptive_hmc.models import posteriordb as pdb
from adaptive_hmc.samplers.adaptation import DualAveraging, pooled_variance, windows
from adaptive_hmc.engine.chain_set import advance

SD = np.array([1.0, 10.0, 0.1, 3.0])
MEAN = np.array([0.5, -20.0, 0.05, 1.0])


@numba.njit
def gaussian(q):
    z = (q - MEAN) / SD
    return -0.5 * np.sum(z * z), -z / SD


def gaussian_py(q):
    z = (q - MEAN) / SD
    return -0.5 * float(np.sum(z * z)), -z / SD


def _eight_schools(tmp_path, warmup: int, super_transitions: int):
    """configs/eight_schools_density.yaml with its density file copied to ``tmp_path``, shortened; its path."""
    import shutil
    import yaml
    from pathlib import Path
    configs = Path(__file__).resolve().parents[1] / "configs"
    shutil.copy(configs / "eight_schools.py", tmp_path / "eight_schools.py")
    raw = yaml.safe_load((configs / "eight_schools_density.yaml").read_text())
    raw["sampler"] = {"warmup": warmup}
    raw["run"].update(super_transitions=super_transitions)
    cfg = tmp_path / "es.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    return cfg


def _interrupted_after(monkeypatch, i: int):
    """Make sample()'s outer loop raise KeyboardInterrupt after super-transition ``i`` (as Ctrl-C would)."""
    from adaptive_hmc.engine import driver
    real = driver.iterate

    def interrupted(chains, *args, **kw):
        if chains.n_super > i:
            raise KeyboardInterrupt
        return real(chains, *args, **kw)
    monkeypatch.setattr(driver, "iterate", interrupted)


@pytest.mark.parametrize("fn", [gaussian, gaussian_py], ids=["compiled", "python"])
def test_the_target_is_minus_the_log_density_in_scaled_coordinates(fn):
    model = LogDensity(fn, 4)
    assert model.compiled == (fn is gaussian)
    scale = np.array([2.0, 5.0, 0.5, 1.0])
    t = model.chain_target(scale)
    z = np.array([0.3, -4.0, 0.2, 1.5])
    g = np.empty(4)
    u = energy_grad(z, g, t, NoHyper.empty())                # the compiled kernel's path, from Python
    lp, grad = gaussian_py(z * scale)
    assert u == pytest.approx(-lp, rel=1e-12)
    np.testing.assert_allclose(g, -grad * scale, rtol=1e-12)


def test_bad_densities_are_divergences_or_clear_errors():
    def raises(q):
        if q[0] > 1.0:
            raise ZeroDivisionError("boom")
        return gaussian_py(q)
    with pytest.raises(RuntimeError, match="the log density raised ZeroDivisionError: boom"):
        sample(raises, np.zeros((2, 4)) + MEAN, warmup=60, super_transitions=2, budget=200)

    @numba.njit
    def nan_far(q):                                           # NaN beyond |q_0 - mean| > 2 sd: a wall
        lp, g = gaussian(q)
        return (lp if abs(q[0] - MEAN[0]) < 2.0 else np.nan), g
    idata = sample(nan_far, np.zeros((2, 4)) + MEAN, warmup=100, super_transitions=3, budget=300, seed=3)
    x = idata.posterior["q"].values[..., 0]
    assert np.all(np.abs(x - MEAN[0]) < 2.0)                  # never accepted beyond the wall
    assert idata.sample_stats.diverging.values.sum() > 0
    with pytest.raises(ValueError, match=r"initial position 0 raised ValueError"):
        sample(gaussian, np.zeros((2, 3)))                    # 3 coordinates for a 4-d density
    with pytest.raises(ValueError, match=r"gradient at initial position 0 has shape \(4,\); expected \(3,\)"):
        sample(lambda q: (0.0, np.zeros(4)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="at initial position 1 is -inf"):
        sample(lambda q: (-np.inf if q[0] > 0 else 0.0, np.zeros(1)), np.array([[0.0], [1.0]]))
    with pytest.raises(ValueError, match="sizes add up to 3, not dim=4"):
        sample(gaussian, np.zeros((2, 4)), names={"a": (1,), "b": (2,)})


def test_a_density_super_transition_is_a_pure_function_of_its_state():
    """density_super_transition(setup, state, action, budget) -> (state, result): the same state gives
    the same bits twice, the state given is left as it was, and advancing the chain set is that function
    (the network's super_transition has the same shape); the draws are the result's alone (the sink's unit),
    not kept on the chains."""
    from adaptive_hmc.engine.density_chains import DensityChains, density_super_transition
    from adaptive_hmc.samplers.settings import Action
    chains = DensityChains(LogDensity(gaussian, 4), MEAN + np.array([[1.0, -1, 0.5, 0], [0.2, 0.1, -0.3, 1]]), 4,
                           threads=2)
    chains.warm_up(40)
    before = chains.state
    saved = [c.position.copy() for c in before.chains], before.streams, before.n_super
    (s1, r1), (s2, r2) = (density_super_transition(chains, before, Action(0.8, 5), 60) for _ in range(2))
    assert np.array_equal(r1.unit, r2.unit) and np.array_equal(r1.record.accept_prob, r2.record.accept_prob)
    assert all(np.array_equal(a, c.position) for a, c in zip(saved[0], before.chains))
    assert before.streams == saved[1] and before.n_super == saved[2] == s1.n_super - 1
    assert s1.streams != before.streams and not np.array_equal(s1.chains[0].position, before.chains[0].position)
    result = advance(chains, Action(0.8, 5), 60)
    assert np.array_equal(result.unit, r1.unit) and chains.n_super == 1
    draws, stats = DensityChains.unit(result)
    assert np.array_equal(draws, np.stack(r1.unit)) and not hasattr(chains, "draws")
    assert set(stats) == {"accept_prob", "divergent", "num_steps", "energy", "temperature"}


def test_windows_are_stans():
    assert windows(1000) == [(75, 100), (100, 150), (150, 250), (250, 450), (450, 950)]
    assert windows(300) == [(75, 100), (100, 150), (150, 250)]
    assert windows(100) == [(15, 90)]
    assert windows(10) == []


def test_window_adaptation_is_stans_warm_up_as_init_update_final():
    """The metric's scale comes exactly at each slow window's end, as the sd of that window's positions
    (pooled within chains); the step adapts by dual averaging in between; a step held at its floor is stuck."""
    from adaptive_hmc.samplers.adaptation import STEP_FLOOR_PATIENCE, WindowAdaptation
    rng = np.random.default_rng(0)
    w = WindowAdaptation(300)
    assert w.checks == [8, 16, 32, 64] and w.num_steps() == 32             # 2 sds at the first step, 1/16
    scales, kept = {}, {}
    for i in range(300):
        pos = rng.normal(size=(3, 2)) * [1.0, 5.0]
        kept.setdefault(next((b for a, b in w.slow if a <= i < b), None), []).append(pos)
        out = w.update(i, 0.9, pos)
        if out is not None:
            scales[i + 1] = out
    assert list(scales) == [b for _, b in w.slow] == [100, 150, 250]
    for end, scale in scales.items():
        assert np.allclose(scale, np.sqrt(pooled_variance(np.array(kept[end]).transpose(1, 0, 2))))
    assert w.final() > 1.0 / 16 and not w.stuck                    # acceptance 0.9 > 0.8: the step grew
    w = WindowAdaptation(300)
    for i in range(200):
        w.update(i, 0.0, np.zeros((3, 2)))
        if w.stuck:
            break
    assert w.stuck and i + 1 < 200 and w.at_floor == STEP_FLOOR_PATIENCE


def test_dual_averaging_finds_the_step_of_the_target_acceptance():
    """On a model acceptance exp(-step^2) (0.8 at step 0.472), the averaged step converges there."""
    da = DualAveraging(0.01, target=0.8)
    step = 0.01
    for _ in range(3000):
        step = da.update(math.exp(-step ** 2))
    assert da.final == pytest.approx(math.sqrt(-math.log(0.8)), rel=0.02)


def test_pooled_variance_is_the_within_chain_variance_regularised():
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(4, 5000, 2)) * [1.0, 3.0] + rng.normal(size=(4, 1, 2)) * 100   # far-apart chains
    var = pooled_variance(draws)
    np.testing.assert_allclose(var, [1.0, 9.0], rtol=0.05)


@pytest.mark.parametrize("name", pdb.NAMES)
def test_posteriordb_densities_have_zero_mean_score_under_their_reference(name):
    """E[grad log p] = 0 under the posterior: at the shipped reference draws
    (2000, thinned from posteriordb's 10000) every coordinate's mean gradient
    is within 4 standard errors of 0; the maps to and from the reference's
    parameters invert each other; the gradient matches finite differences."""
    p = pdb.posterior(name)
    f = pdb.load(name)
    draws = {str(n): f["draws"][:, i] for i, n in enumerate(f["parameters"])}
    Q = p.unconstrain(draws)
    back = p.constrain(Q)
    for n in p.parameters:
        np.testing.assert_allclose(back[n], draws[n], rtol=1e-9, atol=1e-12)
    G = np.array([p.logp_grad(q)[1] for q in Q])
    z = G.mean(axis=0) / (G.std(axis=0, ddof=1) / math.sqrt(len(G)))
    assert np.max(np.abs(z)) < 4.0, z
    h = 1e-5
    for q in Q[:2]:
        g = p.logp_grad(q)[1]
        fd = np.array([(p.logp_grad(q + h * e)[0] - p.logp_grad(q - h * e)[0]) / (2 * h) for e in np.eye(p.dim)])
        np.testing.assert_allclose(fd, g, rtol=1e-4, atol=1e-4 * (1 + np.abs(g).max()))


def test_the_zero_mean_score_check_has_power():
    """The same check on eight schools without the log-Jacobian of tau = exp(v) fails by far."""
    p = pdb.posterior("eight_schools_noncentered")
    f = pdb.load("eight_schools_noncentered")
    Q = p.unconstrain({str(n): f["draws"][:, i] for i, n in enumerate(f["parameters"])})
    G = np.array([p.logp_grad(q)[1] for q in Q])
    G[:, -1] -= 1.0                                           # d/dv of the missing + v
    z = G.mean(axis=0) / (G.std(axis=0, ddof=1) / math.sqrt(len(G)))
    assert np.max(np.abs(z)) > 10


def _moment_z(idata, mean, sd):
    """z of each coordinate's mean and sd against the truth, from the chains' own ESS."""
    x = idata.posterior["q"].values                           # (chains, draws, dim)
    zs, mcses = [], []
    for k in range(x.shape[2]):
        xk = x[..., k]
        m, s = xk.mean(), xk.std(ddof=1)
        mcse_m = s / math.sqrt(float(az.ess(xk)))
        d2 = (xk - m) ** 2
        mcse_s = d2.std(ddof=1) / math.sqrt(float(az.ess(d2))) / (2 * s)
        zs.append(((m - mean[k]) / mcse_m, (s - sd[k]) / mcse_s))
        mcses.append((mcse_m / sd[k], mcse_s / sd[k]))
    return np.array(zs), np.array(mcses)


@pytest.mark.statistical
def test_user_density_samples_a_known_gaussian():
    """Package defaults but a shorter run, from starts far out: means and sds
    within 4 MCSE of the truth (MCSE from ArviZ's ESS), R-hat under 1.02; the
    same draws against a truth shifted by 0.25 sd are rejected (power); the
    Python callable gives the very same draws; the thread count does not
    change them."""
    rng = np.random.default_rng(5)
    starts = MEAN + 3 * SD * rng.normal(size=(4, 4))
    idata = sample(gaussian, starts, warmup=500, super_transitions=12, budget=1000, seed=7)
    z, rel_mcse = _moment_z(idata, MEAN, SD)
    assert np.all(rel_mcse < 0.06), rel_mcse                 # precise enough to see a 0.25-sd error
    assert np.all(np.abs(z) < 4.0), z
    assert float(az.rhat(idata)["q"].max()) < 1.02
    shifted, _ = _moment_z(idata, MEAN + 0.25 * SD, SD * 1.25)
    assert np.all(np.abs(shifted) > 4.0), shifted              # the test would see such an error
    scale = np.array(idata.attrs["scale"])
    np.testing.assert_allclose(scale, SD, rtol=0.25)          # the metric learnt the scales
    assert idata.attrs["gradients"] > 12 * 4 * 1000 * 0.9
    py = sample(gaussian_py, starts, warmup=500, super_transitions=12, budget=1000, seed=7, threads=1)
    np.testing.assert_array_equal(py.posterior["q"].values, idata.posterior["q"].values)
    # the tuner's step factor is a factor of the warm-up's reference step (as a network's multiplies its
    # heuristic scales), within step_factor_bounds; each draw's step_size is that step in posterior sds
    factors = [e["step_factor"] for e in eval(idata.attrs["tuner_log"])]
    assert all(0.5 <= f <= 1.5 for f in factors) and len(set(factors)) > 1, factors
    steps = idata.sample_stats["step_size"].values[0]
    first = np.flatnonzero(np.diff(steps))[0] + 1 if np.any(np.diff(steps)) else steps.size
    np.testing.assert_allclose(steps[:first], factors[0] * idata.attrs["reference_step"], rtol=1e-15)


def test_sample_until_the_chains_meet_stops_when_they_do_or_at_its_time_limit():
    """``until``: sample() goes on past super_transitions until R-hat <= 1.01
    and the smallest bulk ESS reaches the target, judged at the
    super-transitions of check_due (the returned draws meet both, by ArviZ's
    own figures, and stopping one check earlier they did not), and its answer
    is right (within 4 MCSE); a time limit that is too short stops it at the
    first super-transition past super_transitions, says so in a warning and
    in attrs; a bad ``until`` is a ValueError naming it."""
    import json
    import warnings
    from sklearn.exceptions import ConvergenceWarning
    from adaptive_hmc.engine.driver import check_due
    rng = np.random.default_rng(5)
    starts = MEAN + 3 * SD * rng.normal(size=(4, 4))
    idata = sample(gaussian, starts, warmup=300, super_transitions=2, budget=300, seed=3,
                   until={"max_seconds": 600, "target_ess": 6000})
    conv = json.loads(idata.attrs["convergence"])
    n = conv["super_transitions"]
    assert conv["met"] and n > 5 and check_due(n, 2), conv
    assert float(az.rhat(idata)["q"].max()) <= 1.01 and float(az.ess(idata)["q"].min()) >= 6000
    z, _ = _moment_z(idata, MEAN, SD)
    assert np.all(np.abs(z) < 4.0), z
    earlier = max(c for c in range(2, n) if check_due(c, 2))      # the check before did not meet
    import ast
    from adaptive_hmc.engine.super_transition import iterations
    per_st = [iterations(300, e["num_steps"], True) for e in ast.literal_eval(idata.attrs["tuner_log"])]
    assert sum(per_st) == idata.posterior.sizes["draw"]
    draws = idata.posterior["q"].values[:, :sum(per_st[:earlier])]
    before = az.convert_to_dataset({"q": draws})
    assert float(az.rhat(before)["q"].max()) > 1.01 or float(az.ess(before)["q"].min()) < 6000
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", ConvergenceWarning)
        short = sample(gaussian, starts, warmup=300, super_transitions=2, budget=300, seed=3,
                       until={"max_seconds": 1e-6, "target_ess": 1e9})
    conv = json.loads(short.attrs["convergence"])
    assert not conv["met"] and conv["super_transitions"] == 2
    assert any("stopped at the time limit, until max_seconds=1e-06, after 2 super-transitions" in str(w.message)
               for w in said)
    for bad, message in (({"max_second": 5}, "a dict of max_seconds and target_ess"),
                         ({"target_ess": -1}, "until target_ess=-1: a number > 0")):
        with pytest.raises(ValueError, match=message):
            sample(gaussian, starts, warmup=10, super_transitions=1, until=bad)


@numba.njit
def funnel(q):
    """Neal's funnel: v ~ N(0, 3^2), x_k ~ N(0, e^v), k = 1..8, centred (q = [v, x])."""
    v, x = q[0], q[1:]
    s = np.sum(x * x)
    g = np.empty_like(q)
    g[0] = -v / 9.0 + 0.5 * s * np.exp(-v) - 0.5 * x.size
    g[1:] = -x * np.exp(-v)
    return -v * v / 18.0 - 0.5 * s * np.exp(-v) - 0.5 * x.size * v, g


def test_sample_says_when_its_answer_cannot_be_trusted():
    """A centred funnel: sample() warns that trajectories diverged and the
    draws may be biased (how many, and what to do); a Gaussian it samples
    well: no such warning (the check does not fire on everything)."""
    import warnings
    from sklearn.exceptions import ConvergenceWarning
    starts = np.random.default_rng(2).uniform(-2, 2, size=(4, 9))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        idata = sample(funnel, starts, warmup=300, super_transitions=6, seed=3)
    said = [str(w.message) for w in said if w.category is ConvergenceWarning]
    assert [m for m in said if re.search(r"trajectories after warm-up diverged .*reparameterise", m)], said
    assert [m for m in said if re.search(r"E-BFMI below 0.3 \(chain \d 0\.\d\d.*reparameterise", m)], said
    assert [m for m in said if re.search(r"have not met\. Run longer: the smallest bulk ESS, of q\[\d\], is \d+; at "
                                         r"this pace about [\d.]+ times the draws .*\(about \d+ more super-transitions, "
                                         r"\d+ s of sampling at this pace\)", m)], said
    assert "energy" in idata.sample_stats and np.min(az.bfmi(idata)) < 0.3
    starts = MEAN + SD * np.random.default_rng(5).normal(size=(4, 4))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        sample(gaussian, starts, warmup=500, super_transitions=12, budget=1000, seed=7)
    assert not [w for w in said if "diverged" in str(w.message) or "E-BFMI" in str(w.message)]


def test_bad_arguments_and_user_functions_are_clear_errors(tmp_path, capsys, monkeypatch):
    """sample() refuses a negative warm-up, no super-transitions and complex
    starts at once; a density config names the key when its file is not a
    .py, its function returns a string, its constrain raises or returns the
    wrong shape (before any sampling), or its Python function raises mid-run
    (exit 2, saying whether a checkpoint is there to --resume): never a
    traceback."""
    from adaptive_hmc.front.cli import main
    starts = MEAN + SD * np.random.default_rng(3).normal(size=(2, 4))
    for kw, message in ((dict(warmup=-1), "warmup=-1: an integer >= 0"),
                        (dict(super_transitions=0), "super_transitions=0: an integer >= 1"),
                        (dict(budget=2.5), "budget=2.5: an integer >= 1")):
        with pytest.raises(ValueError, match=message):
            sample(gaussian, starts, **kw)
    with pytest.raises(ValueError, match="initial_positions: real numbers, got dtype complex128"):
        sample(gaussian, starts + 1j)
    cfg = _eight_schools(tmp_path, warmup=50, super_transitions=2)
    (tmp_path / "es.txt").write_text("x")
    (tmp_path / "funcs.py").write_text(
        "import numpy as np\n"
        "def text(q):\n    return 'abc', q\n"
        "def raises(Q):\n    raise KeyError('tau')\n"
        "def short(Q):\n    return {'mu': Q[:1, 0]}\n"
        "def starts_only(Q):\n    return {'mu': Q[:4, 0]}\n"
        "calls = [0]\n"
        "def later(q):\n    calls[0] += 1\n    if calls[0] > 400:\n        raise ZeroDivisionError('late')\n"
        "    return -0.5 * float(q @ q), -q\n")
    import yaml
    base = yaml.safe_load(cfg.read_text())
    for change, message in (({"file": "es.txt"}, "model.file = 'es.txt': a Python file (NAME.py)"),
                            ({"file": "funcs.py", "function": "text"},
                             "model.function = 'text': the log density at initial position 0 returned ('abc'"),
                            ({"file": "funcs.py", "function": "later", "constrain": "raises"},
                             "model.constrain = 'raises': given draws Q (4, 10) (the starts) it raised KeyError: 'tau'"),
                            ({"file": "funcs.py", "function": "later", "constrain": "short"},
                             "model.constrain = 'short': given draws Q (4, 10) it must return"),
                            ({"file": "funcs.py", "function": "later", "constrain": "starts_only"},   # rows of 4 only
                             "model.constrain = 'starts_only': given draws Q (8, 10) it must return {name: array "
                             "with 8 rows}")):
        raw = dict(base, model={**{k: v for k, v in base["model"].items() if k not in ("constrain", "names")},
                                **change})
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(raw))
        assert main(["run", str(path), "--out", str(tmp_path / "never"), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
        assert not (tmp_path / "never").exists()
    raw = dict(base, model={**base["model"], "file": "funcs.py", "function": "later"})
    raw["model"].pop("constrain", None)
    raw["model"].pop("names", None)
    path = tmp_path / "late.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "late"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "model.function = 'later': the log density raised ZeroDivisionError: late" in err, err
    assert "Traceback" not in err and ("--resume" in err) == (tmp_path / "late" / "checkpoint.npz").is_file()


@pytest.mark.slow
def test_quick_posteriordb_experiment_agrees_with_the_references(tmp_path):
    """experiments/posteriordb.py --quick: two posteriors, short runs, each
    mean and sd within 4 combined MCSE of posteriordb's reference; NUTS's rows
    beside ours where numpyro is installed."""
    import importlib.util
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "posteriordb.md"
    r = subprocess.run([sys.executable, str(root / "experiments" / "posteriordb.py"), "--quick", "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(out.with_suffix(".json").read_text())["rows"]
    ours = [row for row in rows if row["sampler"] == "adaptive_hmc"]
    assert [row["posterior"] for row in ours] == ["eight_schools_noncentered", "blr"]
    for row in ours:
        assert row["z_mean"] < 4 and row["z_sd"] < 4 and row["gradients"] > 0 and row["ess_min"] > 50, row
    has_nuts = importlib.util.find_spec("numpyro") is not None
    assert len(rows) == (4 if has_nuts else 2)
    assert "| eight_schools_noncentered | adaptive_hmc |" in out.read_text()


def test_an_interrupted_run_resumes_from_its_checkpoint_to_the_same_draws(tmp_path):
    """Stopped after 2 and then 3 super-transitions and resumed, a run makes the
    very draws, statistics and tuner log of one run straight through; a
    finished checkpoint is returned without work; other arguments are refused."""
    starts = MEAN + SD * np.random.default_rng(3).normal(size=(3, 4))
    kw = dict(warmup=200, super_transitions=6, budget=300, seed=5)
    whole = sample(gaussian, starts, **kw)
    path = tmp_path / "run"
    assert sample(gaussian, starts, checkpoint=path, stop_after=2, **kw) is None
    assert sample(gaussian, starts, checkpoint=path, stop_after=3, **kw) is None
    for resumed in (sample(gaussian, starts, checkpoint=path, **kw), sample(gaussian, starts, checkpoint=path, **kw)):
        np.testing.assert_array_equal(resumed.posterior["q"].values, whole.posterior["q"].values)
        np.testing.assert_array_equal(resumed.sample_stats.acceptance_rate.values,
                                      whole.sample_stats.acceptance_rate.values)
        assert resumed.attrs["tuner_log"] == whole.attrs["tuner_log"]
        assert resumed.attrs["gradients"] == whole.attrs["gradients"]
    with pytest.raises(ValueError, match=r"written by a run with other seed; resume with the same arguments, or "
                                         r"give another checkpoint path \(a run's --out\)"):
        sample(gaussian, starts, checkpoint=path, **dict(kw, seed=6))
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "checkpoint.npz").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a checkpoint of sample"):
        sample(gaussian, starts, checkpoint=tmp_path / "junk", **kw)
    with pytest.raises(ValueError, match="a folder for the run's checkpoint.npz.*and this is a file"):
        sample(gaussian, starts, checkpoint=tmp_path / "junk" / "checkpoint.npz", **kw)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "thesis.tex").write_text("x")
    with pytest.raises(ValueError, match=r"holds files that are not a run's \(thesis.tex\)"):
        sample(gaussian, starts, checkpoint=tmp_path / "notes", **kw)


def test_a_damaged_checkpoint_falls_back_to_the_previous_one_and_a_run_directory_is_locked(tmp_path, capsys,
                                                                                           monkeypatch):
    """The checkpoint before the newest is kept: a damaged newest one resumes
    from it, to the very draws of a run straight through (saying so); both
    damaged is a CheckpointError naming each. A density's run directory is
    locked, refuses a folder of someone else's files, and reports a damaged
    checkpoint with exit 2, never a traceback."""
    from adaptive_hmc.front.cli import main
    from adaptive_hmc.rundir.density_checkpoint import CheckpointError
    from adaptive_hmc.rundir.results import RunDir
    starts = MEAN + SD * np.random.default_rng(3).normal(size=(3, 4))
    kw = dict(warmup=200, super_transitions=5, budget=300, seed=5)
    whole = sample(gaussian, starts, **kw)
    path = tmp_path / "run"
    assert sample(gaussian, starts, checkpoint=path, stop_after=3, **kw) is None
    (path / "checkpoint.npz").write_bytes((path / "checkpoint.npz").read_bytes()[:100])
    resumed = sample(gaussian, starts, checkpoint=path, **kw)
    np.testing.assert_array_equal(resumed.posterior["q"].values, whole.posterior["q"].values)
    assert "resuming from the previous checkpoint" in capsys.readouterr().err
    for name in ("checkpoint.npz", "checkpoint.prev.npz"):
        (path / name).write_bytes(b"junk")
    with pytest.raises(CheckpointError, match="checkpoint.npz: not a checkpoint of sample.*checkpoint.prev.npz: not a "
                                              "checkpoint"):
        sample(gaussian, starts, checkpoint=path, **kw)

    cfg = _eight_schools(tmp_path, warmup=100, super_transitions=3)
    out = tmp_path / "held"
    held = RunDir(out).lock()
    try:
        assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 2
        assert "in use by another run" in capsys.readouterr().err
    finally:
        held.close()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("x")
    assert main(["run", str(cfg), "--out", str(tmp_path / "mine"), "--quiet"]) == 2
    assert "holds files this package did not write (thesis.tex)" in capsys.readouterr().err
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "x" and len(list((tmp_path / "mine").iterdir())) == 1
    with monkeypatch.context() as m:
        _interrupted_after(m, 0)
        assert main(["run", str(cfg), "--out", str(tmp_path / "d"), "--quiet"]) == 130
    for name in ("checkpoint.npz", "checkpoint.prev.npz"):
        (tmp_path / "d" / name).write_bytes(b"junk")
    capsys.readouterr()
    assert main(["run", str(cfg), "--out", str(tmp_path / "d"), "--quiet", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "checkpoint.prev.npz: not a checkpoint of sample()" in err and "Traceback" not in err, err
    with monkeypatch.context() as m:                                  # a damaged shard of the draws
        _interrupted_after(m, 1)
        assert main(["run", str(cfg), "--out", str(tmp_path / "e"), "--quiet"]) == 130
    shard = tmp_path / "e" / "store" / "000001.npz"
    shard.write_bytes(shard.read_bytes()[:100])
    capsys.readouterr()
    assert main(["run", str(cfg), "--out", str(tmp_path / "e"), "--quiet", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "000001.npz: damaged" in err and "the draws are missing or damaged" in err and "Traceback" not in err, err
    named = ("checkpoint.npz", "checkpoint.prev.npz", "store")                 # the advice leads somewhere:
    assert all(str(tmp_path / "e" / n) in err for n in named), err              # removing what it names
    for n in named:
        p = tmp_path / "e" / n
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    assert main(["run", str(cfg), "--out", str(tmp_path / "e"), "--quiet"]) == 0   # starts the run again


def test_a_density_run_keeps_the_run_directory_of_a_network_run_and_an_old_one_is_refused_or_read(
        tmp_path, capsys, monkeypatch):
    """sample(checkpoint=DIR) and a configured density run write the layout of a network run (checkpoint.npz,
    checkpoint.prev.npz, store/, log.jsonl; no checkpoint.draws/), through the one sink and one restore; a
    directory of the earlier layout (its draws in checkpoint.draws/) is refused on resume with exit 2 and a
    message saying so, and its finished results still read."""
    from adaptive_hmc.front.cli import main
    from adaptive_hmc.rundir.finished_run import read_run
    starts = MEAN + SD * np.random.default_rng(3).normal(size=(3, 4))
    sample(gaussian, starts, checkpoint=tmp_path / "s", warmup=100, super_transitions=3, budget=300, seed=1)
    assert {p.name for p in (tmp_path / "s").iterdir()} == {"checkpoint.npz", "checkpoint.prev.npz", "store",
                                                            "log.jsonl"}
    assert len((tmp_path / "s" / "log.jsonl").read_text().splitlines()) == 3
    cfg = _eight_schools(tmp_path, warmup=100, super_transitions=3)
    with monkeypatch.context() as m:
        _interrupted_after(m, 1)
        assert main(["run", str(cfg), "--out", str(tmp_path / "old"), "--quiet"]) == 130
    (tmp_path / "old" / "store").rename(tmp_path / "old" / "checkpoint.draws")      # as an earlier version left it
    capsys.readouterr()
    assert main(["run", str(cfg), "--out", str(tmp_path / "old"), "--quiet", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "written by an earlier version, which kept the draws in checkpoint.draws/" in err, err
    assert "Traceback" not in err
    assert main(["run", str(cfg), "--out", str(tmp_path / "done"), "--quiet"]) == 0
    assert not (tmp_path / "done" / "checkpoint.draws").exists() and (tmp_path / "done" / "store").is_dir()
    (tmp_path / "done" / "store").rename(tmp_path / "done" / "checkpoint.draws")
    assert read_run(tmp_path / "done") is not None
    assert main(["export", str(tmp_path / "done")]) == 0


def test_a_checkpointed_run_writes_each_draw_once(tmp_path, monkeypatch):
    """The checkpoint holds state only and each super-transition's draws go
    to a shard of their own, once: 40 super-transitions write at most 1.5
    times what their checkpoint files end at (rewriting every draw so far
    at each would write about 20 times), about as much at the last as at
    the first."""
    from adaptive_hmc.rundir import results, store
    written = []
    real = store.atomic_write

    def counting(path, data, previous=None):
        written.append(len(data))
        return real(path, data, previous)
    monkeypatch.setattr(results, "atomic_write", counting)      # the checkpoints (and the log's first write)
    monkeypatch.setattr(store, "atomic_write", counting)        # the draws' shards
    starts = MEAN + SD * np.random.default_rng(3).normal(size=(3, 4))
    sample(gaussian, starts, checkpoint=tmp_path / "c", warmup=100, super_transitions=40, budget=1000, seed=1)
    final = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    assert len(list((tmp_path / "c" / "store").glob("*.npz"))) == 40
    assert sum(written) <= 1.5 * final, (sum(written), final)
    per_super_transition = np.add.reduceat(written[2:], np.arange(0, 80, 2))      # a shard and a checkpoint each
    assert per_super_transition[-5:].mean() < 1.2 * per_super_transition[:5].mean(), per_super_transition


def test_a_density_config_runs_resumes_and_refuses_bad_input(tmp_path, capsys, monkeypatch):
    """configs/eight_schools_density.yaml on the command line (shortened): a run
    directory with the posterior and a summary agreeing with posteriordb's
    reference; an interrupted run resumes to the same draws; bad keys, files
    and functions are refused with exit 2 before any work, naming the key."""
    import json
    import yaml
    from adaptive_hmc.front.cli import main
    cfg = _eight_schools(tmp_path, warmup=300, super_transitions=8)
    assert main(["validate", str(cfg)]) == 0
    said = capsys.readouterr().err                  # a time estimate from a probe, with what it assumes
    assert re.search(r"the run will take about [0-9.]+ (s|min), compiling apart: 300 warm-up iterations", said)
    assert "if warm-up finds a step of at least 0.125 posterior sds" in said
    assert main(["run", str(cfg), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    ref = pdb.reference("eight_schools_noncentered")
    for name, key in (("mu", "mu"), ("tau", "tau"), ("theta[1]", "theta[0]")):
        row = summary["parameters"][key]
        assert abs(row["mean"] - ref[name][0]) < 4 * math.hypot(row["mcse_mean"], ref[name][2]), (name, row)
    whole = az.from_netcdf(str(tmp_path / "a" / "posterior.nc"))
    assert whole.posterior["theta"].shape[-1] == 8
    assert main(["run", str(cfg), "--out", str(tmp_path / "a")]) == 2                # finished: refused
    with monkeypatch.context() as m:                                                 # an interruption after 3
        _interrupted_after(m, 2)
        assert main(["run", str(cfg), "--out", str(tmp_path / "b"), "--quiet"]) == 130
    assert "--resume" in capsys.readouterr().err
    assert main(["run", str(cfg), "--out", str(tmp_path / "b"), "--quiet"]) == 2       # needs --resume
    assert main(["run", str(cfg), "--out", str(tmp_path / "b"), "--quiet", "--resume"]) == 0
    resumed = az.from_netcdf(str(tmp_path / "b" / "posterior.nc"))
    np.testing.assert_array_equal(resumed.posterior["theta"].values, whole.posterior["theta"].values)
    from adaptive_hmc.rundir.results import RunDir                   # the tuner's log, as a network run's
    logs = [[untimed(e) for e in RunDir(tmp_path / d).read_log()] for d in "ab"]
    assert logs[0] == logs[1] and [e["i"] for e in logs[0]] == list(range(len(eval(whole.attrs["tuner_log"]))))
    assert [(e["step_factor"], e["num_steps"]) for e in logs[0]] == [
        (e["step_factor"], e["num_steps"]) for e in eval(whole.attrs["tuner_log"])]
    capsys.readouterr()
    for change, message in ((("model", "function", "nope"), "model.function = 'nope': eight_schools.py defines no "
                                                            "such function (its functions: constrain, logp_grad"),
                            (("model", "file", "missing.py"), "model.file = 'missing.py': no such file"),
                            (("model", "dim", 9), "model.function = 'logp_grad': the log density's gradient at "
                                                  "initial position 0 has shape (10,); expected (9,)"),
                            (("sampler", "chain", 4), "sampler.chain = 4: unknown key; did you mean 'chains'?")):
        bad = yaml.safe_load(cfg.read_text())
        bad[change[0]][change[1]] = change[2]
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(bad))
        assert main(["run", str(path), "--out", str(tmp_path / "c")]) == 2
        assert message in capsys.readouterr().err
        assert not (tmp_path / "c").exists()


def test_a_finished_density_run_is_extended_to_the_draws_of_the_longer_run(tmp_path, capsys, monkeypatch):
    """--extend N on a finished density run of n super-transitions: the
    draws of a run asked for n + N at the start, bit for bit, also when the
    extension is interrupted and resumed; the lengths recorded in its
    metadata; --extend refused (exit 2, saying why) with --resume, on an
    unfinished run and where there is none."""
    import json
    import yaml
    from adaptive_hmc.front.cli import main
    cfg = _eight_schools(tmp_path, warmup=200, super_transitions=4)
    longer = tmp_path / "longer.yaml"
    longer.write_text(yaml.safe_dump({**yaml.safe_load(cfg.read_text()),
                                      "run": {**yaml.safe_load(cfg.read_text())["run"], "super_transitions": 9}}))
    assert main(["run", str(longer), "--out", str(tmp_path / "whole"), "--quiet"]) == 0
    whole = az.from_netcdf(str(tmp_path / "whole" / "posterior.nc"))
    a = tmp_path / "a"
    assert main(["run", str(cfg), "--out", str(a), "--quiet"]) == 0
    assert main(["run", str(cfg), "--out", str(a), "--quiet", "--extend", "2"]) == 0
    with monkeypatch.context() as m:                          # the second extension interrupted after 7
        _interrupted_after(m, 6)
        assert main(["run", str(cfg), "--out", str(a), "--quiet", "--extend", "3"]) == 130
    capsys.readouterr()
    assert main(["run", str(cfg), "--out", str(a), "--quiet", "--extend", "1"]) == 2
    assert "this one is unfinished (--resume it first)" in capsys.readouterr().err
    assert main(["run", str(cfg), "--out", str(a), "--quiet", "--resume", "--extend", "1"]) == 2
    assert "one or the other" in capsys.readouterr().err
    assert main(["run", str(cfg), "--out", str(a), "--quiet", "--resume"]) == 0
    extended = az.from_netcdf(str(a / "posterior.nc"))
    assert extended.posterior["theta"].shape == whole.posterior["theta"].shape
    np.testing.assert_array_equal(extended.posterior["theta"].values, whole.posterior["theta"].values)
    np.testing.assert_array_equal(extended.sample_stats["diverging"].values, whole.sample_stats["diverging"].values)
    meta = json.loads((a / "metadata.json").read_text())
    assert [(e["from"], e["to"]) for e in meta["extended"]] == [(4, 6), (6, 9)]
    assert json.loads((a / "summary.json").read_text())["draws"] == json.loads(
        (tmp_path / "whole" / "summary.json").read_text())["draws"]
    capsys.readouterr()
    assert main(["run", str(cfg), "--out", str(tmp_path / "none"), "--extend", "3"]) == 2
    assert "--extend 3: adds super-transitions to a finished run, and there is none here" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()
    for name in ("checkpoint.npz", "checkpoint.prev.npz"):                 # the same refusals as a network run's
        (a / name).unlink(missing_ok=True)
    assert main(["run", str(cfg), "--out", str(a), "--quiet", "--extend", "1"]) == 2
    assert "its checkpoint is gone, so the chains cannot go on" in capsys.readouterr().err


def test_a_density_config_with_run_until_stops_when_its_chains_meet(tmp_path, capsys):
    """run.until in a density config: the run goes on until its chains meet,
    says so at each check, and its summary holds the verdict; --extend then
    adds exactly N (run.until off)."""
    import json
    import yaml
    from adaptive_hmc.front.cli import main
    cfg = _eight_schools(tmp_path, warmup=300, super_transitions=2)
    raw = yaml.safe_load(cfg.read_text())
    raw["run"]["until"] = {"max_seconds": 600, "target_ess": 1000}
    cfg.write_text(yaml.safe_dump(raw))
    assert main(["run", str(cfg), "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err                                     # progress on stderr, results on stdout
    assert "after 5 super-transitions: R-hat max of the unconstrained coordinates" in err
    conv = json.loads((tmp_path / "a" / "summary.json").read_text())["convergence"]
    assert conv["met"] and conv["super_transitions"] >= 5, conv
    assert main(["run", str(cfg), "--out", str(tmp_path / "a"), "--quiet", "--extend", "2"]) == 0
    extended = az.from_netcdf(str(tmp_path / "a" / "posterior.nc"))
    assert len(eval(extended.attrs["tuner_log"])) == conv["super_transitions"] + 2


def test_a_density_run_with_json_prints_one_json_object_and_exports_evenly_spaced_draws(tmp_path, capsys):
    """``run DENSITY.yaml --json`` without --quiet: stdout is the summary as one
    JSON object (warm-up and progress lines on stderr), so that it pipes into
    ``python -m json.tool``; ``export --draws N`` keeps N draws a chain, evenly
    spaced, the attrs saying how many the run holds; ``--draws all`` every one."""
    import json
    from adaptive_hmc.front.cli import main
    cfg = _eight_schools(tmp_path, warmup=200, super_transitions=3)
    assert main(["run", str(cfg), "--out", str(tmp_path / "a"), "--json"]) == 0
    said = capsys.readouterr()
    strict = json.loads(said.out, parse_constant=lambda c: pytest.fail(f"not standard JSON: {c}"))  # jq reads it
    assert strict["run_dir"] == str(tmp_path / "a") and "warm-up" in said.err
    whole = az.from_netcdf(str(tmp_path / "a" / "posterior.nc"))
    n = whole.posterior.sizes["draw"]
    assert main(["export", str(tmp_path / "a"), "--draws", "7"]) == 0
    cut = az.from_netcdf(str(tmp_path / "a" / "inference_data.nc"))
    picked = np.unique(np.round(np.linspace(0, n - 1, 7)).astype(int))
    np.testing.assert_array_equal(cut.posterior["mu"].values, whole.posterior["mu"].values[:, picked])
    assert cut.posterior.attrs["draws_in_run"] == n and cut.posterior.attrs["draws"] == 7
    assert main(["export", str(tmp_path / "a"), "--draws", "all"]) == 0
    assert az.from_netcdf(str(tmp_path / "a" / "inference_data.nc")).posterior.sizes["draw"] == n
    with pytest.raises(SystemExit) as e:                                   # argparse's refusal: exit 2
        main(["export", str(tmp_path / "a"), "--draws", "0"])
    assert e.value.code == 2 and "--draws: '0': a number of draws >= 1, or all" in capsys.readouterr().err


def test_a_density_file_with_cached_numba_functions_runs_again_from_the_cache(tmp_path):
    """A user's file whose functions are @njit(cache=True): the second run loads them from Numba's cache.
    Numba records a cached function's module by the name it is registered under; a module not in
    sys.modules was recorded as '<dynamic>', which no later load can import (a traceback on every run
    after the first). Run twice, each in a process of its own."""
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path
    import yaml
    (tmp_path / "cached.py").write_text(textwrap.dedent('''
        import numpy as np
        from numba import njit

        @njit(cache=True)
        def logp_grad(q):
            return -0.5 * np.sum(q * q), -q
    '''))
    cfg = tmp_path / "cached.yaml"
    cfg.write_text(yaml.safe_dump({"name": "cached", "model": {"kind": "density", "file": "cached.py",
                                                              "function": "logp_grad", "dim": 2},
                                   "sampler": {"warmup": 100},
                                   "run": {"seed": 1, "super_transitions": 3, "budget": 100}}))
    for out in ("a", "b"):
        r = subprocess.run([sys.executable, "-m", "adaptive_hmc.front.cli", "run", str(cfg), "--out", str(tmp_path / out),
                            "--quiet"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        cache = os.environ.get("NUMBA_CACHE_DIR")                 # numba's cache is there when it is set
        assert list((Path(cache) if cache else tmp_path / "__pycache__").rglob("cached.logp_grad-*.nbi"))



def test_a_plain_python_log_density_runs_in_a_fresh_interpreter(tmp_path):
    """``def logp(q): return -0.5 * float(q @ q), -q``, with no Numba in it, runs through ``adaptive-hmc run``
    and ``adaptive_hmc.sample`` in a process that imports nothing but the package (numba types the Python
    callback's address only once numba.experimental.function_type is imported, which arviz happened to do)."""
    import subprocess
    import sys
    import yaml
    (tmp_path / "f.py").write_text("def logp(q):\n    return -0.5 * float(q @ q), -q\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"name": "plain", "model": {"kind": "density", "file": "f.py", "function": "logp",
                                                             "dim": 2},
                                   "sampler": {"chains": 2, "warmup": 100},
                                   "run": {"seed": 1, "super_transitions": 3, "budget": 200}}))
    r = subprocess.run([sys.executable, "-m", "adaptive_hmc.front.cli", "run", str(cfg), "--out", str(tmp_path / "D"),
                        "--quiet"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert (tmp_path / "D" / "posterior.nc").is_file()
    code = ("import sys\nimport adaptive_hmc\nsys.path.insert(0, '.')\nfrom f import logp\n"
            "idata = adaptive_hmc.sample(logp, [[0.1, 0.2], [-0.3, 0.4]], warmup=100, super_transitions=3, "
            "budget=200, seed=1)\nq = idata.posterior['q'].values\nprint(q.shape[0], q.shape[2], bool((q == q).all()))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-3:] == ["2", "2", "True"]


_Y = np.empty(200)
_E = np.random.default_rng(0).normal(size=200)
_Y[0] = 0.5 + _E[0]
for _t in range(1, 200):
    _Y[_t] = 0.5 + 0.6 * _Y[_t - 1] + 0.3 * _E[_t - 1] + _E[_t]


@numba.njit
def arma(q):
    """ARMA(1,1) on 200 points (posteriordb's arma11: y_t = mu + phi y_{t-1} + theta e_{t-1} + e_t, priors
    N(0, 10), N(0, 2), N(0, 2), half-Cauchy(0, 2.5) on sigma), q = [mu, phi, theta, log sigma]. Where |theta|
    > 1 the errors grow as theta^t: the log density is finite but as small as -1e100, and as steep."""
    mu, phi, theta, v = q[0], q[1], q[2], q[3]
    err = _Y[0] - mu - phi * mu
    dmu, dphi, dth = -(1.0 + phi), -mu, 0.0
    ss, gmu, gphi, gth = err * err, err * dmu, err * dphi, 0.0
    for t in range(1, _Y.shape[0]):
        dmu, dphi, dth = -1.0 - theta * dmu, -_Y[t - 1] - theta * dphi, -err - theta * dth
        err = _Y[t] - mu - phi * _Y[t - 1] - theta * err
        ss, gmu, gphi, gth = ss + err * err, gmu + err * dmu, gphi + err * dphi, gth + err * dth
    s2, n = math.exp(2 * v), _Y.shape[0]
    lp = -n * v - ss / (2 * s2) - mu * mu / 200 - (phi * phi + theta * theta) / 8 - math.log1p(s2 / 6.25) + v
    g = np.array([-gmu / s2 - mu / 100, -gphi / s2 - phi / 4, -gth / s2 - theta / 4,
                  1.0 - n + ss / s2 - 2 * s2 / 6.25 / (1 + s2 / 6.25)])
    return lp, g


def _arma_reference(n: int = 200_000):
    """The ARMA posterior's means and sds by importance sampling (Student-t, 5 degrees of freedom, at the
    mode with the curvature's covariance x 1.5): its effective sample size is many times the chains'."""
    from scipy import optimize, stats
    mode = optimize.minimize(lambda q: tuple(-a for a in arma(q)), np.array([0.4, 0.6, 0.2, 0.0]), jac=True).x
    h = 1e-5
    H = -np.array([(arma(mode + h * e)[1] - arma(mode - h * e)[1]) / (2 * h) for e in np.eye(4)])
    prop = stats.multivariate_t(mode, 1.5 * np.linalg.inv((H + H.T) / 2), df=5, seed=1)
    x = prop.rvs(n)
    lw = np.array([arma(xi)[0] for xi in x]) - prop.logpdf(x)
    w = np.exp(lw - lw.max())
    w /= w.sum()
    assert 1 / np.sum(w * w) > 0.5 * n                       # the proposal covers the posterior
    mean = w @ x
    return mean, np.sqrt(w @ (x - mean) ** 2)


def test_arma_gradient_is_the_log_densitys():
    q = np.array([0.3, 0.5, 1.3, -0.2])                      # where |theta| > 1: the steep region too
    for point in (q, q * [1, 1, 0.2, 1]):
        h = 1e-6
        fd = np.array([(arma(point + h * e)[0] - arma(point - h * e)[0]) / (2 * h) for e in np.eye(4)])
        np.testing.assert_allclose(arma(point)[1], fd, rtol=1e-5, atol=1e-4 * np.abs(fd).max())


@pytest.mark.statistical
def test_chains_started_where_the_density_is_astronomically_small_are_moved_and_the_answer_is_right(capsys):
    """Stan's starts, uniform(-2, 2): one chain at log density -2e79 (|theta| > 1) made the shared step collapse
    (an OverflowError or a hang before). Now it is moved to another chain's position with a warning naming it,
    and the answer agrees with importance sampling within 4 MCSE, a shift of 0.5 sd would be seen (power)."""
    from sklearn.exceptions import ConvergenceWarning
    starts = np.random.default_rng(5).uniform(-2, 2, size=(4, 4))
    assert arma(starts[3])[0] < -1e70 and all(arma(s)[0] > -1e6 for s in starts[:3])
    with pytest.warns(ConvergenceWarning, match=r"warm-up iteration 8: moved chain 3 \(log density -2\.\d+e\+79\) "
                                                r"to chain \d's position"):
        idata = sample(arma, starts, warmup=500, super_transitions=10, seed=5, verbose=True)
    last = capsys.readouterr().out.splitlines()[-1]                  # the line a run ends with, as the CLI's
    assert re.fullmatch(r"4 chains x \d+ draws: R-hat max of the unconstrained coordinates 1\.00\d \(target <= "
                        r"1\.01\); smallest bulk ESS \d+ \(.* per second of warm-up and sampling, .* per 1000 "
                        r"gradients\); 0 divergent trajectories; E-BFMI min \d\.\d\d", last), last
    mean, sd = _arma_reference()
    z, rel = _moment_z(idata, mean, sd)
    assert np.all(rel < 0.1) and np.all(np.abs(z) < 4.0), z
    assert np.all(np.abs(_moment_z(idata, mean + 0.5 * sd, sd)[0][:, 0]) > 4.0)
    assert float(az.rhat(idata)["q"].max()) < 1.01


def test_chains_that_cannot_move_stop_warm_up_with_a_message_naming_one():
    """Every start with |theta| > 1: no chain can move at any step the floor allows; warm-up stops within a
    bounded number of iterations (25 at the step's floor) saying which chain, where, and what to do."""
    import time
    from sklearn.exceptions import ConvergenceWarning
    from adaptive_hmc.engine.density_chains import WarmupError
    starts = np.random.default_rng(4).uniform(-2, 2, size=(4, 4))
    assert all(arma(s)[0] < -1e30 for s in starts)
    t0 = time.perf_counter()
    with pytest.warns(ConvergenceWarning, match="moved chain 0"), \
            pytest.raises(WarmupError, match=r"warm-up cannot find a step that moves the chains: the step shrank to "
                                          r"1e-08 .*chain \d is at log density -\d\.\d+e\+\d+.*start the chains "
                                          r"nearer the posterior's bulk"):
        sample(arma, starts, seed=4)
    assert time.perf_counter() - t0 < 60
