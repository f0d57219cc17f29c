"""The README's and docs/ESTIMATORS.md's Python examples run as written
(smoke tier); the estimators' page documents every parameter they take."""
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
ESTIMATORS = README.parent / "docs" / "ESTIMATORS.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
DOC_BLOCKS = re.findall(r"```python\n(.*?)```", ESTIMATORS.read_text(), flags=re.S)


def test_readme_has_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code, capsys):
    namespace = {}
    exec(compile(code, str(README), "exec"), namespace)


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
