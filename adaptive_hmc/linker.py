"""How the package's compiled kernels are linked, run and cached (numba's ``CPUCodeLibrary.finalize`` and its
compile cache's saves, changed for this package's libraries only).

Flow position: imported first by :mod:`adaptive_hmc.jit`, below every compiled layer.

A cold start's time went mostly to LLVM. Numba links into each kernel's library a copy of every kernel it calls
(their callees' too) and turns the whole into machine code, so that the code deep in the call tree (the
network's gradient) was compiled to machine code once for each level above it. Here:

- **Execution**: a kernel's library is turned into machine code on its own, each call to another of our kernels
  left to the JIT engine's linker, which binds it to that kernel's own compiled code in this process (every
  kernel has exactly one externally visible definition there, its own library's).
- **The compile cache** needs a library that loads on its own in a later process: its entry holds the object
  code of the kernel with one copy of every kernel it calls (``linkonce_odr`` while linking, so that the linker
  keeps one copy of each however many callees bring it; ``internal`` in the result). That object code is made by
  a process of its own (:mod:`adaptive_hmc.emitter`, which a worker thread feeds) while this one goes on
  compiling; the entries are written when it is done (:func:`save_compiled`: between a run's super-transitions,
  at its end and at exit), so that a run samples as soon as its kernels are compiled.
- **Every library that calls ours** (a user's compiled loop too) is linked so: numba's own way would put copies
  of our kernels in it that the JIT engine could bind other kernels' calls to (weak definitions, optimised in
  the caller's module; measured: a benchmark's loop compiled so made a later kernel crash), where here no
  library but a kernel's own exports its code.
- **What a cached kernel needs before it runs** (numba's ``reload_init``: a parallel kernel's threading layer,
  started by the call that loads it) is kept on the loaded library too, so that a kernel compiled later that
  calls it (whose library takes its callees' hooks) starts the layer when it is itself loaded from the
  cache: numba leaves a loaded library's hooks empty, and such a caller's entry, loaded alone in a later
  process, called the threading layer unstarted (a segmentation fault: a chain on two threads whose gradient
  came from the cache and whose caller was compiled).
- **Optimisation** as before: each kernel's code is optimised in its own library, with numba's small helper
  libraries (reference counts, random numbers) linked in first to be inlined; a copy of a kernel in a caller's
  cache entry is that optimised code as it is, so that every copy is the same code as the kernel's own
  (``tests/test_reproducible.py``: the same draws from a fresh compile and from the cache).
"""
import atexit
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
from llvmlite import binding as ll
from numba.core import caching, codegen, compiler

from . import emitter

PACKAGE = "adaptive_hmc"


def _defines_ours(module, linkages=(ll.Linkage.external,)) -> bool:
    return any(PACKAGE in fn.name for fn in module.functions if not fn.is_declaration and fn.linkage in linkages)


def _holds_ours(library) -> bool:
    """Whether a library's code for linking holds code of ours (its own kernel, or copies)."""
    return _defines_ours(library._get_module_for_linking(), (ll.Linkage.linkonce_odr, ll.Linkage.internal))


def _privatise(module):
    """Linked-in copies get internal linkage: a process that loads a cache entry runs the entry's own copies,
    the very code the entry holds, whatever else the process has loaded."""
    for fn in module.functions:
        if not fn.is_declaration and fn.linkage == ll.Linkage.linkonce_odr:
            fn.linkage = "internal"


def _for_linking(library):
    """A copy of ``library``'s whole code (its kernel and the copies it holds) to link into a caller's cache
    entry, the copies of our kernels shared again ("linkonce_odr"): their names are numba's unique mangled
    names, so that equal names are the same code."""
    module = library._get_module_for_linking().clone()
    for fn in module.functions:
        if not fn.is_declaration and fn.linkage == ll.Linkage.internal and PACKAGE in fn.name:
            fn.linkage = "linkonce_odr"
    return module


_worker = None         # the thread that hands the cache's modules to the emitter process and waits for them
_emitter = None        # that process (adaptive_hmc/emitter.py), False where it could not run
_pid = None            # the process these belong to (a forked child starts its own)
_pending = []          # (cache, signature, compile result): saves waiting for their library's object code
_lock = threading.Lock()


def _tm_options(cg) -> dict:
    """The options of the JIT engine's target machine (numba's own choice: this CPU, its features)."""
    options = dict(opt=int(numba.config.OPT))
    cg._customize_tm_options(options)
    return options


def _emit(bitcode: bytes, options: dict) -> bytes:
    """Object code of the module ``bitcode`` (in the worker thread): made by the emitter process, or, where
    it cannot run, here under llvmlite's lock."""
    global _emitter
    if _emitter is None:
        try:
            _emitter = subprocess.Popen([sys.executable, str(Path(__file__).with_name("emitter.py"))],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            _emitter = False
    if _emitter:
        try:
            emitter.send(_emitter.stdin, (bitcode, options))
            answer = emitter.receive(_emitter.stdout)
        except (OSError, ValueError):
            answer = None
        if answer is None:                      # the process is gone: every later module is made here
            _emitter = False
        elif answer[0]:
            return answer[1]
    tm = ll.Target.from_triple(ll.get_process_triple()).create_target_machine(**options)
    return tm.emit_object(ll.parse_bitcode(bitcode))


def _submit(bitcode: bytes, options: dict):
    global _worker, _emitter, _pid, _pending
    with _lock:
        if _pid != os.getpid():                 # first use, or a forked child: the parent's thread is not here
            _worker, _emitter, _pid, _pending[:] = None, None, os.getpid(), []
        if _worker is None:
            _worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="adaptive_hmc-objects")
        return _worker.submit(_emit, bitcode, options)


def _finalize(finalize):
    def patched(self):
        if not (_defines_ours(self._final_module) or any(_holds_ours(lib) for lib in self._linking_libraries)):
            return finalize(self)
        codegen.require_global_compiler_lock()
        self._codegen._check_llvm_bugs()
        self._raise_if_finalized()
        ours = []
        for library in dict.fromkeys(self._linking_libraries):
            self._reload_init.update(library._reload_init)
            if _holds_ours(library):
                ours.append(library)
            else:
                self._final_module.link_in(library._get_module_for_linking(), preserve=True)
        _privatise(self._final_module)
        self._optimize_final_module()
        whole = self._final_module.clone()
        for library in ours:
            whole.link_in(_for_linking(library))
        _privatise(whole)
        self._whole_object = _submit(whole.as_bitcode(), _tm_options(self._codegen))
        for fn in whole.functions:        # what a caller links (numba's _get_module_for_linking returns it): the
            if not fn.is_declaration and fn.linkage == ll.Linkage.external:   # whole code, the kernel's own
                fn.linkage = "linkonce_odr"                                   # functions shared
        self._shared_module = whole
        self._final_module.verify()
        self._finalize_final_module()

    patched.__wrapped__ = finalize
    return patched


def _serialize(serialize):
    """A library of ours is cached as the object code of its whole code (made by the worker)."""
    def patched(self):
        whole = getattr(self, "_whole_object", None)
        if whole is None:
            return serialize(self)
        self._ensure_finalized()
        return self.name, "object", (whole.result(), self._get_module_for_linking().as_bitcode())

    patched.__wrapped__ = serialize
    return patched


def _deferred_save(save):
    """A compile result of ours whose object code is still being made is saved by :func:`save_compiled`."""
    def patched(self, sig, data):
        whole = getattr(getattr(data, "library", None), "_whole_object", None)
        if whole is not None and not whole.done():
            with _lock:
                _pending.append((self, sig, data))
            return None
        return save(self, sig, data)

    patched.__wrapped__ = save
    return patched


def save_compiled(wait: bool = True) -> None:
    """Write the compile cache's entries that waited for their object code: all of them, waiting for it (the
    end of a run, the interpreter's exit), or (``wait`` False) those whose code is made (between a run's
    super-transitions, so that a run starts sampling as soon as its kernels are compiled)."""
    while True:
        with _lock:
            ready = [i for i, (_, _, data) in enumerate(_pending) if wait or data.library._whole_object.done()]
            if not ready or _pid != os.getpid():
                return
            cache, sig, data = _pending.pop(ready[0])
        caching.Cache.save_overload.__wrapped__(cache, sig, data)


def _rebuild(rebuild):
    """A compile result loaded from the cache: its library keeps the hooks that the load ran, so that a
    library linking it takes them (numba's ``CodeLibrary.finalize`` does, from its callees' libraries)."""
    def patched(cls, target_context, libdata, fndesc, env, signature, objectmode, lifted, typeann, reload_init,
                referenced_envs):
        result = rebuild.__func__(cls, target_context, libdata, fndesc, env, signature, objectmode, lifted,
                                  typeann, reload_init, referenced_envs)
        result.library._reload_init.update(reload_init or ())
        return result

    patched.__wrapped__ = rebuild
    return classmethod(patched)


def _patch(owner, name, wrap):
    if not hasattr(getattr(owner, name), "__wrapped__"):
        setattr(owner, name, wrap(getattr(owner, name)))


_patch(codegen.CPUCodeLibrary, "finalize", _finalize)
_patch(codegen.CPUCodeLibrary, "serialize_using_object_code", _serialize)
_patch(caching.Cache, "save_overload", _deferred_save)
_patch(compiler.CompileResult, "_rebuild", _rebuild)
atexit.register(save_compiled)
