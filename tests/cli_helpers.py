"""What the command-line tests share: the shipped configs, shrunk copies of them, bad-input cases, small
tables and finished runs; the repository's scripts (experiments, benchmarks) loaded as modules."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import yaml

from adaptive_hmc.front.cli import main
from adaptive_hmc.config import read_config
from adaptive_hmc.front.experiment import run_experiment

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
QUICK = sorted(CONFIGS.glob("*_quick.yaml"))
ROBOT_ARM_QUICK = [p for p in QUICK if not p.stem.startswith("dexter")]     # Dexter's: test_dexter_*


def load_script(folder: str, name: str):
    """The script ROOT/folder/name.py as a module, registered in sys.modules under its name before it runs:
    Numba's cache records a cached function's module by that name ('<dynamic>' for an unregistered one,
    which a later process cannot import when it loads the cache entry)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cv(raw: dict, **cv) -> None:
    """``raw``'s chains as cross-validation folds: ``cv`` (its keys given, None left out)."""
    raw.pop("chains", None)
    raw["cv"] = {k: v for k, v in cv.items() if v is not None}


def _raw(name="robot_arm_bandit_quick.yaml"):
    return yaml.safe_load((CONFIGS / name).read_text())


def _write(tmp_path, raw, name="c.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(raw))
    return p


def _small(raw, n=6, budget=600):
    if raw["model"].get("kind", "bnn") != "bnn":        # Neal's quick configs: already 6 short super-transitions
        raw["run"].update(super_transitions=n, burn_in={"super_transitions": 2})
        return raw
    raw["run"].update(super_transitions=n, budget=budget, burn_in={"super_transitions": 2}, thin=5)
    raw["run"].pop("until", None)                        # exactly n super-transitions
    if raw["tuner"]["kind"] == "bandit":
        raw["tuner"]["bounds"]["num_steps"] = [10, 100]
        raw["tuner"]["warmup_super_transitions"] = 1
        raw["tuner"]["maxfun"] = 200
    else:
        raw["tuner"]["num_steps"] = 50
    raw["sampler"]["initial_phase_steps"] = 200
    return raw


def _bad(mutate, tmp_path):
    raw = _raw()
    mutate(raw, tmp_path)
    return raw


CASES = {
    "unknown key": (lambda r, t: r["run"].update(sed=3), "run.sed = 3: unknown key"),
    "unknown metric": (lambda r, t: r["sampler"].update(metric="diagonal"), "sampler.metric = 'diagonal'"),
    "learned metric with metropolis": (lambda r, t: r["sampler"].update(metric="learned", kind="metropolis", window=1),
                                       "sampler.metric = 'learned': learns factors of the heuristic step scales"),
    "anneal with stochastic dynamics": (lambda r, t: r["sampler"].update(anneal=[[10, 0, 15]], window=1,
                                                                          kind="stochastic_dynamics"),
                                        "annealing is for kinds hmc and metropolis"),
    "anneal phase alpha 1": (lambda r, t: r["sampler"].update(anneal=[[10, 1.0, 15]], window=1),
                             "sampler.anneal = [10.0, 1.0, 15.0]: each phase"),
    "anneal phase of 2 numbers": (lambda r, t: r["sampler"].update(anneal=[[10, 0.5]]),
                                  "sampler.anneal[0] = [10, 0.5]: List should have at least 3 items"),
    "anneal with a window": (lambda r, t: r["sampler"].update(anneal=[[10, 0.5, 1]], window=5),
                             "sampler.window = 5: not with annealing"),
    "Neal's model for classes": (lambda r, t: r["model"].update(kind="neal1993", likelihood="logistic"),
                                 "model.kind = 'neal1993': Neal's models are for likelihood gaussian"),
    "unknown model kind": (lambda r, t: r["model"].update(kind="neal1994"), "model.kind = 'neal1994'"),
    "unknown arithmetic": (lambda r, t: r["sampler"].update(arithmetic="float16"), "sampler.arithmetic = 'float16'"),
    "float32 for Neal's model": (lambda r, t: (r["model"].update(kind="neal1992"),
                                              r["sampler"].update(arithmetic="float32", start="random")),
                                 "sampler.arithmetic = 'float32': is for model bnn"),
    "wrong type": (lambda r, t: r["run"].update(budget="many"), "run.budget = 'many'"),
    "missing section": (lambda r, t: r.pop("model"), "model: missing"),
    "lower > upper": (lambda r, t: r["tuner"]["bounds"].update(step_factor=[1.0, 0.1]),
                      "tuner.bounds.step_factor = [1.0, 0.1]: need finite 0 < lower < upper"),
    "L above budget": (lambda r, t: r["tuner"]["bounds"].update(num_steps=[20, 9000]), "must be <= run.budget"),
    "bad likelihood": (lambda r, t: r["model"].update(likelihood="poisson"), "model.likelihood = 'poisson'"),
    "rows beyond data": (lambda r, t: r["data"]["test_sets"].update(extra=[590, 700]),
                         "data.test_sets.extra = [590, 700]: the data has 600 rows"),
    "missing data file": (lambda r, t: r["data"].update(dataset=None, path=str(t / "nope.csv"), target_columns=[-1]),
                          "nope.csv': no such file"),
    "NaN in data": (lambda r, t: (np.savetxt(t / "nan.csv", np.array([[1.0, 2.0, 3.0], [np.nan, 1.0, 2.0]] * 5),
                                             delimiter=","),
                                  r["data"].update(dataset=None, path=str(t / "nan.csv"), target_columns=[-1],
                                                   train_rows=[1, 8], test_sets={}, missing="error")),
                    "data.missing = 'error': 5 rows have missing values (first: row 2"),
    "infinity in data": (lambda r, t: (np.savetxt(t / "inf.csv", np.array([[1.0, 2.0, 3.0], [np.inf, 1.0, 2.0]] * 5),
                                                  delimiter=","),
                                       r["data"].update(dataset=None, path=str(t / "inf.csv"), target_columns=[-1],
                                                        train_rows=[1, 8], test_sets={})),
                         "NaN or infinite values (first at row 2, column 0; rows counted from 1, columns from 0)"),
    "network does not fit data": (lambda r, t: r["model"].update(likelihood="logistic"),
                                  "classification needs one label column"),
    "cv reward without replicas": (lambda r, t: (_cv(r, folds=0, full_chain=True), r["tuner"].update(reward="cv")),
                                   "cv.folds = 0: the cv reward reads held-out predictions: it needs >= 2"),
    "step calibration without warm-up": (lambda r, t: (r["sampler"].update(calibrate_steps=True),
                                                       r["tuner"].update(warmup_super_transitions=0)),
                                         "sampler.calibrate_steps = True: needs tuner.warmup_super_transitions >= 1"),
    # the bandit's options, each checked by its type (BanditOptions) and named by its key
    "bandit delta 1.5": (lambda r, t: r["tuner"].update(delta=1.5), "tuner.delta = 1.5: must be in (0, 1)"),
    "bandit alpha 0": (lambda r, t: r["tuner"].update(alpha=0), "tuner.alpha = 0.0: must be > 0"),
    "bandit accept_floor 1": (lambda r, t: r["tuner"].update(accept_floor=1.0),
                              "tuner.accept_floor = 1.0: null (None: off) or an acceptance rate in (0, 1)"),
    "bandit maxfun 3": (lambda r, t: r["tuner"].update(maxfun=3), "tuner.maxfun = 3: DIRECT's evaluations"),
    "bandit first_action 0": (lambda r, t: r["tuner"].update(first_action=0), "tuner.first_action = 0: allowed"),
    "log axis of an unknown action": (lambda r, t: r["tuner"].update(log_axes=["eps"]),
                                      "tuner.log_axes"),
}


def _table(t, name="t.csv", rows=None):
    """A small numeric table (4 columns) in the test folder."""
    rows = rows if rows is not None else [[i, 2 * i, 3 * i, i % 2] for i in range(30)]
    (t / name).write_text("\n".join(",".join(str(v) for v in r) for r in rows) + "\n")
    return str(t / name)


def _use_table(r, t, **data):
    r["data"] = {"path": _table(t), "target_columns": [-1], "train_rows": [1, 20], "test_sets": {"rest": [21, 30]}}
    r["data"].update(data)


def _text(t, text, name="raw.yaml"):
    (t / name).write_text(text)
    return t / name


def _fixed(r):
    r["tuner"] = {"kind": "fixed", "step_factor": 0.3, "num_steps": 50}


CASES.update({
    # names, files, YAML
    "name escapes the runs folder": (lambda r, t: r.update(name="../../escaped"),
                                     "name = '../../escaped': a plain name"),
    "name with a slash": (lambda r, t: r.update(name="a/b"), "name = 'a/b': a plain name"),
    "empty name": (lambda r, t: r.update(name=""), "name = '': a plain name"),
    "duplicate YAML key": (lambda r, t: _text(t, "name: x\nrun: {budget: 10, super_transitions: 1}\n"
                                                 "run: {budget: 20, super_transitions: 2}\n"), "duplicate key 'run'"),
    "empty config file": (lambda r, t: _text(t, ""), "the top level must be a mapping"),
    "list at the top level": (lambda r, t: _text(t, "- a\n- b\n"), "the top level must be a mapping"),
    "scalar section with --seed": (lambda r, t: _text(t, "name: x\nrun: 5\n"), "run = 5: must be a mapping"),
    "binary config": (lambda r, t: (t / "bin.yaml").write_bytes(bytes(range(256)) * 4) and t / "bin.yaml",
                      "not a text file"),
    "directory as config": (lambda r, t: (t / "adir").mkdir() or t / "adir", "is a directory"),
    "not YAML": (lambda r, t: _text(t, "name: [unclosed\n"), "not valid YAML"),
    "unknown key lists the allowed": (lambda r, t: r["sampler"].update(windw=3), "allowed keys here: window"),
    # sampler settings (their rules live in the samplers)
    "window above every L": (lambda r, t: r["sampler"].update(window=30),
                             "sampler.window = 30: must be <= the lower bound of tuner.bounds.num_steps (20)"),
    "window above fixed L": (lambda r, t: (_fixed(r), r["sampler"].update(window=60)),
                             "sampler.window = 60: must be <= tuner.num_steps (50)"),
    "window zero": (lambda r, t: r["sampler"].update(window=0), "sampler.window = 0: must be an integer >= 1"),
    "persistence one": (lambda r, t: r["sampler"].update(persistence=1.0), "sampler.persistence = 1.0"),
    "negative step_nu": (lambda r, t: r["sampler"].update(step_nu=-0.1), "sampler.step_nu = -0.1"),
    "zero max_energy_error": (lambda r, t: r["sampler"].update(max_energy_error=0), "sampler.max_energy_error = 0"),
    "negative initial phase": (lambda r, t: r["sampler"].update(initial_phase_steps=-1),
                               "sampler.initial_phase_steps = -1"),
    # model and data
    "hidden layer of 0": (lambda r, t: r["model"].update(hidden=[0]), "every hidden layer needs >= 1 unit"),
    "huge network": (lambda r, t: r["model"].update(hidden=[100000000]),
                     "model.hidden = [100000000]: a network of"),
    "duplicate target columns": (lambda r, t: _use_table(r, t, target_columns=[3, -1]),
                                 "data.target_columns = [3, -1]: names a column twice"),
    "target column beyond the file": (lambda r, t: _use_table(r, t, target_columns=[7]),
                                      "data.target_columns = [7]: the file has 4 columns"),
    "empty data file": (lambda r, t: _use_table(r, t, path=_text(t, "", "empty.csv").as_posix()),
                        "the file has no rows"),
    "text in a cell": (lambda r, t: _use_table(r, t, path=_text(t, "1,2,3,4\n1,x,3,4\n", "h.csv").as_posix()),
                       "not a numeric table: row 2, column 1 is 'x'"),
    "test rows overlap training rows": (lambda r, t: r["data"]["test_sets"].update(test_201_400=[150, 400]),
                                        "data.test_sets.test_201_400 = [150, 400]: overlaps the training rows"),
    "target name without header": (lambda r, t: _use_table(r, t, target_columns=["price"]),
                                   "column 'price' named, but the file has no header row"),
    "rows and a split": (lambda r, t: r["data"].update(split={"train": 100}), "give exactly one of train_rows"),
    "split larger than the data": (lambda r, t: (r["data"].pop("train_rows"), r["data"].pop("test_sets"),
                                                 r["data"].update(split={"train": 700})),
                                   "data.split.train = 700: a fraction below 1 or at most the 600 complete rows; "
                                   "train: 1.0 (or 600) trains on every row, with no test set"),
    "split sizes above the rows": (lambda r, t: (r["data"].pop("train_rows"), r["data"].pop("test_sets"),
                                                 r["data"].update(split={"train": 500, "test": 200})),
                                   "500 training and 200 test cases, but the table has 600 complete rows"),
    "split of every row with a test set": (lambda r, t: (r["data"].pop("train_rows"), r["data"].pop("test_sets"),
                                                         r["data"].update(split={"train": 1.0, "test": 5})),
                                           "every one of the 600 complete rows trains, none is left to test"),
    "k above the training cases": (lambda r, t: r["data"].update(train_rows=[1, 5]),
                                   "chains = 8: at most the number of training cases (5)"),
    "logistic on real targets": (lambda r, t: (_use_table(r, t, target_columns=[2]),
                                               r["model"].update(likelihood="logistic")),
                                 "model.likelihood = 'logistic': needs targets that are 0 or 1"),
    "logistic on three classes": (lambda r, t: (_use_table(r, t, path=_table(t, "c.csv", [[i, i % 3] for i in
                                                                                           range(30)])),
                                                r["model"].update(likelihood="logistic")),
                                  "the targets are the 3 class indices 0, 1, 2 (use softmax for more than two"),
    "logistic on labels 1 and 2": (lambda r, t: (_use_table(r, t, path=_table(t, "l.csv", [[i, 1 + i % 2] for i in
                                                                                            range(30)])),
                                                 r["model"].update(likelihood="logistic")),
                                   "the targets are the whole numbers 1, 2 (recode them as 0 and 1"),
    "softmax on real targets": (lambda r, t: (_use_table(r, t, path=_table(t, "s.csv", [[i, 0.5 * i] for i in
                                                                                         range(30)])),
                                              r["model"].update(likelihood="softmax")),
                                "model.likelihood = 'softmax': needs class indices"),
    "one fold": (lambda r, t: _cv(r, folds=1), "cv.folds = 1: 0 (the full-data chain alone) or >= 2 folds"),
    "no chain at all": (lambda r, t: (_fixed(r), _cv(r, folds=0, full_chain=False)),
                        "cv.full_chain = False: must be true with 0 folds"),
    "no chain of the posterior": (lambda r, t: r.update(chains=0), "chains = 0: Input should be greater than or "
                                                                   "equal to 1"),
    "chains and folds both": (lambda r, t: r.update(cv={"folds": 4}),
                              "chains = 8: give chains (of one posterior) or cv (cross-validation folds), not both"),
    "cv reward on chains of one posterior": (lambda r, t: r["tuner"].update(reward="cv"),
                                             "chains = 8: the cv reward reads held-out predictions: it needs "
                                             "cross-validation folds: give cv"),
    "folds as a number": (lambda r, t: _cv(r, folds=None) or r.update(cv=4), "cv = 4: Input should be a valid"),
    "replicas from the full-data chain alone": (lambda r, t: _cv(r, folds=0, predict_from="replicas"),
                                                "cv.predict_from = 'replicas': needs >= 2 folds"),
    # the old section replicas (chains and cv now): read with a note, its errors in its own keys
    "old replicas beside chains": (lambda r, t: r.update(replicas={"k": 3}),
                                   "replicas = {'k': 3}: the old name of chains and cv: give chains or cv alone"),
    "old replicas of unknown chains": (lambda r, t: (r.pop("chains"), r.update(replicas={"data": "both"})),
                                       "replicas.data = 'both': full or folds"),
    "old replicas with a full-data chain beside chains": (
        lambda r, t: (r.pop("chains"), r.update(replicas={"k": 3, "full_data_chain": True})),
        "replicas.full_data_chain = True: is for data: folds"),
    "unknown data set": (lambda r, t: r["data"].update(dataset="nosuch", file="x.data", target_columns=[-1]),
                         "data.dataset = 'nosuch': data set 'nosuch' not found"),
    "dataset and path": (lambda r, t: r["data"].update(path="x.csv"), "give exactly one of dataset and path"),
    "robot arm with columns": (lambda r, t: r["data"].update(target_columns=[1]),
                               "robot_arm is read by its own loader"),
    "rows first above last": (lambda r, t: r["data"].update(train_rows=[10, 5]), "rows are numbered from 1"),
    "row zero": (lambda r, t: r["data"].update(train_rows=[0, 5]), "data.train_rows = [0, 5]"),
    # tuner and run
    "fixed tuner without L": (lambda r, t: r.update(tuner={"kind": "fixed", "step_factor": 0.3}),
                              "a fixed tuner needs step_factor > 0 and num_steps >= 1"),
    "bandit without bounds": (lambda r, t: r["tuner"].pop("bounds"), "tuner.bounds = None"),
    "bounds on a fixed tuner": (lambda r, t: r.update(tuner={"kind": "fixed", "step_factor": 0.3, "num_steps": 50,
                                                             "bounds": {"step_factor": [0.1, 1]}}),
                                "bounds are for kind: bandit"),
    "schedule without its parameter": (lambda r, t: r["tuner"].update(schedule={"kind": "polynomial"}),
                                       "tuner.schedule.gamma = None"),
    "metric of another likelihood": (lambda r, t: r["tuner"].update(cv_metric="error_rate"),
                                     "tuner.cv_metric = 'error_rate'"),
    "fractional L bounds": (lambda r, t: r["tuner"]["bounds"].update(num_steps=[20.5, 100]), "need whole numbers"),
    "integer bounds shown as integers": (lambda r, t: r["tuner"]["bounds"].update(num_steps=[20, 9000]),
                                         "tuner.bounds.num_steps = [20, 9000]: upper bound"),
    "zero budget": (lambda r, t: r["run"].update(budget=0), "run.budget = 0"),
    "predictions from a chain that is not there": (lambda r, t: _cv(r, full_chain=False, predict_from="full"),
                                                   "cv.predict_from = 'full': needs the full-data chain"),
    "zero checkpoint interval": (lambda r, t: r["run"].update(checkpoint_every=0), "run.checkpoint_every = 0"),
    # tables as spreadsheets write them
    "a column name given twice": (lambda r, t: _use_table(r, t, target_columns=["p"], path=_text(
        t, "s,p,a,p\n" + "".join(f"{i},{i},{i},{i}\n" for i in range(30)), "d.csv").as_posix()),
        "the header names column 'p' twice (columns 1 and 3, counted from 0)"),
    "an empty named column": (lambda r, t: _use_table(r, t, target_columns=["p"], path=_text(
        t, "s,w,p\n" + "".join(f"{i},,{i}\n" for i in range(30)), "e.csv").as_posix()),
        "every one of the 30 rows has a missing value, so none is left to train on: input column 'w' is empty"),
    "a text input column not listed": (lambda r, t: _use_table(r, t, target_columns=["p"], path=_text(
        t, "s,w,p\n" + "".join(f"{i},{'ab'[i % 2]},{i}\n" for i in range(30)), "w.csv").as_posix()),
        "column 1 is 'a' (rows counted from 1 below any header, columns from 0; missing values"),
    "a level the config does not list": (lambda r, t: _use_table(r, t, target_columns=["p"], categorical={"w": ["a"]},
                                                                 path=_text(t, "s,w,p\n" + "".join(
                                                                     f"{i},{'ab'[i % 2]},{i}\n" for i in range(30)),
                                                                     "w.csv").as_posix()),
                                         "row 2 of"),
    "categorical naming no column": (lambda r, t: _use_table(r, t, target_columns=["p"], categorical={"x": ["a"]},
                                                             path=_text(t, "s,w,p\n1,2,3\n", "c.csv").as_posix()),
                                     "data.categorical = ['x']: no column named 'x'"),
    "a Latin-1 table": (lambda r, t: (t / "l.csv").write_bytes("größe,p\n1,2\n".encode("latin-1")) and
                        _use_table(r, t, target_columns=["p"], path=(t / "l.csv").as_posix()),
                        "not UTF-8 text: byte 0xf6 at offset 2"),
    "an unknown encoding": (lambda r, t: _use_table(r, t, encoding="latin-9x"), "encoding 'latin-9x' is not one"),
})


def _checkpointed(tmp_path, n=3, stop_after=1):
    path = _write(tmp_path, _small(_raw(), n=n))
    out = tmp_path / "run"
    summary = run_experiment(read_config(path), out, source=str(path), quiet=True, stop_after=stop_after)
    assert (summary == {}) == (stop_after is not None)
    return path, out


class _Payload:
    def __reduce__(self):
        import os
        return (os.system, ("touch pwned",))


def _npz_bytes(**arrays) -> bytes:
    import io
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


DAMAGE = {
    "truncated": lambda b: b[: len(b) // 2],
    "empty": lambda b: b"",
    "random bytes": lambda b: np.random.default_rng(0).bytes(4000),
    "a pickle": lambda b: __import__("pickle").dumps(_Payload()),
    "one flipped byte": lambda b: b[:-200] + bytes([b[-200] ^ 1]) + b[-199:],
    "another npz": lambda b: _npz_bytes(x=np.arange(3)),
}


def _table_run(tmp_path, likelihood="gaussian", thin=5, name="run", y_scale=1.0, predict_steps=None, **data):
    """A finished run on a 3-input table with standardised inputs (the inputs' scales differ 100-fold);
    regression targets times ``y_scale``; ``data`` updates the data section; ``predict_steps`` the run's."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(60, 3)) * [1, 10, 100]
    f = np.sin(X[:, 0]) + X[:, 1] / 10
    y = (f > 0).astype(float) if likelihood == "logistic" else y_scale * (f + 0.05 * rng.normal(size=60))
    np.savetxt(tmp_path / "d.csv", np.column_stack([X, y]), delimiter=",")
    raw = _small(_raw(), n=4)
    raw["data"] = {"path": str(tmp_path / "d.csv"), "target_columns": [-1], "train_rows": [1, 45],
                   "test_sets": {"rest": [46, 60]}, "standardize_inputs": True, "standardize_targets": False}
    raw["data"].update(data)
    raw["model"]["likelihood"] = likelihood
    raw["model"]["priors"].pop("noise") if likelihood != "gaussian" else None
    raw["chains"] = 3
    raw["run"]["thin"] = thin
    if predict_steps is not None:
        raw["run"]["predict_steps"] = predict_steps           # 0: every iteration predicts, as every one is kept
    if likelihood != "gaussian":
        raw["tuner"]["cv_metric"] = "log_loss"
    path = _write(tmp_path, raw, f"{name}.yaml")
    assert main(["run", str(path), "--out", str(tmp_path / name), "--quiet"]) == 0
    return tmp_path / name, X, y


# issue 86: tables
def _levels(t, name, sep=","):
    """A table s, w (text a/b), p in the test folder, its path (``sep`` its delimiter)."""
    return _text(t, sep.join("swp") + "\n" + "".join(f"{i}{sep}{'ab'[i % 2]}{sep}{i}\n" for i in range(30)),
                 name).as_posix()


CASES.update({
    "a column of percentages": (lambda r, t: _use_table(r, t, target_columns=["p"], path=_text(
        t, "s,rate,p\n" + "".join(f"{i},{5 * (1 + i % 3)}%,{i}\n" for i in range(30)), "u.csv").as_posix()),
        "'5%' is a number written with a unit or a decimal comma: write the column as plain numbers"),
    "a decimal comma in a semicolon table": (lambda r, t: _use_table(r, t, target_columns=["p"], path=_text(
        t, "s;w;p\n" + "".join(f"{i};{1 + i % 3},5;{i}\n" for i in range(30)), "k.csv").as_posix()),
        "'1,5' is a number written with a unit or a decimal comma"),
    "a numeric column named like an indicator": (lambda r, t: _use_table(r, t, target_columns=["p"], path=_text(
        t, "a,a=y,p\n" + "".join(f"{'xy'[i % 2]},{i},{i}\n" for i in range(30)), "i.csv").as_posix(),
        categorical={"a": ["x", "y"]}), "input column 'a=y' and text column 'a''s indicator of level 'y' have one "
                                        "name, 'a=y', among the network's inputs"),
    "a level listed twice in categorical": (lambda r, t: _use_table(r, t, target_columns=["p"], path=_levels(
        t, "w.csv"), categorical={"w": ["a", "b", "a"]}),
        "data.categorical.w = ['a', 'b', 'a']: lists level 'a' twice"),
    "categorical naming the target beside a text column": (lambda r, t: _use_table(
        r, t, target_columns=["p"], path=_levels(t, "w.csv"), categorical={"p": ["a"]}),
        "data.categorical = ['p']: names a target column"),
    "categorical naming no column beside a text column": (lambda r, t: _use_table(
        r, t, target_columns=["p"], path=_levels(t, "w.csv"), categorical={"x": ["a"]}),
        "data.categorical = ['x']: no column named 'x'"),
    "categorical of a table without a header": (lambda r, t: _use_table(r, t, header=False, categorical={"1": ["a"]}),
                                                "data.categorical = ['1']: names columns, but data.header is false"),
    "utf-16 named for a UTF-8 table": (lambda r, t: _use_table(r, t, encoding="utf-16"),
                                       "not utf-16 text: the file holds no NUL bytes"),
})


# issue 86: runs
_OWN_BOUNDS = {"step_factor": [0.05, 0.5], "num_steps": [10, 60]}
CASES.update({
    "old replicas of one fold": (lambda r, t: (r.pop("chains"), r.update(replicas={"k": 1, "data": "folds"})),
                                 "cv.folds = 1: 0 (the full-data chain alone) or >= 2 folds (replicas is the old name "
                                 "of chains and cv: read as `cv: {folds: 1}`"),
    "old replicas of no chain": (lambda r, t: (r.pop("chains"), r.update(replicas={"k": 0})),
                                 "(replicas is the old name of chains and cv: read as `chains: 0`"),
    "a tuner file that is not there": (lambda r, t: r.update(tuner={"kind": "mine", "file": "nosuch.py", "options_type":
                                                                    "Options", "bounds": _OWN_BOUNDS}),
                                       "yaml: tuner.file = 'nosuch.py': no such file"),
    "a tuner file that raises": (lambda r, t: ((t / "broken_tuner.py").write_text("raise ImportError('broken')\n"),
                                               r.update(tuner={"kind": "mine", "file": "broken_tuner.py",
                                                               "options_type": "Options", "bounds": _OWN_BOUNDS})),
                                 "yaml: tuner.file = 'broken_tuner.py': importing it raised ImportError: broken"),
})
