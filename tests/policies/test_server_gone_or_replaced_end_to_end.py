"""``arena run`` against a policy server process that dies for good, or comes back as another.

The server is arena's own (``python -m arena.testing.doubles`` serving Meta-World's expert),
a real process that exits on its 5th inference (``--exit-on-request 5``, ``os._exit``: a
crash), with nothing to restart it. The run is a real ``arena run`` in a child process; the
tests read its episode records.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from arena.results.run_summary import collect_run_records
from arena.testing.doubles import ServerProcess
from arena.testing.experiments import tiny_experiment
from arena.testing.plugin_tests import arena_run

pytestmark = pytest.mark.slow

#: Seconds a reconnect waits for the dead server: small, so the test takes seconds; every
#: episode that waited it shows a duration of at least this (a lower bound, whatever the
#: machine's speed).
RECONNECT_S = 6.0
RECHECK_S = 0.5


def _experiment(server: ServerProcess, **policy: object) -> dict:
    return tiny_experiment(
        {"type": "metaworld_expert_remote", "remote_host": server.host, "remote_port": server.port, **policy},
        task="reach-v3", episodes=6, max_episode_steps=40, external_server=True,
    )


def test_a_server_that_never_comes_back_ends_the_run_and_only_the_first_error_waits_the_reconnect_timeout(tmp_path: Path):
    with ServerProcess("arena", "--model", "metaworld-expert", "--exit-on-request", "5") as server:
        experiment = _experiment(server, reconnect_timeout_s=RECONNECT_S, recheck_timeout_s=RECHECK_S)
        result = arena_run(experiment, tmp_path / "out", timeout=240)
    records = collect_run_records(tmp_path / "out" / "run")
    said = result.stdout + result.stderr
    # the run ended at its consecutive-error limit (3), every recorded episode an error
    assert [r.outcome for r in records] == ["error"] * 3, said
    assert "3 consecutive error episodes" in said
    # the first episode met the crash and waited the whole reconnect_timeout_s for the server
    assert records[0].duration_s >= RECONNECT_S, records[0]
    assert f"within {RECONNECT_S:g} s" in records[0].error or "reconnect failed" in records[0].error
    # later episodes checked once (recheck_timeout_s), never the full reconnect_timeout_s again
    for record in records[1:]:
        assert "reconnect failed" in record.error, record.error
        assert record.duration_s < RECONNECT_S, f"episode {record.episode_index} waited {record.duration_s:.1f} s"
    # so the run stopped within about one reconnect_timeout_s in all (before: one per episode)
    assert sum(r.duration_s for r in records) < 2 * RECONNECT_S, [r.duration_s for r in records]


def test_a_server_replaced_by_another_model_makes_the_episodes_errors_naming_what_changed(tmp_path: Path):
    first = ServerProcess("arena", "--model", "metaworld-expert", "--exit-on-request", "5",
                          "--metadata", json.dumps({"model": "expert-a", "revision": 1}))
    with first:
        box: dict[str, Any] = {}
        # reconnect_timeout_s leaves the replacement time to start and answer
        experiment = _experiment(first, reconnect_timeout_s=90)
        runner = threading.Thread(
            target=lambda: box.setdefault("result", arena_run(experiment, tmp_path / "out", timeout=300)), daemon=True
        )
        runner.start()
        assert first.proc is not None
        first.proc.wait(timeout=200)  # it crashed on its 5th inference
        # the same port, another model; started from this thread (the child dies with the
        # thread that started it)
        replacement = ServerProcess("arena", "--model", "metaworld-expert",
                                    "--metadata", json.dumps({"model": "expert-b", "revision": 1}), port=first.port)
        with replacement:
            runner.join(300)
    assert not runner.is_alive() and "result" in box, "arena run did not end"
    result = box["result"]
    records = collect_run_records(tmp_path / "out" / "run")
    said = result.stdout + result.stderr
    # error episodes (infrastructure, not a policy failure), each naming what changed
    assert records and [r.outcome for r in records] == ["error"] * len(records), said
    assert len(records) == 3 and "3 consecutive error episodes" in said
    for record in records:
        assert "ServerChanged" in record.error, record.error
        assert "'model': 'expert-a' -> 'expert-b'" in record.error, record.error
        assert "revision" not in record.error  # only what changed is named
