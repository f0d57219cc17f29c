"""A user's tuner is its own file and options type: one defined here (a
seeded random search over the action box) runs ``sample()`` through the
Tuner protocol without a change to the engine."""
import ast
from dataclasses import dataclass, field

import numpy as np
import pytest

from adaptive_hmc import sample
from adaptive_hmc.jit import njit
from adaptive_hmc.tuners.base import TellInfo, Tuner


class RandomSearch:
    """Each action uniform in the box (L an integer), drawn from a seeded stream; no feasibility model."""

    accept_floor = None

    def __init__(self, bounds: dict, seed: int):
        self.bounds, self.seed = {k: tuple(v) for k, v in bounds.items()}, int(seed)
        self._rng, self._history = np.random.default_rng(self.seed), []

    def ask(self) -> dict:
        (flo, fhi), (lo, hi) = self.bounds["step_factor"], self.bounds["num_steps"]
        return {"step_factor": float(self._rng.uniform(flo, fhi)), "num_steps": int(self._rng.integers(lo, hi + 1))}

    def tell(self, action, reward, acceptance=None, transient=False) -> TellInfo:
        self._history.append({"action": dict(action), "reward": float(reward), "p": 1.0, "moved": True})
        return TellInfo(1.0, True)

    @property
    def history(self) -> list:
        return [dict(h) for h in self._history]

    def state_dict(self) -> dict:
        return {"kind": "random", "bounds": self.bounds, "seed": self.seed, "history": self.history,
                "stream": self._rng.bit_generator.state}       # asks outnumber tells (warm-up, probes)

    @classmethod
    def from_state(cls, state: dict) -> "RandomSearch":
        t = cls(state["bounds"], state["seed"])
        t._rng.bit_generator.state = state["stream"]
        t._history = [dict(h) for h in state["history"]]
        return t


@dataclass(frozen=True)
class RandomSearchOptions:
    """Its options type: the box (which ``sample()`` replaces with its own) and ``tuner(seed)``."""

    bounds: dict = field(default_factory=lambda: {"step_factor": (0.1, 1.0), "num_steps": (2, 20)})

    def tuner(self, seed: int) -> RandomSearch:
        return RandomSearch(self.bounds, seed)


@njit(cache=False)
def _std_normal(q):
    return -0.5 * np.sum(q * q), -q


@pytest.mark.filterwarnings("ignore:the largest R-hat")
def test_a_tuner_of_ones_own_runs_sample_through_the_protocol():
    assert isinstance(RandomSearch({"step_factor": (0.1, 1.0), "num_steps": (2, 20)}, 0), Tuner)
    idata = sample(_std_normal, np.zeros((2, 3)), warmup=100, super_transitions=6, budget=200, seed=4,
                   tuner=RandomSearchOptions())
    actions = [(e["step_factor"], e["num_steps"]) for e in ast.literal_eval(idata.attrs["tuner_log"])]
    assert len(actions) == 6 and len(set(actions)) == 6                      # a new random action each time
    lo, hi = (int(v) for v in idata.attrs["num_steps_bounds"])
    assert all(lo <= L <= hi for _, L in actions)                            # within sample()'s own box
    q = idata.posterior["q"].values.reshape(-1, 3)
    assert abs(q.mean()) < 0.5 and 0.5 < q.std() < 1.5                      # it samples N(0, I)


@pytest.mark.filterwarnings("ignore:the largest R-hat")
def test_a_tuner_of_ones_own_resumes_from_a_checkpoint_once_registered(tmp_path):
    """sample() with a checkpoint stopped after 3 super-transitions resumes to the draws of the uninterrupted
    run, its tuner rebuilt from the checkpoint by the registry (TUNERS); an unregistered kind is refused naming
    register_tuner, and the package's own kinds cannot be replaced."""
    from adaptive_hmc.tuners import TUNERS, register_tuner, tuner_from_state
    kw = dict(warmup=100, super_transitions=6, budget=200, seed=4, tuner=RandomSearchOptions())
    whole = sample(_std_normal, np.zeros((2, 3)), **kw)
    path = tmp_path / "ck"
    TUNERS.pop("random", None)
    assert sample(_std_normal, np.zeros((2, 3)), checkpoint=path, stop_after=3, **kw) is None
    with pytest.raises(Exception, match=r"a tuner of kind 'random' saved this state, and no such kind is registered"
                                        r".*register_tuner\('random', YourTuner\)"):
        sample(_std_normal, np.zeros((2, 3)), checkpoint=path, **kw)
    register_tuner("random", RandomSearch)
    try:
        resumed = sample(_std_normal, np.zeros((2, 3)), checkpoint=path, **kw)
        np.testing.assert_array_equal(resumed.posterior["q"].values, whole.posterior["q"].values)
        assert resumed.attrs["tuner_log"] == whole.attrs["tuner_log"]
        t = RandomSearch({"step_factor": (0.1, 1.0), "num_steps": (2, 20)}, 3)
        t.tell(t.ask(), 1.0)
        assert tuner_from_state(t.state_dict()).history == t.history
    finally:
        TUNERS.pop("random", None)
    with pytest.raises(ValueError, match="tuner kind 'bandit': the package's own"):
        register_tuner("bandit", RandomSearch)


@pytest.mark.filterwarnings("ignore")
def test_a_tuner_of_ones_own_runs_the_estimators():
    """BNNRegressor(tuner=options of one's own): each super-transition at the action the tuner asked, within its
    box, and the fit predicts."""
    from adaptive_hmc import BNNRegressor
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = X[:, 0] + 0.1 * rng.normal(size=40)
    options = RandomSearchOptions(bounds={"step_factor": (0.05, 0.5), "num_steps": (5, 50)})
    m = BNNRegressor(hidden=3, super_transitions=5, max_seconds=None, budget=200, initial_phase_steps=50,
                     start="random", tuner=options).fit(X, y)
    actions = [(e["step_factor"], e["num_steps"]) for e in m.log_]
    assert len(actions) == 5 and len(set(actions)) == 5
    assert all(0.05 <= f <= 0.5 and 5 <= L <= 50 for f, L in actions)
    assert np.isfinite(m.predict(X)).all() and m.get_params()["tuner"] is options


#: The same random search as a user's file a config names (tuner.file), registering its kind itself.
TUNER_FILE = '''
from dataclasses import dataclass, field
import numpy as np
from adaptive_hmc.tuners import register_tuner
from adaptive_hmc.tuners.base import TellInfo

''' + "".join(__import__("inspect").getsource(c) + "\n\n" for c in (RandomSearch, RandomSearchOptions)).replace(
    '"kind": "random"', '"kind": "random_file"') + '''
register_tuner("random_file", RandomSearch)
'''


def test_a_tuner_of_ones_own_runs_a_configured_run_and_its_resume(tmp_path, capsys):
    """A config names a tuner of one's own (tuner.kind, file, options_type, settings): validate and run use it,
    its log shows its actions, and a run stopped after 3 super-transitions resumes from the checkpoint to the
    summary and log of the run straight through; a kind the file does not register, or options its type
    refuses, are refused with exit 2 naming the key."""
    import json
    import yaml
    from cli_helpers import _raw, _small, _write
    from adaptive_hmc.config import read_config
    from adaptive_hmc.front.cli import main
    from adaptive_hmc.front.experiment import run_experiment
    from adaptive_hmc.rundir.metrics import untimed
    (tmp_path / "my_tuner.py").write_text(TUNER_FILE)
    raw = _small(_raw(), n=6)
    raw["tuner"] = {"kind": "random_file", "file": "my_tuner.py", "options_type": "RandomSearchOptions",
                    "bounds": {"step_factor": [0.05, 0.5], "num_steps": [10, 60]}, "warmup_super_transitions": 1}
    path = _write(tmp_path, raw)
    assert main(["validate", str(path), "--no-estimate"]) == 0
    cfg = read_config(path)
    full = run_experiment(cfg, tmp_path / "full", source=str(path), quiet=True)
    assert run_experiment(cfg, tmp_path / "part", source=str(path), quiet=True, stop_after=3) == {}
    resumed = run_experiment(cfg, tmp_path / "part", source=str(path), quiet=True, resume=True)
    assert untimed(resumed) == untimed(full)
    logs = [[untimed(json.loads(x)) for x in (tmp_path / d / "log.jsonl").read_text().splitlines()]
            for d in ("full", "part")]
    assert logs[0] == logs[1] and len({(e["step_factor"], e["num_steps"]) for e in logs[0]}) > 3   # random actions
    assert json.loads((tmp_path / "full" / "tuner.json").read_text())["kind"] == "random_file"
    assert main(["plot", str(tmp_path / "full")]) == 0             # its figures, but the bandit's reward model
    assert (tmp_path / "full" / "plots" / "traces.png").is_file()
    assert not (tmp_path / "full" / "plots" / "reward_surface.png").exists()
    capsys.readouterr()
    for change, message in (({"kind": "unregistered"}, "tuner.kind = 'unregistered': my_tuner.py did not register"),
                            ({"settings": {"nope": 1}}, "tuner.settings = {'nope': 1}: RandomSearchOptions(bounds=..."),
                            ({"options_type": "Missing"}, "tuner.options_type = 'Missing': my_tuner.py defines no"),
                            ({"file": None}, "tuner.kind = 'random_file': bandit, fixed, or the kind of a tuner")):
        bad = yaml.safe_load(path.read_text())
        bad["tuner"].update(change)
        assert main(["run", str(_write(tmp_path, bad, "bad.yaml")), "--out", str(tmp_path / "bad")]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
        assert not (tmp_path / "bad").exists()


#: The random search misbehaving as its setting ``bad`` says from its second ask on (the first super-transition
#: runs and is checkpointed); ``BAD = ""`` in the file is the fixed tuner.
BAD_TUNER_FILE = TUNER_FILE.replace('"random_file"', '"bad_file"') + '''
BAD = None


class Bad(RandomSearch):
    def __init__(self, bounds, seed, bad="", asked=0):
        super().__init__(bounds, seed)
        self.bad, self.asked = bad if BAD is None else BAD, asked

    def ask(self):
        self.asked += 1
        action = super().ask()
        if self.asked < 2 or self.bad in ("", "raise in tell", "numpy state"):
            return action
        if self.bad == "raise in ask":
            raise RuntimeError("no more actions")
        return {"NaN step": {**action, "step_factor": float("nan")}, "negative step": {**action, "step_factor": -0.1},
                "L = 0": {**action, "num_steps": 0}, "L above the budget": {**action, "num_steps": 10 ** 6},
                "L = 12.5": {**action, "num_steps": 12.5}, "wrong keys": {"step": 0.1, "L": 10}}[self.bad]

    def tell(self, action, reward, acceptance=None, transient=False):
        if self.bad == "raise in tell" and self.asked >= 2:
            raise ValueError("cannot learn")
        return super().tell(action, reward, acceptance, transient)

    def state_dict(self):
        out = {**super().state_dict(), "kind": "bad_file", "bad": self.bad, "asked": self.asked}
        return {**out, "gp": np.zeros(2)} if self.bad == "numpy state" and self.asked >= 2 else out

    @classmethod
    def from_state(cls, state):
        t = cls(state["bounds"], state["seed"], state["bad"], state["asked"])
        t._rng.bit_generator.state, t._history = state["stream"], [dict(h) for h in state["history"]]
        return t


@dataclass(frozen=True)
class BadOptions:
    bounds: dict
    bad: str = ""

    def tuner(self, seed):
        return Bad(self.bounds, seed, self.bad)


register_tuner("bad_file", Bad)
'''

#: Each misbehaviour of Bad and what the run's message says of it.
MISBEHAVIOURS = {"NaN step": "ask() returned {'step_factor': nan", "negative step": "step_factor=-0.1: must be a",
                 "L = 0": "num_steps=0: must be a whole number >= 1",
                 "L above the budget": "num_steps=1000000: must be <= the budget (600)",
                 "L = 12.5": "num_steps=12.5: must be a whole number",
                 "wrong keys": "ask() returned {'step': 0.1, 'L': 10}: need step_factor and num_steps",
                 "raise in ask": "ask() raised RuntimeError: no more actions",
                 "raise in tell": "tell() raised ValueError: cannot learn",
                 "numpy state": "state_dict() returned a value JSON cannot hold (TypeError: Object of type ndarray"}


def test_a_misbehaving_tuner_of_ones_own_is_named_with_the_checkpoint_to_resume_from(tmp_path, capsys):
    """A tuner of one's own that asks no action (a NaN or negative step factor, L = 0, 12.5 or above the
    budget, other keys), raises in ask or tell, or gives a state JSON cannot hold ends the run with exit 2 and
    one line naming tuner.kind, its file, the method and the value, and how many super-transitions the
    checkpoint holds; fixed, the run resumes from there to its end."""
    import yaml
    from cli_helpers import _raw, _small, _write
    from adaptive_hmc.front.cli import main
    (tmp_path / "bad_tuner.py").write_text(BAD_TUNER_FILE)
    raw = _small(_raw(), n=3)
    raw["run"]["checkpoint_every"] = 1
    raw["tuner"] = {"kind": "bad_file", "file": "bad_tuner.py", "options_type": "BadOptions",
                    "bounds": {"step_factor": [0.05, 0.5], "num_steps": [10, 60]}, "warmup_super_transitions": 1}
    for bad, message in MISBEHAVIOURS.items():
        raw["tuner"]["settings"] = {"bad": bad}
        path, out = _write(tmp_path, raw, "c.yaml"), tmp_path / bad.replace(" ", "_")
        assert main(["run", str(path), "--out", str(out), "--quiet"]) == 2, bad
        err = capsys.readouterr().err
        assert f"{path}: tuner.kind = 'bad_file' (bad_tuner.py): " in err and message in err, err
        assert "the checkpoint holds 1 super-transition: fix the tuner, then --resume" in err, err
        assert "Traceback" not in err and err.count("\n") == 1, err
    (tmp_path / "bad_tuner.py").write_text(BAD_TUNER_FILE.replace("BAD = None", 'BAD = ""'))
    raw["tuner"]["settings"] = {"bad": "L = 0"}
    assert main(["run", str(_write(tmp_path, raw, "c.yaml")), "--out", str(tmp_path / "L_=_0"), "--quiet",
                 "--resume"]) == 0
    assert yaml.safe_load((tmp_path / "L_=_0" / "config.resolved.yaml").read_text())["tuner"]["kind"] == "bad_file"
