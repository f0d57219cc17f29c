import numpy as np
import pytest

from adaptive_hmc.targets import GaussianTarget


@pytest.fixture
def bivariate():
    """The thesis's strongly correlated target (Wang, eq 2.3)."""
    return GaussianTarget(np.zeros(2), np.array([[1.0, 0.99], [0.99, 1.0]]))


@pytest.fixture
def wide10():
    """10-d Gaussian, independent coordinates with sds spanning 100x, nonzero mean."""
    sds = np.logspace(-1, 1, 10)
    return GaussianTarget(np.linspace(-1, 1, 10), np.diag(sds ** 2))
