"""``RecordingSink``: a result sink for tests, writing every event it receives to a file.

Use it in an experiment as ``tracking: {rec: {type: "arena.testing.sinks:RecordingSink",
path: /abs/events.jsonl}}``; every process raising events (``arena run``, each ``arena
run-one``) appends one JSON line per event: ``{"event", "pid", "role", "run", "group",
"step", ...payload}`` (``episode_finished``: ``record``; ``run_finished``: ``result``;
``experiment_started``: ``config``, ``provenance``; ``experiment_finished``: ``result``,
``report``, ``videos``; ``close``). Fault knobs, for the tests that a sink never changes a
run: ``raise_on`` (event names whose method raises ``RuntimeError("injected sink failure")``,
after the line is written) and ``hang_on`` (event names whose method then sleeps ``hang_s``
seconds, i.e. hangs).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic import Field

from arena.sinks import ResultSink, SinkConfig, SinkContext


class RecordingSinkConfig(SinkConfig):
    path: str = Field(..., description="JSON-lines file every event is appended to")
    raise_on: list[str] = Field(default_factory=list, description="events whose method raises")
    hang_on: list[str] = Field(default_factory=list, description="events whose method sleeps hang_s")
    hang_s: float = Field(3600.0, ge=0, description="how long a hang lasts")


class RecordingSink(ResultSink):
    """Appends each event to ``path`` (see the module docstring)."""

    Config = RecordingSinkConfig

    def __init__(self, config: RecordingSinkConfig, context: SinkContext) -> None:
        super().__init__(config, context)
        self.config: RecordingSinkConfig = config

    def _write(self, event: str, **payload: Any) -> None:
        line = {"event": event, "pid": os.getpid(), "role": self.context.role, "run": self.context.run,
                "group": self.context.group, "step": self.context.step, **payload}
        with open(self.config.path, "a") as f:
            f.write(json.dumps(line, default=str) + "\n")
        if event in self.config.hang_on:
            time.sleep(self.config.hang_s)
        if event in self.config.raise_on:
            raise RuntimeError("injected sink failure")

    def experiment_started(self, config: dict[str, Any], provenance: dict[str, Any] | None) -> None:
        self._write("experiment_started", config=config, provenance=provenance)

    def episode_finished(self, run: str, record: dict[str, Any]) -> None:
        self._write("episode_finished", record=record)

    def run_finished(self, run: str, result: dict[str, Any]) -> None:
        self._write("run_finished", result=result)

    def experiment_finished(self, result: dict[str, Any], report: Path | None, videos: list[Path]) -> None:
        self._write("experiment_finished", result=result, report=str(report) if report else None, videos=[str(v) for v in videos])

    def close(self) -> None:
        self._write("close")


def read_events(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The events a :class:`RecordingSink` wrote to ``path``, in file order."""
    p = Path(path)
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()] if p.exists() else []
