"""The package's imports go one way, in the order data flows (docs/ARCHITECTURE.md):
no module imports a layer above its own."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "adaptive_hmc"

#: Layers from the bottom; groups in one layer do not import each other.
LAYERS = [
    ("jit", "diagnostics", "tasks"),
    ("tables",),
    ("data",),
    ("models",),
    ("posterior",),
    ("samplers",),
    ("replica_options",),
    ("replica_state",),
    ("super_transition",),
    ("replicas",),
    ("store",),
    ("checkpoint",),
    ("rewards",),
    ("tuners",),
    ("runner",),
    ("progress",),
    ("density_chains", "density_checkpoint"),
    ("general", "timing"),
    ("config", "templates"),
    ("metrics",),
    ("results",),
    ("finished_run",),
    ("experiment", "estimator"),
    ("density_run",),
    ("reports", "plots", "export", "elpd"),
    ("sweep",),
    ("cli",),
]
RANK = {group: i for i, layer in enumerate(LAYERS) for group in layer}
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py")


def _group(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _imported_groups(path: Path) -> set:
    """Top-level groups of adaptive_hmc that ``path`` imports (anywhere in the file)."""
    package = path.relative_to(PACKAGE).parent.parts        # e.g. ("models",)
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                parts = list(base) + (node.module.split(".") if node.module else [])
                if parts:
                    out.add(parts[0])
                else:                         # "from . import x" at the top of the package
                    out.update(a.name for a in node.names)
            elif node.module and node.module.split(".")[0] == "adaptive_hmc":
                mod = node.module.split(".")
                out.add(mod[1] if len(mod) > 1 else node.names[0].name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                mod = a.name.split(".")
                if mod[0] == "adaptive_hmc" and len(mod) > 1:
                    out.add(mod[1])
    return out


def test_every_module_has_a_layer():
    missing = sorted({_group(p) for p in MODULES if not p.name.startswith("_") or p.name == "__init__.py"}
                     - set(RANK) - {"datasets"})
    assert not missing, f"modules without a layer in LAYERS: {missing}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down_the_flow(path):
    own = _group(path)
    upward = sorted(g for g in _imported_groups(path) - {own} if RANK.get(g, -1) >= RANK[own])
    assert not upward, f"{path.relative_to(PACKAGE)} (layer {own}) imports {upward}, which are not below it"


def test_the_check_finds_an_upward_import(tmp_path, monkeypatch):
    """The checker has power: a models module importing the replicas is caught."""
    fake = PACKAGE / "models" / "mlp.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: "from ..replicas import ReplicaSet\n")
    assert "replicas" in _imported_groups(fake)
    assert RANK["replicas"] > RANK["models"]
