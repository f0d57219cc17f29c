"""A user's own log density as a sampling target: a function of the
unconstrained position returning (log density, gradient), compiled with Numba
(run inside the compiled chain loop at full speed) or any Python callable (a
slower path, for models written with JAX, PyTorch or NumPy).

Flow position: **models** -> samplers (see :mod:`adaptive_hmc.models.base`).
The function reaches the compiled loop as a C function pointer with one
signature (:data:`SIGNATURE`), so the loop and its kernels are compiled once
for every user density and loaded from the cache afterwards; only a small
wrapper of the user's function is compiled per process. The chains move in
scaled coordinates z = q / scale (a diagonal mass matrix as a change of
variables): the scale is adapted during warm-up
(:mod:`adaptive_hmc.samplers.adaptation`) and then frozen, so that a step
factor means the same thing on every model.
"""
from __future__ import annotations

import ctypes
import inspect
import threading
from typing import Callable, NamedTuple

import numba
import numba.experimental.function_type  # noqa: F401 - types a Python callback's address (as arviz's import did)
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..jit import njit
from .base import Model, TargetKernels, no_gibbs, no_hyper_values, unit_step_scales

#: log p(q) with dlog p/dq written into its second argument: f(q*, grad*, D) -> log p.
SIGNATURE = types.float64(types.CPointer(types.float64), types.CPointer(types.float64), types.intp)
_CTYPES = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double),
                           ctypes.c_ssize_t)


@intrinsic
def _data(typingctx, arr):
    """The data pointer of a contiguous float64 array."""
    def codegen(context, builder, signature, args):
        return cgutils.create_struct_proxy(arr)(context, builder, value=args[0]).data
    return types.CPointer(types.float64)(arr), codegen


class DensityError(RuntimeError):
    """A user's Python log density raised during a run (the message names the exception)."""


class DensityData(NamedTuple):
    """One chain's view of a user density: the function pointer ``fn``, the
    ``scale`` of each coordinate (q = scale * z) and scratch space for q and
    the gradient (each chain has its own)."""

    fn: object
    scale: np.ndarray
    q: np.ndarray
    g: np.ndarray


@njit(inline="always")
def _energy_grad(z, grad, t, hyper):
    q, g, scale = t.q, t.g, t.scale
    D = z.size
    for k in range(D):
        q[k] = z[k] * scale[k]
    lp = t.fn(_data(q), _data(g), D)
    for k in range(D):
        grad[k] = -g[k] * scale[k]
    return -lp


@njit
def _no_predictions(q, t, hyper, acc):
    """A user density predicts nothing."""


#: Step scales of 1: the metric's scale is in the change of variables.
DensityData.kernels = TargetKernels(_energy_grad, unit_step_scales, no_gibbs, no_hyper_values, _no_predictions)


def _compiled(fn, in_place: bool) -> Callable:
    """A C callback of SIGNATURE around Numba function ``fn(q) -> (log p,
    grad)`` or, ``in_place``, ``fn(q, grad) -> log p`` (writing the gradient
    into ``grad``: no array made per call); an exception in ``fn`` makes the
    evaluation NaN (a divergent trajectory)."""
    if in_place:
        @numba.cfunc(SIGNATURE, nogil=True, error_model="numpy")
        def callback(qp, gp, n):
            try:
                return fn(numba.carray(qp, n), numba.carray(gp, n))
            except Exception:                  # e.g. a factorisation of a matrix with NaNs: a divergence
                return np.nan
        return callback

    @numba.cfunc(SIGNATURE, nogil=True, error_model="numpy")
    def callback(qp, gp, n):
        try:
            lp, g = fn(numba.carray(qp, n))
        except Exception:                      # e.g. a factorisation of a matrix with NaNs: a divergence
            return np.nan
        out = numba.carray(gp, n)
        for k in range(n):
            out[k] = g[k]
        return lp
    return callback


class _PythonCallback(types.WrapperAddressProtocol):
    """A ctypes callback of SIGNATURE around a Python function ``fn(q) -> (log
    p, grad)``, called with the GIL held. An exception in ``fn`` makes the
    evaluation NaN (a divergent trajectory, so the chain stays where it was) and
    is kept in :attr:`error` to be raised when the run's compiled code returns."""

    def __init__(self, fn, dim: int):
        self.fn, self.dim, self.error = fn, dim, None
        self.lock = threading.Lock()

        def call(qp, gp, n):
            try:
                q = np.ctypeslib.as_array(qp, (n,)).copy()
                lp, g = fn(q)
                np.ctypeslib.as_array(gp, (n,))[:] = np.asarray(g, dtype=np.float64).reshape(n)
                return float(lp)
            except BaseException as e:          # noqa: BLE001 - re-raised by check()
                with self.lock:
                    self.error = self.error or e
                return float("nan")
        self._c = _CTYPES(call)

    def __wrapper_address__(self) -> int:
        return ctypes.cast(self._c, ctypes.c_void_p).value

    def signature(self):
        return SIGNATURE

    def check(self):
        """Raise the first exception the function raised, if any."""
        if self.error is not None:
            e, self.error = self.error, None
            raise DensityError(f"the log density raised {type(e).__name__}: {e}") from e


class LogDensity(Model):
    """A user's log density over ``dim`` unconstrained coordinates:
    ``logp_grad(q) -> (log p(q), d log p / dq)`` or, with two parameters,
    ``logp_grad(q, grad) -> log p(q)`` writing the gradient into ``grad`` (no
    array made per evaluation), a Numba function (``njit``, run inside the
    compiled chain loop) or any Python callable (called with the GIL held).
    ``names`` maps each parameter's name to its shape, in the order of q
    (default: one vector named "q")."""

    def __init__(self, logp_grad, dim: int, names: dict | None = None):
        if not (isinstance(dim, (int, np.integer)) and dim >= 1):
            raise ValueError(f"dim={dim!r}: the number of coordinates, an integer >= 1")
        self.dim = int(dim)
        self.names = {"q": (self.dim,)} if names is None else {k: tuple(v) for k, v in names.items()}
        sizes = sum(int(np.prod(s)) for s in self.names.values())
        if sizes != self.dim:
            raise ValueError(f"names={names!r}: their sizes add up to {sizes}, not dim={self.dim}")
        self.logp_grad = logp_grad
        self.compiled = isinstance(logp_grad, numba.core.registry.CPUDispatcher)
        fn = logp_grad.py_func if self.compiled else logp_grad
        try:
            self.in_place = len(inspect.signature(fn).parameters) == 2
        except (TypeError, ValueError):                 # a callable without a signature: the usual form
            self.in_place = False
        self.callback = _compiled(logp_grad, self.in_place) if self.compiled else \
            _PythonCallback(self.evaluate, self.dim)

    def evaluate(self, q) -> tuple:
        """(log p(q), its gradient), whichever form the function has."""
        if self.in_place:
            g = np.empty(self.dim)
            return self.logp_grad(q, g), g
        return self.logp_grad(q)
        self.target = self.chain_target(np.ones(self.dim))

    def chain_target(self, scale) -> DensityData:
        """A target of its own for one chain, with coordinates scaled by ``scale``."""
        return DensityData(self.callback, np.ascontiguousarray(scale, dtype=np.float64), np.empty(self.dim),
                           np.empty(self.dim))

    def check_start(self, positions):
        """ValueError unless the function gives a finite log density and a
        gradient of ``dim`` finite numbers at each of ``positions`` (dim,)."""
        for j, q in enumerate(np.atleast_2d(positions)):
            try:
                out = self.evaluate(np.array(q, dtype=np.float64))
            except Exception as e:                   # noqa: BLE001 - reported with the start that failed
                raise ValueError(f"the log density at initial position {j} raised {type(e).__name__}: {e}") from e
            try:
                lp, g = out
                lp, g = float(lp), np.asarray(g, dtype=np.float64)
            except (TypeError, ValueError):
                shown = repr(out)
                raise ValueError(f"the log density at initial position {j} returned "
                                 f"{shown[:80] + ('...' if len(shown) > 80 else '')}; it must return the log "
                                 f"density (a number) and its gradient ({self.dim} numbers)") from None
            if g.shape != (self.dim,):
                raise ValueError(f"the log density's gradient at initial position {j} has shape {g.shape}; "
                                 f"expected ({self.dim},), one entry per coordinate of the position")
            if not (np.isfinite(lp) and np.all(np.isfinite(g))):
                raise ValueError(f"the log density at initial position {j} is {lp} (gradient finite: "
                                 f"{bool(np.all(np.isfinite(g)))}); start every chain where it is finite")

    def check(self):
        """Raise what the Python log density raised during the last run (nothing for a compiled one)."""
        if not self.compiled:
            self.callback.check()

    def split(self, Q) -> dict:
        """Draws Q (..., dim) as {name: (..., *shape)}."""
        Q = np.asarray(Q)
        out, start = {}, 0
        for name, shape in self.names.items():
            n = int(np.prod(shape))
            out[name] = Q[..., start:start + n].reshape(*Q.shape[:-1], *shape)
            start += n
        return out
