"""The process one result sink runs in: ``python -m arena.sink_process`` (started by
:class:`arena.sinks.Sinks`, never by hand).

On its stdin, a stream of pickles: ``sys.path`` of the process that started it (so the sink's
class imports as it did there), then ``(name, sink class, config, context)``, then one
``(method, args)`` per event, then ``None``: build the sink, apply each event in order, close
the sink, exit; stdin's end (the process that started it is gone) ends it too. SIGINT and
SIGTERM are ignored: it is ended by its stdin, or killed at its deadline. A sink's exception is logged on stderr (naming the sink and the event) and the
next event is applied. A plain interpreter, not ``multiprocessing``: its *spawn* would import
the caller's ``__main__`` again, i.e. run a training script that calls ``arena.evaluate()``
at its top level a second time.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback


def _log(text: str) -> None:
    print(f"arena: tracking: {text}", file=sys.stderr, flush=True)


def serve(stream) -> None:
    sys.path[:] = pickle.load(stream)
    name, cls, config, context = pickle.load(stream)
    try:
        sink = cls(config, context)
    except Exception as exc:
        _log(f"sink '{name}' could not start: {type(exc).__name__}: {exc}; its events are dropped")
        sink = None
    while True:
        try:
            item = pickle.load(stream)
        except EOFError:  # the process that started it is gone
            item = None
        if item is None:
            break
        if sink is None:
            continue
        method, args = item
        try:
            getattr(sink, method)(*args)
        except Exception as exc:  # a sink never changes a run: log and go on
            _log(f"sink '{name}' failed in {method}: {type(exc).__name__}: {exc}")
            if os.environ.get("ARENA_DEBUG_SINKS"):
                traceback.print_exc()
    if sink is not None:
        try:
            sink.close()
        except Exception as exc:
            _log(f"sink '{name}' failed to close: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    import signal

    # Ctrl-C and `arena cancel` reach the whole process group: the process that started this
    # one still has events to send (the experiment's end) and ends it itself (stdin closed, or
    # SIGKILL at its deadline).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    serve(sys.stdin.buffer)
    sys.stderr.flush()
