"""Object code of LLVM modules, made in a process of its own (``python -m adaptive_hmc.emitter``) while the
compiling process goes on: :mod:`adaptive_hmc.linker` sends it the compile cache's modules as bitcode and
keeps going. A process, not a thread, because LLVM's state is not safe to share between threads that use it at
once (llvmlite guards every call with one lock), and this one imports llvmlite alone, not numba.

Protocol on stdin/stdout: each request and answer is an 8-byte little-endian length and a pickle; a request is
``(bitcode, target machine options)``, an answer ``(True, object code)`` or ``(False, the error)``.

Flow position: the bottom layer; imported by nothing of the package (the linker starts it as a program).
"""
import pickle
import signal
import struct
import sys

HEADER = struct.Struct("<Q")


def send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()


def receive(stream):
    """The next message, or None at the end of the stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (n,) = HEADER.unpack(header)
    data = stream.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the compiling process's to answer; it ends us
    from llvmlite import binding as ll               # by closing our stdin
    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    machines = {}
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while (request := receive(source)) is not None:
        bitcode, options = request
        try:
            key = tuple(sorted(options.items()))
            if key not in machines:
                machines[key] = ll.Target.from_triple(ll.get_process_triple()).create_target_machine(**options)
            answer = True, machines[key].emit_object(ll.parse_bitcode(bitcode))
        except Exception as e:           # answered, not raised: the compiling process emits the module itself
            answer = False, f"{type(e).__name__}: {e}"
        send(sink, answer)


if __name__ == "__main__":
    main()
