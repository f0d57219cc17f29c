"""The docs hold true: the Python examples of the README and docs/ run as
written (smoke tier), every `adaptive-hmc` command line in them is one the
command line accepts, their links lead to files that exist, the README stays a
front door, and the estimators' page documents every parameter they take."""
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
ESTIMATORS = ROOT / "docs" / "ESTIMATORS.md"
#: The hand-written pages (the experiments' tables are written by their scripts).
PAGES = [README] + [ROOT / "docs" / f"{name}.md" for name in ("METHOD", "USAGE", "RESULTS", "ESTIMATORS",
                                                               "ARCHITECTURE", "CONFIG")]
BLOCKS = [(page, code) for page in PAGES if page != ESTIMATORS
          for code in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)]
DOC_BLOCKS = re.findall(r"```python\n(.*?)```", ESTIMATORS.read_text(), flags=re.S)


def _commands():
    """(page, command line) of every `adaptive-hmc` line in the pages' bash blocks and command tables."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
            for line in block.splitlines():
                line = re.sub(r"\s*\[[^\]]*\]", "", line.split(" #")[0]).strip()     # [--optional PLACEHOLDERS]
                for part in line.split("&&"):
                    part = part.strip().removeprefix(".venv/bin/")
                    if part.startswith("adaptive-hmc "):
                        found.append((page, part))
        for cell in re.findall(r"^\| `(adaptive-hmc [^`]*)` \|", text, flags=re.M):
            found.append((page, re.sub(r"\s*\[[^\]]*\]", "", cell).replace("\\|", "|").split("|")[0].strip()))
    return found


def test_readme_is_a_front_door():
    """The README: at most about 200 lines, the quick start's two commands, one example, links to the rest."""
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/adaptive-hmc run " \
           "configs/robot_arm_main.yaml" in text
    assert 'python3 -m venv .venv && .venv/bin/pip install ".[test]" && .venv/bin/python -m pytest' in text
    assert len([b for p, b in BLOCKS if p == README]) >= 1
    for page in ("METHOD", "USAGE", "RESULTS", "CONFIG", "ESTIMATORS", "ARCHITECTURE"):
        assert f"(docs/{page}.md)" in text


@pytest.mark.parametrize("page,code", BLOCKS, ids=[f"{p.stem}{i}" for i, (p, _) in enumerate(BLOCKS)])
def test_docs_example_runs(page, code, capsys):
    namespace = {}
    exec(compile(code, str(page), "exec"), namespace)


@pytest.mark.parametrize("page,line", _commands(), ids=[f"{p.stem}:{c[:40]}" for p, c in _commands()])
def test_docs_command_line_is_accepted(page, line):
    """Each command the docs show parses as the command line's own parser reads it (the commands
    that run are run by the command-line tests: the quick configs, init, validate, compare, predict, ...)."""
    from adaptive_hmc.front.cli import parser
    args = parser().parse_args(shlex.split(line)[1:])
    assert args.command == shlex.split(line)[1]


def test_docs_commands_cover_every_command():
    from adaptive_hmc.front.cli import parser
    sub = next(a for a in parser()._actions if a.dest == "command")
    shown = {shlex.split(line)[1] for _, line in _commands()}
    assert shown == set(sub.choices), set(sub.choices) ^ shown


def test_docs_links_lead_to_files():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not target.startswith(("http://", "https://")):
                assert (page.parent / target).exists(), f"{page.name}: link to {target}"


@pytest.mark.parametrize("code", DOC_BLOCKS, ids=[f"estimators{i}" for i in range(len(DOC_BLOCKS))])
def test_estimator_docs_example_runs(code, capsys):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                  # a short example run warns that it has not converged
        exec(compile(code, str(ESTIMATORS), "exec"), {})
    assert "RMSE" in capsys.readouterr().out


def test_estimator_docs_list_every_parameter():
    """The parameter tables of docs/ESTIMATORS.md name exactly the
    constructor's parameters, each default as the constructor's."""
    from adaptive_hmc import BNNClassifier, BNNRegressor
    rows = re.findall(r"^\| `(\w+)` \| `?([^|`]*)`? \|", ESTIMATORS.read_text(), flags=re.M)
    documented = {name: default for name, default in rows if name not in ("weights_",)}
    for cls in (BNNRegressor, BNNClassifier):
        params = cls().get_params()
        mine = {n: d for n, d in documented.items() if n in params}
        assert set(mine) == set(params), set(params) ^ set(mine)
        for name, default in mine.items():
            assert default == repr(params[name]).replace("'", '"'), (name, default, params[name])
    assert "cv_metric" not in BNNRegressor().get_params()
