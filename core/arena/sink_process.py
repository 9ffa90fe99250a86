"""The process one result sink runs in: ``python -m arena.sink_process`` (started by
:class:`arena.sinks.Sinks`, never by hand).

On its stdin, JSON lines (never pickles): a head with ``sys.path`` of the process that started
it (so the sink's class imports as it did there), the sink's name, its class and its config's
class as ``module:qualname``, the config's JSON dump and the context's fields; then one
``[method, args]`` per event (paths as strings), then ``null``: build the sink, apply each event in order, close
the sink, exit; stdin's end (the process that started it is gone) ends it too. SIGINT and
SIGTERM are ignored: it is ended by its stdin, or killed at its deadline. A sink's exception is logged on stderr (naming the sink and the event) and the
next event is applied. A plain interpreter, not ``multiprocessing``: its *spawn* would import
the caller's ``__main__`` again, i.e. run a training script that calls ``arena.evaluate()``
at its top level a second time.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from pathlib import Path


def _log(text: str) -> None:
    print(f"arena: tracking: {text}", file=sys.stderr, flush=True)


def _load(spec: str):
    module, _, qualname = spec.partition(":")
    value = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def _read(stream):
    line = stream.readline()
    if not line:
        raise EOFError
    return json.loads(line)


def _event_args(method: str, args: list) -> list:
    if method == "experiment_finished":  # (result, report path or None, video paths)
        result, report, videos = args
        return [result, None if report is None else Path(report), [Path(v) for v in videos]]
    return args


def serve(stream) -> None:
    head = _read(stream)
    sys.path[:] = head["sys_path"]
    name = head["name"]
    try:
        from arena.sinks import SinkContext

        cls = _load(head["cls"])
        config = _load(head["config_cls"]).model_validate(head["config"])
        fields = dict(head["context"])
        fields["output_dir"] = Path(fields["output_dir"])
        context = SinkContext(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})
    except Exception as exc:
        _log(f"sink '{name}' could not start: {type(exc).__name__}: {exc}; its events are dropped")
        cls = None
    try:
        sink = None if cls is None else cls(config, context)
    except Exception as exc:
        _log(f"sink '{name}' could not start: {type(exc).__name__}: {exc}; its events are dropped")
        sink = None
    while True:
        try:
            item = _read(stream)
        except EOFError:  # the process that started it is gone
            item = None
        if item is None:
            break
        if sink is None:
            continue
        method, args = item
        try:
            getattr(sink, method)(*_event_args(method, args))
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
