"""Sweeps: one sweep file expands to many runs, executed as Dask tasks.

Flow position: the edge's batch form. A sweep file names base configs and
overrides; :func:`expand` turns it into one config per combination (every one
validated before anything runs); :func:`run_sweep` runs them on a Dask cluster
(a ``LocalCluster`` of single-threaded worker processes by default, or an
existing scheduler), each as :func:`~adaptive_hmc.front.experiment.run_experiment`
into its own run directory, and keeps ``sweep.csv`` and ``sweep.md`` up to
date as runs finish. A sweep directory::

    SWEEP_DIR/sweep.yaml         the sweep file and its expansion (checked on --resume)
    SWEEP_DIR/configs/NAME.yaml  each run's config (runnable on its own)
    SWEEP_DIR/runs/NAME/         each run's directory
    SWEEP_DIR/logs/NAME.log      each run's messages; the traceback of a failed run
    SWEEP_DIR/sweep.csv|.md      one row per run
"""
from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import re
import sys
import time
import traceback
from contextlib import contextmanager, nullcontext, redirect_stderr
from pathlib import Path
from typing import NamedTuple

import yaml

from ..config import Config, ConfigError, parse
from ..rundir.finished_run import read_run
from ..rundir.results import RunDir
from ..rundir.store import atomic_write

SWEEP_KEYS = {"name": "the sweep's name (runs go to sweeps/NAME by default)",
              "base": "a config file, or a list of them, relative to the sweep file",
              "grid": "mapping of dotted config keys to lists of values: every combination runs",
              "cases": "list of mappings of dotted keys to values (and an optional label), each combined with "
                       "the grid"}


class Planned(NamedTuple):
    """One run of a sweep: its name, the overrides that make it, its config (a dict)."""

    name: str
    overrides: dict
    raw: dict


def _fail(path, key, value, allowed) -> None:
    raise ConfigError(f"{path}: {key} = {value!r}: {allowed}")


def _label(value) -> str:
    """A short readable label of an override value."""
    if isinstance(value, dict):
        return "-".join(_label(v) for k, v in value.items() if not isinstance(v, dict) and k != "bounds") or "x"
    if isinstance(value, (list, tuple)):
        return "x".join(_label(v) for v in value)
    return str(value)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_")[:120] or "run"


def set_key(raw: dict, key: str, value, path) -> None:
    """Set dotted ``key`` (e.g. ``data.split.seed``) of config dict ``raw``; a
    section name alone replaces the whole section."""
    *parents, last = key.split(".")
    node = raw
    for i, p in enumerate(parents):
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            _fail(path, key, value, f"{'.'.join(parents[:i + 1])} is not a section of the base config")
    node[last] = value


def read_sweep(path) -> dict:
    """The sweep file as a dict, its keys checked (ConfigError otherwise)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such sweep file")
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(spec, dict):
        raise ConfigError(f"{path}: the top level must be a mapping with keys {', '.join(SWEEP_KEYS)}")
    for key in spec:
        if key not in SWEEP_KEYS:
            _fail(path, key, spec[key], "unknown key; allowed: " + "; ".join(f"{k} ({v})" for k, v in
                                                                            SWEEP_KEYS.items()))
    if "base" not in spec:
        raise ConfigError(f"{path}: base: required ({SWEEP_KEYS['base']})")
    if not isinstance(spec.get("name", "x"), str) or not re.fullmatch(r"[A-Za-z0-9._-]+", spec.get("name", "x")):
        _fail(path, "name", spec.get("name"), "letters, digits, '.', '_' and '-' only")
    grid = spec.setdefault("grid", {}) or {}
    if not isinstance(grid, dict):
        _fail(path, "grid", grid, SWEEP_KEYS["grid"])
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            _fail(path, f"grid.{key}", values, "a non-empty list of values (one run per value)")
    cases = spec.setdefault("cases", []) or []
    if not isinstance(cases, list) or not all(isinstance(c, dict) and c for c in cases):
        _fail(path, "cases", cases, SWEEP_KEYS["cases"])
    spec["grid"], spec["cases"] = grid, cases
    return spec


def expand(path) -> tuple:
    """(the sweep's name, [:class:`Planned`, ...]): every base x grid
    combination x case, named by what varies, each config validated with
    its data (ConfigError, naming the sweep file and the run, on the first
    problem)."""
    from .density_run import check
    from .experiment import build
    path = Path(path)
    spec = read_sweep(path)
    bases = spec["base"] if isinstance(spec["base"], list) else [spec["base"]]
    base_raw = {}
    for b in bases:
        p = (path.parent / str(b)).resolve()
        if not p.is_file():
            _fail(path, "base", b, f"no such config file ({p})")
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
        if isinstance(raw, dict) and isinstance(raw.get("data"), dict) and raw["data"].get("path"):
            raw["data"]["path"] = str((p.parent / raw["data"]["path"]).resolve())   # runnable from anywhere
        if isinstance(raw, dict) and isinstance(raw.get("model"), dict) and raw["model"].get("kind") == "density" \
                and raw["model"].get("file"):
            raw["model"]["file"] = str((p.parent / raw["model"]["file"]).resolve())
        base_raw[str(b)] = raw
    keys = list(spec["grid"])
    combos = []
    for b in bases:
        for values in itertools.product(*(spec["grid"][k] for k in keys)):
            for case in spec["cases"] or [{}]:
                combos.append(({"base": str(b), **dict(zip(keys, values)), **case}, case))
    if not combos:
        raise ConfigError(f"{path}: the sweep expands to no runs")
    varying = [k for k in dict.fromkeys(k for o, _ in combos for k in o)
               if len({yaml.safe_dump(o.get(k)) for o, _ in combos}) > 1]
    planned, seen = [], {}
    for over, case in combos:      # named by what varies; a case's label stands for the case's keys
        parts = [Path(over["base"]).stem] if "base" in varying else []
        if "label" in case:
            parts.append(str(case["label"]))
        parts += [f"{k.split('.')[-1]}={_label(over[k])}" for k in varying if k not in ("base", "label")
                  and k in over and not ("label" in case and k in case)]
        name = _safe("__".join(parts) or spec.get("name", "run"))
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}-{seen[name]}"
        raw = yaml.safe_load(yaml.safe_dump(base_raw[over["base"]]))      # a deep copy
        for k, v in over.items():
            if k not in ("base", "label"):
                set_key(raw, k, v, path)
        raw.setdefault("run", {}).setdefault("threads", 1)    # one worker process per core does the parallelism
        source = f"{path} (run {name})"
        cfg = parse(raw, source)
        if isinstance(cfg, Config):
            build(cfg, source)
        else:                                      # a user's density: its file, function and starts checked
            check(cfg, source)
        planned.append(Planned(name, {k: v for k, v in over.items() if k in varying}, raw))
    return spec.get("name") or path.stem, planned


def run_one(config_path: str, run_dir: str, log_path: str) -> dict:
    """Run (or resume, or skip when finished) one run of a sweep; the task a
    Dask worker executes. Messages go to ``log_path``."""
    from ..config import read_config
    from .density_run import run_density
    from .experiment import run_experiment
    status = RunDir(run_dir).status()
    if status == "finished":
        return {"status": "finished", "skipped": True}
    cfg = read_config(config_path)
    run = run_experiment if isinstance(cfg, Config) else run_density
    with open(log_path, "a") as log, redirect_stderr(log):
        run(cfg, run_dir, source=config_path, resume=status == "checkpointed", quiet=True)
    return {"status": "finished", "skipped": False}


def _write_atomic(path: Path, text: str) -> None:
    atomic_write(path, text.encode())


def result_row(p: Planned, run_dir: Path, status: str, error: str = "") -> dict:
    """One row of the sweep's table: the overrides, then the run's figures
    (:func:`~adaptive_hmc.front.reports.compare`) when it finished."""
    row = {"run": p.name, **{k: _label(v) if isinstance(v, (dict, list)) else v for k, v in p.overrides.items()},
           "status": status}
    run = read_run(run_dir) if status == "finished" else None
    if run is not None and not run.network:
        from .reports import density_rows
        row.update({k: v for k, v in density_rows([run])[0].items() if k != "run"})
    elif run is not None:
        from .reports import compare
        r = compare([run_dir])[0]
        for name in r["test"]:
            row[f"test {r['metric']} {name}"] = r["test"][name]
            row[f"test {r['metric']} {name} se"] = r["test_se"][name]
        row.update({"cv_error": r["cv_error"], "acceptance": r["acceptance"], "divergences": r["divergences"],
                    "leapfrog_steps": r["leapfrog_steps"]})
        d = r["diagnostics"] or {}
        row["R-hat max, predictions and log hyperparameters"] = d.get("rhat_max")
        for name, t in d.get("test", {}).items():
            for stat in ("min", "median"):
                row[f"ESS per 1000 grad {name} {stat}"] = t["ess_per_1000_gradients"][stat]
        row.update({"wall_s": r["wall_s"], "compile_s": r["compile_s"]})
    row["error"] = error
    return row


def write_tables(out: Path, rows: list) -> None:
    """sweep.csv and sweep.md, one row per run (columns: the union, in order)."""
    cols = list(dict.fromkeys(c for r in rows for c in r))
    buf = io.StringIO()
    w = csv.DictWriter(buf, cols, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    _write_atomic(out / "sweep.csv", buf.getvalue())

    def cell(v):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        return f"{v:.5g}" if isinstance(v, float) else str(v).replace("|", "/").replace("\n", " ")

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in cols) + " |" for r in rows]
    _write_atomic(out / "sweep.md", "\n".join(lines) + "\n")


def _record(planned) -> dict:
    return {"runs": {p.name: p.raw for p in planned}}


def prepare(path, out, resume: bool) -> tuple:
    """(name, planned runs, sweep directory, names still to run); refuses a
    directory holding another sweep, or an unfinished one without ``resume``.
    Writes the sweep record and the configs."""
    name, planned = expand(path)
    out = Path(out) if out else Path("sweeps") / name
    record = _record(planned)
    stored = out / "sweep.yaml"
    if stored.is_file():
        old = yaml.safe_load(stored.read_text())
        if old.get("expansion") != record:
            raise ConfigError(f"{out}: holds a different sweep (its sweep.yaml); use another --out")
    elif out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out}: exists and is not a sweep directory; use another --out")
    todo = [p.name for p in planned if RunDir(out / "runs" / p.name).status() != "finished"]
    if stored.is_file() and todo and not resume:
        raise ConfigError(f"{out}: holds this sweep, {len(planned) - len(todo)} of {len(planned)} runs finished; "
                          f"add --resume to run the rest")
    for d in ("configs", "runs", "logs"):
        (out / d).mkdir(parents=True, exist_ok=True)
    _write_atomic(stored, yaml.safe_dump({"sweep": read_sweep(path), "source": str(Path(path).resolve()),
                                          "expansion": record}, sort_keys=False))
    for p in planned:
        _write_atomic(out / "configs" / f"{p.name}.yaml", yaml.safe_dump(p.raw, sort_keys=False))
    return name, planned, out, todo


def dask_client(scheduler=None, workers=None) -> tuple:
    """(a Dask client, its LocalCluster or None): of the scheduler at
    ``scheduler``, or of a new LocalCluster with ``workers`` (default: one per
    core) single-threaded worker processes whose Numba and BLAS use one thread."""
    from distributed import Client, LocalCluster
    if scheduler:
        return Client(scheduler), None
    one = {k: "1" for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                           dashboard_address=None, env=one, silence_logs=40)
    return Client(cluster), cluster


@contextmanager
def dask_session(scheduler=None, workers=None):
    """:func:`dask_client` as a context: the client (and its local cluster) closed on leaving."""
    client, cluster = dask_client(scheduler, workers)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def map_tasks(client, fn, calls: dict, store) -> dict:
    """{key: fn(*args)} for ``calls`` ({key: args}), each a Dask task; the
    results are kept in the JSON file ``store``, rewritten atomically as each
    task ends, and those already there are not computed again."""
    from distributed import as_completed
    store = Path(store)
    done = json.loads(store.read_text()) if store.is_file() else {}
    futures = {client.submit(fn, *args, pure=False): k for k, args in calls.items() if k not in done}
    for fut in as_completed(futures):
        done[futures[fut]] = fut.result()
        _write_atomic(store, json.dumps(done, indent=1))
    return {k: done[k] for k in calls}


def timed_map_tasks(client, fn, calls: dict, store, timings, label: str) -> dict:
    """:func:`map_tasks`, and, when it computed any task, its wall seconds kept
    under ``label`` in the JSON file ``timings`` (a rerun that only reads the
    stored results keeps the time of the run that made them)."""
    store, timings = Path(store), Path(timings)
    done = set(json.loads(store.read_text())) if store.is_file() else set()
    t0 = time.perf_counter()
    results = map_tasks(client, fn, calls, store)
    if set(calls) - done:
        seconds = json.loads(timings.read_text()) if timings.is_file() else {}
        seconds[label] = time.perf_counter() - t0
        _write_atomic(timings, json.dumps(seconds))
    return results


def _say(message):
    print(message, file=sys.stderr, flush=True)


def _error_of(fut, log_path) -> str:
    """"" for a run that finished; else its exception in a line, its traceback appended to the run's log."""
    if fut.status == "finished":
        return ""
    exc = fut.exception()
    with open(log_path, "a") as log:
        log.write("".join(traceback.format_exception(exc)))
    return f"{type(exc).__name__}: {exc}"


def run_sweep(path, out=None, scheduler=None, workers=None, resume=False, quiet=False, client=None) -> int:
    """Run a sweep file; 0 when every run finished, 1 when some failed (each
    recorded with its error in sweep.csv and its log). The runs go to
    ``client`` when given (left open), else to :func:`dask_session`'s."""
    from distributed import as_completed
    say = _say
    name, planned, out, todo = prepare(path, out, resume)
    rows = {p.name: result_row(p, out / "runs" / p.name, "finished" if p.name not in todo else "pending")
            for p in planned}     # the state of every run, each finished run read once
    write_tables(out, list(rows.values()))
    if not todo:
        say(f"{out}: all {len(planned)} runs of sweep {name} are finished; nothing to do (results: "
            f"{out / 'sweep.csv'})")
        return 0
    by_name = {p.name: p for p in planned}
    given = client is not None
    session = nullcontext(client) if given else dask_session(scheduler, workers)
    bar = None
    start = time.perf_counter()
    try:
        with session as client:
            n_workers = len(client.scheduler_info()["workers"])
            where = "the given client" if given else f"scheduler {scheduler}" if scheduler else "local cluster"
            say(f"sweep {name}: {len(todo)} of {len(planned)} runs to do on {n_workers} Dask workers ({where}); "
                f"results: {out / 'sweep.csv'}")
            if not quiet and sys.stderr.isatty():
                from tqdm import tqdm
                bar = tqdm(total=len(planned), initial=len(planned) - len(todo), unit="run", file=sys.stderr)
            futures = {client.submit(run_one, str((out / "configs" / f"{n}.yaml").resolve()),
                                     str((out / "runs" / n).resolve()), str((out / "logs" / f"{n}.log").resolve()),
                                     key=f"adaptive-hmc-{name}-{n}-{time.time_ns()}", pure=False, retries=0): n
                       for n in todo}
            for fut in as_completed(futures):
                n = futures[fut]
                error = _error_of(fut, out / "logs" / f"{n}.log")
                rows[n] = result_row(by_name[n], out / "runs" / n, "failed" if error else "finished", error)
                write_tables(out, list(rows.values()))
                states = [r["status"] for r in rows.values()]
                failed, running = states.count("failed"), min(n_workers, states.count("pending"))
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(finished=states.count("finished"), running=running, failed=failed)
                elif not quiet:
                    say(f"[{len(states) - states.count('pending')}/{len(planned)}] {n}: {rows[n]['status']}"
                        f"{' (' + error + ')' if error else ''}; {failed} failed, {running} running, "
                        f"{time.perf_counter() - start:.0f} s")
    except KeyboardInterrupt:
        from .experiment import Interrupted
        raise Interrupted(f"sweep {name}: interrupted; finished runs are kept and interrupted ones resume from "
                          f"their last checkpoint: adaptive-hmc sweep {path} --out {out} --resume") from None
    finally:
        if bar is not None:
            bar.close()
    failed = [n for n, r in rows.items() if r["status"] == "failed"]
    say(f"sweep {name}: {len(planned) - len(failed)} of {len(planned)} runs finished in "
        f"{time.perf_counter() - start:.0f} s" + (f"; {len(failed)} failed (see sweep.csv and logs/): "
                                                    f"{', '.join(failed)}" if failed else "")
        + f"; results: {out / 'sweep.csv'}, {out / 'sweep.md'}")
    return 1 if failed else 0


def run_dirs(sweep_dir, finished_only: bool = True) -> list:
    """The run directories of a sweep directory (those that hold finished
    runs, unless ``finished_only`` is false), in the sweep's order."""
    sweep_dir = Path(sweep_dir)
    record = yaml.safe_load((sweep_dir / "sweep.yaml").read_text())
    dirs = [sweep_dir / "runs" / n for n in record["expansion"]["runs"]]
    return [d for d in dirs if RunDir(d).is_finished or not finished_only]
