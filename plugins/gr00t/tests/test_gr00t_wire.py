"""GR00T's wire protocol: codec, endpoints, error replies, tokens and real timeouts."""

from __future__ import annotations

import io
import json
import time

import msgpack
import numpy as np
import pytest

from arena.transport.errors import CodecError, RequestTimeout
from arena.transport.probe import probe_once

from arena_gr00t.client import Gr00tClient, Gr00tServerError
from arena_gr00t.codec import ModalityConfig, packb, unpackb
from arena_gr00t.testing import Gr00tDouble


def test_arrays_travel_as_npy_bytes_under_str_marker_keys():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    raw = msgpack.unpackb(packb({"a": arr}), raw=False)
    assert raw["a"]["__ndarray_class__"] is True
    assert raw["a"]["as_npy"].startswith(b"\x93NUMPY")
    back = unpackb(packb({"a": arr}))["a"]
    assert back.dtype == np.float32 and back.flags.writeable
    np.testing.assert_array_equal(back, arr)


def test_pickled_npy_payloads_are_refused_not_unpickled():
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    evil = msgpack.packb({"__ndarray_class__": True, "as_npy": buffer.getvalue()})
    with pytest.raises(CodecError, match="refused"):
        unpackb(evil)


@pytest.mark.parametrize("value", [np.array([1, "a"], dtype=object), np.float32(1.0), object()])
def test_values_the_real_server_cannot_take_are_refused_before_sending(value):
    with pytest.raises(CodecError):
        packb({"x": value})


def test_modality_config_decodes_from_n15_json_string_and_n16_map():
    as_map = {"delta_indices": [0, 1], "modality_keys": ["joint_position"]}
    for as_json in (json.dumps(as_map), as_map):
        doc = msgpack.packb({"state": {"__ModalityConfig_class__": True, "as_json": as_json}})
        mc = unpackb(doc)["state"]
        assert mc == ModalityConfig((0, 1), ("joint_position",)) and mc.horizon == 2


def test_ping_answers_like_gr00t():
    with Gr00tDouble() as server:
        client = Gr00tClient("127.0.0.1", server.port, request_timeout_s=5)
        assert client.call("ping") == {"status": "ok", "message": "Server is running"}
        assert server.requests[-1] == {"endpoint": "ping"}
        client.close()


def test_the_client_is_a_wire_client_whose_connect_waits_for_a_ping_answer():
    from arena.transport.interface import WireClient

    with Gr00tDouble() as server:
        client = Gr00tClient("127.0.0.1", server.port, request_timeout_s=5)
        assert isinstance(client, WireClient) and not client.connected
        assert client.connect(5) == {"status": "ok", "message": "Server is running"} == client.metadata
        assert client.connected and not client.saw_server_down
        client.close()
        client.close()  # idempotent
        assert not client.connected


def test_error_reply_raises_and_the_socket_stays_usable():
    with Gr00tDouble() as server:
        client = Gr00tClient("127.0.0.1", server.port, request_timeout_s=5)
        with pytest.raises(Gr00tServerError, match="Unknown endpoint: teleport"):
            client.call("teleport")
        assert client.ping() and client.recreated_sockets == 0
        client.close()


def test_api_token_is_sent_and_checked(monkeypatch):
    with Gr00tDouble(api_token="s3cret") as server:
        wrong = Gr00tClient("127.0.0.1", server.port, api_token="nope", request_timeout_s=5)
        with pytest.raises(Gr00tServerError, match="Unauthorized"):
            wrong.call("ping")
        right = Gr00tClient("127.0.0.1", server.port, api_token="s3cret", request_timeout_s=5)
        assert right.call("ping")["status"] == "ok"
        assert server.requests[-1]["api_token"] == "s3cret"
        wrong.close()
        right.close()


def test_timeout_applies_and_the_socket_is_recreated_so_the_next_request_works():
    with Gr00tDouble(never_reply=True) as server:
        client = Gr00tClient("127.0.0.1", server.port, request_timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(RequestTimeout, match="socket recreated"):
            client.call("ping")
        assert 0.25 <= time.monotonic() - started < 2.0
        assert client.recreated_sockets == 1
        server.never_reply = False
        assert client.call("ping", timeout_s=5)["status"] == "ok"  # no EFSM on the next send
        client.close()


def test_ping_of_a_dead_port_is_false_and_close_does_not_hang():
    from arena.launch.server_process import free_port

    client = Gr00tClient("127.0.0.1", free_port(), request_timeout_s=0.2)
    started = time.monotonic()
    assert client.ping(timeout_s=0.2) is False
    client.close()
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize("generation", ["n1.6", "n1.5"])
def test_both_reply_generations_decode_to_action_and_info(generation):
    from arena_gr00t.adapters import Gr00tDroidAdapter
    from arena.testing.droid import droid_obs

    with Gr00tDouble(generation=generation) as server:
        client = Gr00tClient("127.0.0.1", server.port, request_timeout_s=5)
        modality = client.get_modality_config()
        adapter = Gr00tDroidAdapter(modality)
        obs = adapter.observation(droid_obs(3), "open", flat=generation == "n1.5")
        action, info = client.get_action(obs, generation=generation)
        assert info == {}
        chunk = adapter.actions_from_reply(action, 3, 32)
        assert chunk.shape == (3, 32, 8) and server.batches == [3]
        if generation == "n1.5":
            assert set(action) == {"action.joint_position", "action.gripper_position"}
            with pytest.raises(Gr00tServerError, match="Unknown endpoint: reset"):
                client.reset()
        else:
            assert client.reset() == {}
        client.close()


def test_an_n15_request_to_an_n16_server_is_an_error_reply():
    from arena_gr00t.adapters import Gr00tDroidAdapter
    from arena.testing.droid import droid_obs

    with Gr00tDouble(generation="n1.6") as server:
        client = Gr00tClient("127.0.0.1", server.port, request_timeout_s=5)
        flat = Gr00tDroidAdapter().observation(droid_obs(1), "open", flat=True)
        with pytest.raises(Gr00tServerError, match="unexpected keyword"):
            client.get_action(flat, generation="n1.5")
        client.close()


def test_core_zmq_ping_readiness_probe_accepts_the_double():
    with Gr00tDouble() as server:
        probe_once("zmq-ping", "127.0.0.1", server.port, 2.0)


def _empty_arrays_reply(count: int) -> bytes:
    """One msgpack array of ``count`` empty arrays: 5 + count bytes, count Python lists."""
    return b"\xdd" + count.to_bytes(4, "big") + b"\x90" * count


def test_a_reply_of_millions_of_empty_arrays_is_refused_at_once():
    started = time.monotonic()
    with pytest.raises(CodecError, match="more than 1,048,576 msgpack objects"):
        unpackb(_empty_arrays_reply(16 * 2**20))
    assert time.monotonic() - started < 2.0  # openpi-style decoding: ~1.3 GB and seconds


def test_a_hostile_server_reply_is_a_protocol_error_and_the_client_stays_small():
    import threading

    import zmq

    from arena.transport.errors import ProtocolError

    context = zmq.Context.instance()
    rep = context.socket(zmq.REP)
    rep.setsockopt(zmq.LINGER, 0)
    port = rep.bind_to_random_port("tcp://127.0.0.1")

    def serve() -> None:
        rep.recv()
        rep.send(_empty_arrays_reply(16 * 2**20))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = Gr00tClient("127.0.0.1", port, request_timeout_s=10)
    try:
        with pytest.raises(ProtocolError, match="undecodable reply to 'ping'.*msgpack objects"):
            client.call("ping")
    finally:
        client.close()
        thread.join(5)
        rep.close(linger=0)


def test_core_zmq_ping_probe_sends_the_api_token_and_names_a_refusal():
    from arena.transport import Unauthorized, wait_until_ready

    with Gr00tDouble(api_token="tok") as server:
        wait_until_ready("zmq-ping", "127.0.0.1", server.port, 5.0, api_key="tok")
        with pytest.raises(Unauthorized, match="Unauthorized: Invalid API token.*without an api_token"):
            wait_until_ready("zmq-ping", "127.0.0.1", server.port, 600.0)
        with pytest.raises(Unauthorized, match="with an api_token"):
            wait_until_ready("zmq-ping", "127.0.0.1", server.port, 600.0, api_key="nope")


def test_the_shared_fault_knobs_count_get_action_only():
    # arena.testing.faults: first_delay_s on the first get_action, fail_on_request by number;
    # pings are not inferences and are neither counted nor delayed
    with Gr00tDouble(fail_on_request=2, first_delay_s=0.3) as server:
        client = Gr00tClient("127.0.0.1", server.port, request_timeout_s=5)
        assert client.call("ping")["status"] == "ok" and server.get_action_count == 0
        started = time.monotonic()
        with pytest.raises(Gr00tServerError, match="unexpected keyword"):  # answered, after the delay
            client.call("get_action", {})
        assert time.monotonic() - started >= 0.3
        with pytest.raises(Gr00tServerError, match="injected failure on get_action 2"):
            client.call("get_action", {})
        assert server.get_action_count == 2 and server.errors[-1] == "injected failure on get_action 2"
        client.close()
