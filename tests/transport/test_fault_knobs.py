"""``arena.testing.faults.FaultKnobs``: the fault knobs every server double shares.

The mixin is used by ``arena.testing``'s ``RecordingModel`` and ``FaultInjector`` and by the
GR00T and DreamZero doubles (their own tests drive the knobs over their wires); here the
counting, the order of the knobs, the command line, and ``FaultInjector`` behind arena's server.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pytest

from arena.testing.doubles import ChunkModel, FaultInjector, RecordingModel, chunk_model_arguments, chunk_model_from_args
from arena.testing.faults import Fault, FaultKnobs, InjectedFailure
from arena.transport.client import PolicyClient
from arena.transport.errors import ServerError


def _knobs(**kw) -> FaultKnobs:
    knobs = FaultKnobs()
    knobs.init_faults(**kw)
    return knobs


def test_inferences_are_counted_one_based_and_a_batch_counts_each_request():
    knobs = _knobs()
    assert knobs.count_inferences() == range(1, 2)
    assert knobs.count_inferences(3) == range(2, 5) and knobs.inferences == 4


def test_a_knob_fires_when_its_number_falls_inside_a_batch():
    knobs = _knobs(restart_on_request=3)
    assert knobs.before_inference(2) is None
    assert knobs.before_inference(2) is Fault.RESTART  # requests 3 and 4
    assert knobs.before_inference(2) is None  # once only
    hang = _knobs(hang_from_request=2)
    assert hang.before_inference() is None
    assert hang.before_inference() is Fault.HANG and hang.before_inference(5) is Fault.HANG  # for good


def test_restart_comes_before_hang_and_neither_waits_or_fails():
    knobs = _knobs(restart_on_request=1, hang_from_request=1, fail_on_request=1, infer_delay_s=5.0)
    started = time.monotonic()
    assert knobs.before_inference() is Fault.RESTART
    assert knobs.before_inference() is Fault.HANG
    assert time.monotonic() - started < 1.0


def test_never_reply_hangs_every_inference_and_can_be_switched_off():
    knobs = _knobs(never_reply=True)
    assert knobs.before_inference() is Fault.HANG
    knobs.never_reply = False
    assert knobs.before_inference() is None


def test_a_failing_inference_waits_its_delay_first_and_names_itself():
    knobs = _knobs(fail_on_request=[2, 4], infer_delay_s=0.15, first_delay_s=0.0)
    started = time.monotonic()
    assert knobs.before_inference() is None  # the first: first_delay_s, 0
    assert time.monotonic() - started < 0.1
    with pytest.raises(InjectedFailure, match="injected failure on request 2"):
        knobs.before_inference()
    assert time.monotonic() - started >= 0.15
    assert knobs.before_inference() is None
    with pytest.raises(InjectedFailure, match="on request 4"):
        knobs.before_inference()


def test_a_double_may_allow_one_restart_only():
    class Once(FaultKnobs):
        restarted = True

        def restart_allowed(self) -> bool:
            return not self.restarted

    knobs = Once()
    knobs.init_faults(restart_on_request=1, fail_on_request=1)
    with pytest.raises(InjectedFailure):  # no restart: the inference goes on to its other knobs
        knobs.before_inference()


def test_the_command_line_knobs_and_their_older_spellings():
    parser = chunk_model_arguments("test")
    args = parser.parse_args(["--delay-s", "0.5", "--exit-on-request", "3", "--exit-marker", "/tmp/m", "--fail-on-request", "7"])
    model = chunk_model_from_args(args)
    assert isinstance(model, FaultInjector)
    assert (model.infer_delay_s, model.restart_on_request, model.fail_on_request) == (0.5, 3, 7)
    assert model.first_delay_s is None and str(model.exit_marker) == "/tmp/m"
    plain = chunk_model_from_args(parser.parse_args([]))
    assert isinstance(plain, ChunkModel)
    assert isinstance(parser, argparse.ArgumentParser)


def test_fault_injector_behind_arenas_server_fails_the_named_request_and_serves_the_next(start_server):
    server = start_server(FaultInjector(ChunkModel((4, 3)), fail_on_request=2))
    client = PolicyClient("127.0.0.1", server.port, connect_timeout_s=10, request_timeout_s=10)
    client.connect()
    try:
        assert client.infer({})["actions"].shape == (4, 3)
        with pytest.raises(ServerError, match="injected failure on request 2"):
            client.infer({})
        if not client.connected:  # the real server closes after a traceback
            client.connect()
        assert np.asarray(client.infer({})["actions"]).shape == (4, 3)
        assert server.model.requests == 3
    finally:
        client.close()


def test_recording_model_counts_every_request_it_records():
    model = RecordingModel(lambda obs: {"actions": np.zeros((1, 1))}, fail_on_request=2)
    model.infer({"a": 1})
    with pytest.raises(InjectedFailure):
        model.infer({"a": 2})
    assert len(model.requests) == model.inferences == 2
