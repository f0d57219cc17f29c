"""Run directories that a refused command leaves whole (every file there, the same bytes), two extensions at
once, damaged run files named, and the words of the refusals (issue 86's run items)."""
import json

import pytest
import yaml

from adaptive_hmc.front import experiment
from adaptive_hmc.front.cli import main
from adaptive_hmc.rundir.results import RunDir
from cli_helpers import _raw, _small, _write


def _files(d) -> dict:
    """Every file under ``d`` by its path there, with its bytes (the lock file's content, a process id, aside)."""
    return {str(p.relative_to(d)): b"" if p.name == ".lock" else p.read_bytes()
            for p in sorted(d.rglob("*")) if p.is_file()}


def _density(tmp_path, name="dens", super_transitions=3):
    """A finished run of a plain-Python log density in ``tmp_path / name``; (config, run directory)."""
    (tmp_path / "f.py").write_text("def logp(q):\n    return -0.5 * float(q @ q), -q\n")
    cfg = _write(tmp_path, {"name": name, "model": {"kind": "density", "file": "f.py", "function": "logp", "dim": 2},
                            "sampler": {"chains": 2, "warmup": 100},
                            "run": {"seed": 1, "super_transitions": super_transitions, "budget": 200}}, f"{name}.yaml")
    assert main(["run", str(cfg), "--out", str(tmp_path / name), "--quiet"]) == 0
    return cfg, tmp_path / name


def _network(tmp_path, n=3, name="net", **run):
    raw = _small(_raw(), n=n)
    raw["run"].update(run)
    cfg = _write(tmp_path, raw, f"{name}.yaml")
    assert main(["run", str(cfg), "--out", str(tmp_path / name), "--quiet"]) == 0
    return cfg, tmp_path / name


def test_extend_of_a_run_of_the_earlier_layout_is_refused_before_it_writes_anything(tmp_path, capsys):
    """A finished density run of the earlier layout (its draws in checkpoint.draws/): --extend is refused with
    exit 2, saying so, the directory named once, and every file of the run is still there, unchanged
    (summary.json and metadata.json too), as after a refused --resume; its results still read."""
    cfg, out = _density(tmp_path)
    (out / "store").rename(out / "checkpoint.draws")                    # as an earlier version left it
    before = _files(out)
    capsys.readouterr()
    for extra, said in ((["--extend", "2"], "written by an earlier version, which kept the draws in checkpoint."
                                            "draws/"), (["--resume"], "holds a finished run")):
        assert main(["run", str(cfg), "--out", str(out), "--quiet", *extra]) == 2
        err = capsys.readouterr().err
        assert f"error: {out}: {said}" in err and f"{out}: {out}" not in err and "Traceback" not in err, err
        assert _files(out) == before
    assert main(["export", str(out)]) == 0


@pytest.mark.parametrize("kind", ["network", "density"])
def test_extend_whose_restore_fails_leaves_the_finished_run_as_it_was(tmp_path, capsys, kind):
    """An --extend refused by the restore itself (a shard of the sample store damaged after the run ended, which
    the layout check cannot see): exit 2 naming the store, and every file of the run as it was, summary.json and
    metadata.json included (the extension taken back), so its results still read and a repaired run extends."""
    cfg, out = _network(tmp_path) if kind == "network" else _density(tmp_path)
    shard = sorted((out / "store").iterdir())[0]
    good = shard.read_bytes()
    shard.write_bytes(b"damaged")
    before = _files(out)
    capsys.readouterr()
    assert main(["run", str(cfg), "--out", str(out), "--quiet", "--extend", "2"]) == 2
    err = capsys.readouterr().err
    assert "the sample store does not hold" in err and "Traceback" not in err, err
    assert _files(out) == before and (out / "summary.json").is_file()
    assert main(["export", str(out)]) == 0
    shard.write_bytes(good)
    assert main(["run", str(cfg), "--out", str(out), "--quiet", "--extend", "2"]) == 0
    assert [(e["from"], e["to"]) for e in RunDir(out).read_metadata()["extended"]] == [(3, 5)]


def test_two_extensions_at_once_each_add_their_super_transitions(tmp_path, monkeypatch):
    """A second --extend 2 that read the run's length before the first one took the directory's lock adds its
    own 2 after the first one's: the metadata records 3 -> 5 and 5 -> 7, and the run holds 7."""
    cfg, out = _network(tmp_path)
    real, other = experiment.build, []

    def build(*args, **kw):                                # the other --extend runs while this one validates
        if not other:
            other.append(None)
            other[0] = main(["run", str(cfg), "--out", str(out), "--extend", "2", "--quiet"])
        return real(*args, **kw)
    monkeypatch.setattr(experiment, "build", build)
    assert main(["run", str(cfg), "--out", str(out), "--extend", "2", "--quiet"]) == 0 and other == [0]
    assert [(e["from"], e["to"]) for e in RunDir(out).read_metadata()["extended"]] == [(3, 5), (5, 7)]
    assert json.loads((out / "summary.json").read_text())["super_transitions"] == 7
    assert len((out / "log.jsonl").read_text().splitlines()) == 7


@pytest.mark.parametrize("name", ["metadata.json", "config.resolved.yaml"])
@pytest.mark.parametrize("damage", ["{not json", ""])
def test_damaged_run_files_are_named_and_change_nothing(tmp_path, capsys, name, damage):
    """A damaged metadata.json or config.resolved.yaml: --resume of an interrupted run and --extend of a
    finished one exit 2 with "D/NAME: missing or damaged", no traceback, and every file as it was."""
    from adaptive_hmc.config import read_config
    cfg, out = _network(tmp_path)
    part = tmp_path / "part"
    assert experiment.run_experiment(read_config(cfg), part, source=str(cfg), quiet=True, stop_after=1) == {}
    capsys.readouterr()
    for d, extra in ((part, ["--resume"]), (out, ["--extend", "2"])):
        (d / name).write_text(damage)
        before = _files(d)
        assert main(["run", str(cfg), "--out", str(d), *extra]) == 2
        err = capsys.readouterr().err
        assert f"{d / name}: missing or damaged" in err and "Traceback" not in err, err
        assert _files(d) == before


def test_a_directory_in_use_after_its_first_checkpoint_is_named_in_use(tmp_path, capsys):
    """A run working in a directory that holds a checkpoint: another run there, with or without --resume, is
    refused as in use (naming the process), not told to add --resume."""
    from adaptive_hmc.config import read_config
    cfg = _write(tmp_path, _small(_raw(), n=3), "net.yaml")
    out = tmp_path / "part"
    assert experiment.run_experiment(read_config(cfg), out, source=str(cfg), quiet=True, stop_after=1) == {}
    held = RunDir(out).lock()
    try:
        before = _files(out)
        for extra in ([], ["--resume"]):
            assert main(["run", str(cfg), "--out", str(out), *extra]) == 2
            err = capsys.readouterr().err
            assert "in use by another run" in err and "add --resume" not in err, err
            assert _files(out) == before
    finally:
        held.close()


def test_a_changed_run_threads_resumes_and_other_keys_are_refused(tmp_path, capsys):
    """The draws do not depend on run.threads, so a run resumes on a machine with another core count (to the
    summary of the run straight through); a changed budget is still refused."""
    from adaptive_hmc.config import read_config
    from adaptive_hmc.rundir.metrics import untimed
    raw = _small(_raw(), n=3)
    raw["run"]["threads"] = 1
    cfg = _write(tmp_path, raw, "net.yaml")
    full = experiment.run_experiment(read_config(cfg), tmp_path / "full", source=str(cfg), quiet=True)
    assert experiment.run_experiment(read_config(cfg), tmp_path / "part", source=str(cfg), quiet=True,
                                     stop_after=1) == {}
    raw["run"]["threads"] = 2
    assert main(["run", str(_write(tmp_path, raw, "net.yaml")), "--out", str(tmp_path / "part"), "--resume",
                 "--quiet"]) == 0
    assert untimed(json.loads((tmp_path / "part" / "summary.json").read_text())) == untimed(full)
    assert yaml.safe_load((tmp_path / "part" / "config.resolved.yaml").read_text())["run"]["threads"] == 1
    raw["run"]["budget"] = 700
    assert main(["run", str(_write(tmp_path, raw, "net.yaml")), "--out", str(tmp_path / "part"), "--extend",
                 "1"]) == 2
    assert "run.budget: 600 then, 700 now" in capsys.readouterr().err


def test_a_damaged_posterior_and_a_bad_draws_count_are_named(tmp_path, capsys):
    """export of a density run whose posterior.nc is damaged exits 2 naming the file; ``--draws ²`` (a digit
    to str.isdigit, not to int) is refused as a number of draws."""
    cfg, out = _density(tmp_path)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["export", str(out), "--draws", "²"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "'²': a number of draws >= 1, or all" in err and "_draws" not in err, err
    (out / "posterior.nc").write_bytes(b"\x89HDF\r\n" + bytes(200))
    for command in ("export", "plot"):
        assert main([command, str(out)]) == 2
        err = capsys.readouterr().err
        assert f"{out / 'posterior.nc'}: missing or damaged" in err and "Traceback" not in err, err


@pytest.mark.parametrize("case", ["old replicas of one fold", "old replicas of no chain", "a tuner file that is not "
                                  "there", "a tuner file that raises"])
def test_a_refused_config_names_its_file_once(case, tmp_path, capsys):
    """The corpus's cases of issue 86 (tests/cli_helpers.py CASES): exit 2, the config named once (no prefix
    doubled, as "CFG: model/data: CFG: tuner.file" was), the old section replicas named where its key is wrong."""
    from cli_helpers import CASES
    raw = _raw()
    mutate, expected = CASES[case]
    mutate(raw, tmp_path)
    cfg = _write(tmp_path, raw)
    assert main(["run", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count(str(cfg)) == 1 and "model/data" not in err, err
