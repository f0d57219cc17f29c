"""The package's imports go one way, in the order data flows (docs/ARCHITECTURE.md):
no module imports a layer above its own, and the folders are layers too (the
data modules, models, samplers and tuners, then the engine, the config, the run
directory and the front, each folder's modules contiguous in that order)."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "adaptive_hmc"

#: Folders whose modules are layers of their own (named "folder.module"); the other folders are one layer each.
LAYERED_FOLDERS = ("engine", "rundir", "front")
#: Layers from the bottom; groups in one layer do not import each other.
LAYERS = [
    ("emitter",),
    ("linker",),
    ("jit", "diagnostics", "tasks"),
    ("tables",),
    ("data",),
    ("models",),
    ("samplers",),
    ("tuners",),
    ("engine.network_options",),
    ("engine.network_state",),
    ("engine.super_transition",),
    ("engine.chain_set",),
    ("engine.network_chains",),
    ("engine.rewards",),
    ("engine.runner",),
    ("engine.progress",),
    ("engine.driver",),
    ("engine.density_chains",),
    ("engine.timing",),
    ("config",),
    ("rundir.store", "rundir.posterior", "rundir.verdicts"),
    ("rundir.checkpoint",),
    ("rundir.density_checkpoint", "rundir.metrics"),
    ("rundir.inference",),
    ("rundir.results",),
    ("rundir.finished_run",),
    ("front.general", "front.templates", "front.user_files"),
    ("front.experiment", "front.estimator"),
    ("front.density_run",),
    ("front.reports", "front.plots", "front.export", "front.elpd"),
    ("front.versus",),
    ("front.sweep",),
    ("front.cli",),
]
RANK = {group: i for i, layer in enumerate(LAYERS) for group in layer}
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent.name not in
                 ("adaptive_hmc",) + LAYERED_FOLDERS)


def _group_of(parts: list) -> str:
    """The layer group of the module at ``parts`` (its dotted path under adaptive_hmc)."""
    if parts and parts[0] in LAYERED_FOLDERS:
        return ".".join(parts[:2])
    return parts[0] if parts else ""


def _group(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    return _group_of(list(rel.parts))


def _imported_groups(path: Path) -> set:
    """Layer groups of adaptive_hmc that ``path`` imports (anywhere in the file)."""
    package = path.relative_to(PACKAGE).parent.parts        # e.g. ("models",)
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[:len(package) - (node.level - 1)])
                parts = base + (node.module.split(".") if node.module else [])
                if node.module is None or (parts and parts[0] in LAYERED_FOLDERS and len(parts) == 1):
                    out.update(_group_of(parts + [a.name]) for a in node.names)   # "from . import x"
                else:
                    out.add(_group_of(parts))
            elif node.module and node.module.split(".")[0] == "adaptive_hmc":
                mod = node.module.split(".")[1:]
                out.add(_group_of(mod + ([node.names[0].name] if len(mod) < 2 else [])))
        elif isinstance(node, ast.Import):
            for a in node.names:
                mod = a.name.split(".")
                if mod[0] == "adaptive_hmc" and len(mod) > 1:
                    out.add(_group_of(mod[1:]))
    out.discard("")
    return out


def test_the_folders_are_layers_in_the_flows_order():
    """Each layered folder's modules are contiguous in LAYERS and the folders come in the architecture's order."""
    folders = [g.split(".")[0] for layer in LAYERS for g in layer]
    order = list(dict.fromkeys(folders))
    assert order.index("models") < order.index("samplers") < order.index("tuners") < order.index("engine") \
        < order.index("config") < order.index("rundir") < order.index("front")
    for f in LAYERED_FOLDERS:
        at = [i for i, x in enumerate(folders) if x == f]
        assert at == list(range(at[0], at[-1] + 1)), f"{f}'s modules are not contiguous in LAYERS"


def test_every_module_has_a_layer():
    missing = sorted({_group(p) for p in MODULES} - set(RANK) - {"datasets"})
    assert not missing, f"modules without a layer in LAYERS: {missing}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down_the_flow(path):
    own = _group(path)
    upward = sorted(g for g in _imported_groups(path) - {own} if RANK.get(g, -1) >= RANK[own])
    assert not upward, f"{path.relative_to(PACKAGE)} (layer {own}) imports {upward}, which are not below it"


def test_the_check_finds_an_upward_import(tmp_path, monkeypatch):
    """The checker has power: a models module importing the replicas, and the
    engine's replicas importing its runner, are caught."""
    fake = PACKAGE / "models" / "mlp.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: "from ..engine.network_chains import NetworkChains\n")
    assert "engine.network_chains" in _imported_groups(fake)
    assert RANK["engine.network_chains"] > RANK["models"]
    fake = PACKAGE / "engine" / "network_chains.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: "from .runner import make_run\n"
                                                                 "from . import timing\n")
    assert {"engine.runner", "engine.timing"} <= _imported_groups(fake)
    assert RANK["engine.runner"] > RANK["engine.network_chains"]


def test_every_public_name_resolves():
    """Each name ``adaptive_hmc`` offers (imported on first use) is where its map says."""
    import adaptive_hmc
    for name in adaptive_hmc.__all__:
        assert getattr(adaptive_hmc, name) is not None, name


#: The most lines a function of the package may have (its docstring included; nested functions count in theirs).
FUNCTION_LINES = 60


def _long_functions(source: str, limit: int) -> list:
    """(name, lines) of the functions in ``source`` longer than ``limit`` lines."""
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_no_function_runs_over_sixty_lines():
    """No function of adaptive_hmc/ over FUNCTION_LINES lines, in any module (the check has power: a long one
    is caught)."""
    long = {p.relative_to(PACKAGE).as_posix(): _long_functions(p.read_text(), FUNCTION_LINES)
            for p in PACKAGE.rglob("*.py")}
    assert not {k: v for k, v in long.items() if v}, long
    assert _long_functions("def f():\n" + "    x = 1\n" * FUNCTION_LINES, FUNCTION_LINES) == [
        ("f", FUNCTION_LINES + 1)]


#: The most lines a module of the package may have.
MODULE_LINES = 500


def _long_modules(texts: dict, limit: int) -> dict:
    """{module: lines} of the ``texts`` ({module: source}) longer than ``limit`` lines."""
    return {k: t.count("\n") + (not t.endswith("\n")) for k, t in texts.items()
            if t.count("\n") + (not t.endswith("\n")) > limit}


def test_no_module_runs_over_five_hundred_lines():
    """No file of adaptive_hmc/ over MODULE_LINES lines (the check has power: a long one is caught, and a
    file of exactly the limit is not)."""
    texts = {p.relative_to(PACKAGE).as_posix(): p.read_text() for p in PACKAGE.rglob("*.py")}
    assert not _long_modules(texts, MODULE_LINES), _long_modules(texts, MODULE_LINES)
    assert _long_modules({"a.py": "x = 1\n" * (MODULE_LINES + 1), "b.py": "x = 1\n" * MODULE_LINES},
                         MODULE_LINES) == {"a.py": MODULE_LINES + 1}


#: The most parameters a compiled function of the package may take (the kernels' read-only inputs travel as
#: one named tuple: models/mlp/spec.py's Inputs and LineInputs).
COMPILED_PARAMETERS = 12


def _wide_kernels(source: str, limit: int) -> list:
    """(name, parameters) of the compiled functions of ``source`` taking more than ``limit``: those decorated
    by ``njit`` or ``overload`` and those an overload's implementation returns by name."""
    tree = ast.parse(source)
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    decorated = {n.name for n in functions if any(k in ast.unparse(d) for d in n.decorator_list
                                                  for k in ("njit", "overload"))}
    returned = {r.value.id for n in functions if n.name in decorated for r in ast.walk(n)
                if isinstance(r, ast.Return) and isinstance(r.value, ast.Name)}
    return [(n.name, len(n.args.args)) for n in functions
            if n.name in decorated | returned and len(n.args.args) > limit]


def test_no_compiled_function_takes_more_than_twelve_parameters():
    """No compiled function of adaptive_hmc/ takes more than COMPILED_PARAMETERS (the check has power: a wide
    one is caught, decorated or returned by an overload)."""
    wide = {p.relative_to(PACKAGE).as_posix(): _wide_kernels(p.read_text(), COMPILED_PARAMETERS)
            for p in PACKAGE.rglob("*.py")}
    assert not {k: v for k, v in wide.items() if v}, wide
    many = ", ".join(f"a{i}" for i in range(COMPILED_PARAMETERS + 1))
    assert _wide_kernels(f"@njit\ndef f({many}):\n    pass\n", COMPILED_PARAMETERS) == [
        ("f", COMPILED_PARAMETERS + 1)]
    assert _wide_kernels(f"def g({many}):\n    pass\n@overload(h)\ndef h_impl(x):\n    return g\n",
                         COMPILED_PARAMETERS) == [("g", COMPILED_PARAMETERS + 1)]
    assert _wide_kernels(f"def plain({many}):\n    pass\n", COMPILED_PARAMETERS) == []


def test_one_driver_and_runs_that_say_what_they_have():
    """The outer loop, its progress, the run-until rule and the end-of-run verdict are wired in one module,
    engine/driver.py, which every front calls; no verb tests a run directory's kind (it asks the run
    read_run returns)."""
    uses = {p.relative_to(PACKAGE).as_posix(): p.read_text() for p in PACKAGE.rglob("*.py")}
    for name in ("run_super_transitions(", "Progress(", "def end_warnings", "class Until:", "def check_due"):
        where = sorted(k for k, text in uses.items() if name in text and k != "engine/runner.py")
        assert where == ["engine/driver.py"], (name, where)
    for front in ("front/experiment.py", "front/general.py", "front/estimator.py"):
        assert "drive(" in uses[front], front
    assert sorted(k for k, text in uses.items() if "is_density_run" in text) == ["rundir/finished_run.py",
                                                                              "rundir/results.py"]


def test_the_loop_owns_the_state_no_chain_set_runs_itself():
    """The driver threads the chains' state (``state, result = chains.step(state, action, budget)``): no chain
    set has a ``run`` of its own that would advance and hold it apart from the loop, and one ``Plan`` is the
    run's parts (no ``RunSetup``)."""
    from adaptive_hmc.engine import runner
    from adaptive_hmc.engine.chain_set import ChainSetBase
    from adaptive_hmc.engine.density_chains import DensityChains
    from adaptive_hmc.engine.network_chains import NetworkChains
    for cls in (ChainSetBase, NetworkChains, DensityChains, runner.ChainSet):
        assert not hasattr(cls, "run") and callable(getattr(cls, "started", None)), cls
        assert cls is ChainSetBase or callable(getattr(cls, "step", None)), cls       # the base leaves step to each
    assert not hasattr(runner, "RunSetup")
    assert [f.name for f in __import__("dataclasses").fields(runner.Plan)][:2] == ["chains", "tuner"]
