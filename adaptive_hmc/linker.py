"""How the package's compiled kernels are linked, run and cached (numba's ``CPUCodeLibrary.finalize`` and its
compile cache's saves, changed for this package's libraries only), and every other change the package makes
to numba: each through :func:`_patch`, here and nowhere else, and only for a numba whose patched functions
are the ones tested (:data:`NUMBA_SOURCES`).

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

Which linking a process gets (:data:`LINKING`): the package's ("package") where numba's minor is one of
:data:`NUMBA_SOURCES` and the source of every numba function that a patch here wraps, overrides, restates or
relies on hashes as recorded there (:func:`changed_sources`); numba's own ("numba") otherwise, or with
``ADAPTIVE_HMC_LINKER=numba`` in the environment: no patch applied, every kernel a plain ``numba.njit`` with
the package's options, a one-line note on stderr at import. numba's own linking compiles a first run more
slowly and rounds differently (its kernels are optimised with their callees): the draws differ from the
default's within Monte Carlo error (``tests/test_linking.py``). Cache entries of the two never mix (a
kernel's entries carry the package's source hash in the default linking alone, :func:`own`).

What is the package's: a library whose code defines a function of the package's modules (or holds a copy of
one: linked here, so that no library but a kernel's own exports its code) for linking; a function compiled
by :func:`adaptive_hmc.jit.njit` for the cache's stamp and the loaded hooks (:data:`_OURS`). A user's own
``numba.njit`` function that calls none of them is compiled, linked and cached as numba alone does it.
"""
import atexit
import functools
import hashlib
import inspect
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
from llvmlite import binding as ll
from numba.core import caching, cgutils, codegen, compiler, dispatcher, lowering
from numba.core.registry import CPUDispatcher

from . import emitter

PACKAGE = "adaptive_hmc"
#: The environment variable that chooses numba's own linking ("numba").
LINKER_ENV = "ADAPTIVE_HMC_LINKER"

#: Every numba function the patches here wrap, override, restate or rely on the behaviour of, by a name of
#: its own: the code that reads it (``finalize`` is re-implemented from numba's, ``_rebuild``'s ten
#: parameters restated, the cache's stamp set on the ``IndexDataCacheFile`` that ``Cache.__init__`` makes).
NUMBA_FUNCTIONS = {
    "CPUCodeLibrary.finalize": lambda: codegen.CPUCodeLibrary.finalize,
    "CPUCodeLibrary._get_module_for_linking": lambda: codegen.CPUCodeLibrary._get_module_for_linking,
    "CPUCodeLibrary._optimize_final_module": lambda: codegen.CPUCodeLibrary._optimize_final_module,
    "CPUCodeLibrary._finalize_final_module": lambda: codegen.CPUCodeLibrary._finalize_final_module,
    "CPUCodeLibrary.add_ir_module": lambda: codegen.CPUCodeLibrary.add_ir_module,
    "CPUCodeLibrary.add_llvm_module": lambda: codegen.CPUCodeLibrary.add_llvm_module,
    "CPUCodeLibrary.serialize_using_object_code": lambda: codegen.CPUCodeLibrary.serialize_using_object_code,
    "CPUCodeLibrary._unserialize": lambda: codegen.CPUCodeLibrary._unserialize,
    "JITCodeLibrary._finalize_specific": lambda: codegen.JITCodeLibrary._finalize_specific,
    "JITCPUCodegen._customize_tm_options": lambda: codegen.JITCPUCodegen._customize_tm_options,
    "Cache.__init__": lambda: caching.Cache.__init__,
    "Cache.save_overload": lambda: caching.Cache.save_overload,
    "IndexDataCacheFile._load_index": lambda: caching.IndexDataCacheFile._load_index,
    "IndexDataCacheFile._save_index": lambda: caching.IndexDataCacheFile._save_index,
    "CompileResult._rebuild": lambda: compiler.CompileResult._rebuild,
    "Lower.create_cpython_wrapper": lambda: lowering.Lower.create_cpython_wrapper,
    "Dispatcher.__init__": lambda: dispatcher.Dispatcher.__init__,
    "Dispatcher.enable_caching": lambda: dispatcher.Dispatcher.enable_caching,
    "Dispatcher.add_overload": lambda: dispatcher.Dispatcher.add_overload,
    "Dispatcher._compile_for_args": lambda: dispatcher._DispatcherBase._compile_for_args,
}

#: numba minor -> {name in NUMBA_FUNCTIONS: the first 16 hex digits of the SHA-256 of its source}: the tested
#: range (pyproject.toml's bounds on numba and llvmlite say the same), checked at import.
NUMBA_SOURCES = {
    "0.67": {
        "CPUCodeLibrary.finalize": "4b4c34b83488a72f",
        "CPUCodeLibrary._get_module_for_linking": "56dde0e0555b5ec8",
        "CPUCodeLibrary._optimize_final_module": "e405bd473752613b",
        "CPUCodeLibrary._finalize_final_module": "95bbf4fcbb90ed99",
        "CPUCodeLibrary.add_ir_module": "fb6dd665f0f609c4",
        "CPUCodeLibrary.add_llvm_module": "84621057b3084c21",
        "CPUCodeLibrary.serialize_using_object_code": "a895c26d01bad670",
        "CPUCodeLibrary._unserialize": "c83d278d993487f3",
        "JITCodeLibrary._finalize_specific": "81c2abfc04e950da",
        "JITCPUCodegen._customize_tm_options": "cb0890119bb0c72d",
        "Cache.__init__": "9e49d3726586f1ab",
        "Cache.save_overload": "ce07b8d21537e299",
        "IndexDataCacheFile._load_index": "4fe82fb6a9f81f38",
        "IndexDataCacheFile._save_index": "3a2668b5237572f0",
        "CompileResult._rebuild": "44fa9dc2255883ab",
        "Lower.create_cpython_wrapper": "a03ca2cc17c43c2e",
        "Dispatcher.__init__": "7b7bc34e60e75241",
        "Dispatcher.enable_caching": "8c75d787fa6845ba",
        "Dispatcher.add_overload": "3cd1a51507868539",
        "Dispatcher._compile_for_args": "6fe2b0f0f701524e",
    },
    "0.68": {
        "CPUCodeLibrary.finalize": "4b4c34b83488a72f",
        "CPUCodeLibrary._get_module_for_linking": "56dde0e0555b5ec8",
        "CPUCodeLibrary._optimize_final_module": "e405bd473752613b",
        "CPUCodeLibrary._finalize_final_module": "95bbf4fcbb90ed99",
        "CPUCodeLibrary.add_ir_module": "fb6dd665f0f609c4",
        "CPUCodeLibrary.add_llvm_module": "84621057b3084c21",
        "CPUCodeLibrary.serialize_using_object_code": "a895c26d01bad670",
        "CPUCodeLibrary._unserialize": "c83d278d993487f3",
        "JITCodeLibrary._finalize_specific": "81c2abfc04e950da",
        "JITCPUCodegen._customize_tm_options": "cb0890119bb0c72d",
        "Cache.__init__": "9e49d3726586f1ab",
        "Cache.save_overload": "ce07b8d21537e299",
        "IndexDataCacheFile._load_index": "4fe82fb6a9f81f38",
        "IndexDataCacheFile._save_index": "3a2668b5237572f0",
        "CompileResult._rebuild": "44fa9dc2255883ab",
        "Lower.create_cpython_wrapper": "a03ca2cc17c43c2e",
        "Dispatcher.__init__": "7b7bc34e60e75241",
        "Dispatcher.enable_caching": "8c75d787fa6845ba",
        "Dispatcher.add_overload": "3cd1a51507868539",
        "Dispatcher._compile_for_args": "6fe2b0f0f701524e",
    },
}


def _source_hash(name: str) -> str:
    """The SHA-256 (16 hex digits) of the source of numba's function ``name`` (unwrapped: a patched one's
    own), or "missing" where numba has no such function or its source cannot be read."""
    try:
        source = inspect.getsource(inspect.unwrap(NUMBA_FUNCTIONS[name]()))
    except (AttributeError, OSError, TypeError):
        return "missing"
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def source_hashes() -> dict:
    """The hash of every function of :data:`NUMBA_FUNCTIONS` in the numba this process runs."""
    return {name: _source_hash(name) for name in NUMBA_FUNCTIONS}


def changed_sources(table: dict = NUMBA_SOURCES, version: str = numba.__version__, hashes=None) -> list:
    """What keeps the package's linking off this numba, one message each, by ``table`` (numba minor -> the
    hashes :func:`source_hashes` gives); empty where its minor's hashes are all the same."""
    minor = ".".join(version.split(".")[:2])
    if minor not in table:
        return [f"numba {version} is outside the tested range ({', '.join(sorted(table)) or 'none'})"]
    hashes = source_hashes() if hashes is None else hashes
    recorded = table[minor]
    return [f"numba {version}: {name} is not the tested one (source sha256 {hashes.get(name, 'missing')}, "
            f"tested {recorded.get(name, 'none')} for numba {minor})"
            for name in sorted(set(hashes) | set(recorded)) if hashes.get(name) != recorded.get(name)]


def _linking() -> tuple:
    """("package", None), or ("numba", why)."""
    if os.environ.get(LINKER_ENV, "").strip().lower() == "numba":
        return "numba", f"{LINKER_ENV}=numba"
    changed = changed_sources()
    if not changed:
        return "package", None
    return "numba", changed[0] + (f" (and {len(changed) - 1} more)" if len(changed) > 1 else "")


#: "package": the package's linking (the patches below applied); "numba": numba's own.
LINKING, WHY = _linking()
if WHY:
    print(f"adaptive_hmc: {WHY}: numba's own linking (no patch of the package's; a first compile is slower, "
          f"the draws differ from the default's within Monte Carlo error)", file=sys.stderr)


_PACKAGE = Path(__file__).resolve().parent
#: The files whose compiled code ends up inside the package's kernels.
KERNEL_SOURCES = ("jit.py", "linker.py", "models/*.py", "models/*/*.py", "samplers/*.py")


def sources_hash(paths) -> str:
    """SHA-256 over the names and contents of ``paths``."""
    h = hashlib.sha256()
    for p in sorted(Path(p) for p in paths):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def kernel_sources_hash() -> str:
    return sources_hash(p for pattern in KERNEL_SOURCES for p in _PACKAGE.glob(pattern))


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
    """A compile result of ours loaded from the cache: its library keeps the hooks that the load ran, so that a
    library linking it takes them (numba's ``CodeLibrary.finalize`` does, from its callees' libraries)."""
    def patched(cls, target_context, libdata, fndesc, env, signature, objectmode, lifted, typeann, reload_init,
                referenced_envs):
        result = rebuild.__func__(cls, target_context, libdata, fndesc, env, signature, objectmode, lifted,
                                  typeann, reload_init, referenced_envs)
        if (fndesc.modname, fndesc.qualname) in _OURS:
            result.library._reload_init.update(reload_init or ())
        return result

    patched.__wrapped__ = rebuild
    return classmethod(patched)


#: (module, qualified name) of every function compiled by the package's ``njit`` (:func:`own`).
_OURS = set()
#: (module, qualified name) of every inner kernel (:class:`InnerDispatcher`).
_INNER = set()


def own(compiled):
    """A dispatcher made by the package's ``njit``, registered as the package's: where it caches, its entries'
    stamp (numba's: its own file's) also carries a hash of every kernel source (:func:`kernel_sources_hash`),
    so that a kernel whose callee in another file (or jit.py) changed is compiled again instead of running
    stale code (numba keeps a cached kernel while its own file is unchanged). The package's linking only:
    numba's own keeps numba's stamp, so that the two linkings never load each other's entries."""
    fn = getattr(compiled, "py_func", None)
    if fn is None:                               # numba's NUMBA_DISABLE_JIT: the plain Python function
        return compiled
    _OURS.add((fn.__module__, fn.__qualname__))
    cache = getattr(compiled, "_cache", None)
    if LINKING == "package" and isinstance(cache, caching.Cache):
        cache._cache_file._source_stamp = (cache._cache_file._source_stamp, kernel_sources_hash())
    return compiled


class InnerDispatcher(CPUDispatcher):
    """A kernel called by the package's compiled kernels alone (``njit(inner=True)``): compiled without
    numba's entry point for Python (the code that unboxes each argument, a
    :class:`~adaptive_hmc.models.bnn.MLPTarget`'s dozen arrays among them), which every kernel otherwise
    gets whoever calls it; with the C entry points left out too (``jit.JIT_OPTIONS``), a first run's compile
    13-18% shorter (``docs/RESULTS.md``, "A first run's compile"). A call from Python is refused with
    a TypeError (it has no code to run) instead of being dispatched. Its options are the other kernels'
    (numba's ``no_cpython_wrapper`` would do the same, but numba compiles an ``overload`` once for each set
    of options of its callers: the two sets compiled the gradient's dispatch, numpy's and the random
    generators' functions twice): :func:`_python_entry` leaves the entry point out instead. The package's
    linking only (:func:`inner`)."""

    def add_overload(self, cres):
        self.overloads[tuple(cres.signature.args)] = cres      # nothing for Python's calls to find

    def _compile_for_args(self, *args, **kws):
        raise TypeError(f"{self.py_func.__module__}.{self.py_func.__qualname__} runs inside the package's "
                        f"compiled kernels only (it has no entry point for Python): call a kernel that calls it")


def inner(fn, options: dict):
    """The kernel ``fn`` compiled with ``options`` (numba's ``njit`` options) for the package's kernels alone:
    an :class:`InnerDispatcher`, or with numba's own linking a plain ``numba.njit`` kernel."""
    if LINKING != "package":
        return own(numba.njit(**options)(fn))
    options = dict(options)
    cache = options.pop("cache", False)
    _INNER.add((fn.__module__, fn.__qualname__))
    compiled = InnerDispatcher(py_func=fn, locals={}, targetoptions=dict(options, nopython=True))
    if cache:
        compiled.enable_caching()
    return own(compiled)


def _python_entry(create):
    """numba's lowering makes the Python entry point of every kernel but an inner one."""
    def patched(self, *args, **kwargs):
        if (self.fndesc.modname, self.fndesc.qualname) in _INNER:
            return None
        return create(self, *args, **kwargs)

    patched.__wrapped__ = create
    return patched


#: The CPU features of the package's own code where they are not numba's (:func:`own_features`), or None.
_features = None


def own_features(features: str) -> None:
    """Compile the package's own functions for ``features`` (LLVM's "target-features" of each function its
    modules define, from their first optimisation on), every other library for numba's: so that a user's
    own functions are compiled and cached as numba alone does it (numba keys its cache entries on the CPU
    features it compiles for)."""
    global _features
    _features = features


def _with_features(text: str) -> str:
    attribute = f' "target-features"="{_features}"'
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("define "):
            head = line.rstrip()
            lines[i] = head[:-1].rstrip() + attribute + " {" if head.endswith("{") else head + attribute
    return "\n".join(lines)


def _add_ir(add_ir_module):
    """A module that defines functions of the package's is compiled for :func:`own_features`' features (numba's
    ``add_ir_module``, the features added to each definition)."""
    def patched(self, ir_module):
        if _features is None or not any(PACKAGE in fn.name for fn in ir_module.functions if not fn.is_declaration):
            return add_ir_module(self, ir_module)
        self._raise_if_finalized()
        ll_module = ll.parse_assembly(_with_features(cgutils.normalize_ir_text(str(ir_module))))
        ll_module.name = ir_module.name
        ll_module.verify()
        self.add_llvm_module(ll_module)

    patched.__wrapped__ = add_ir_module
    return patched


def _patch(owner, name, wrap):
    """The one way the package changes numba: ``owner.name`` wrapped by ``wrap`` (once), with the package's
    linking only."""
    if LINKING == "package" and not hasattr(getattr(owner, name), "__wrapped__"):
        setattr(owner, name, wrap(getattr(owner, name)))


_patch(codegen.CPUCodeLibrary, "finalize", _finalize)
_patch(codegen.CPUCodeLibrary, "serialize_using_object_code", _serialize)
_patch(codegen.CPUCodeLibrary, "add_ir_module", _add_ir)
_patch(caching.Cache, "save_overload", _deferred_save)
_patch(compiler.CompileResult, "_rebuild", _rebuild)
_patch(lowering.Lower, "create_cpython_wrapper", _python_entry)
if LINKING == "package":
    kernel_sources_hash()   # now, with the sources this process imports: hashed at its first cache entry
    atexit.register(save_compiled)  # instead, a run whose sources were changed while it went on filed the
    # code it had compiled under the new sources' stamp, and a later run loaded that code for them (a
    # segmentation fault, seen once)
