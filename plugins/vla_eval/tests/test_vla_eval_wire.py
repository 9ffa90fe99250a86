"""``vla_eval_remote`` against vla-eval 0.8.0's own server code (``serve_async`` / ``run_server``)
with a dummy model: handshake, episodes, the server's chunk buffer, errors, batching, images,
a killed server. Each dummy action says where it came from: ``[0.01 * step at inference,
0.01 * row of the chunk, 0.01 * batch size, 0.01 * EPISODE_STARTs of the session]``."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import msgpack
import numpy as np
import pytest

from arena.errors import PolicyError
from arena.transport.errors import ProtocolError
from arena.transport.interface import WireClient

from arena_vla_eval.client import RemoteError, VlaEvalClient
from arena_vla_eval.policy import VlaEvalRemoteConfig, VlaEvalRemotePolicy

pytestmark = pytest.mark.timeout(120)


class _Env:
    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.task_description = "Reach the goal."


def _obs(num_envs: int, size: int = 8) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {
        "policy": {"state": rng.normal(size=(num_envs, 39))},
        "camera_obs": {"corner": rng.integers(0, 256, (num_envs, size, size, 3), dtype=np.uint8)},
    }


def _policy(port: int, num_envs: int = 1, **options: Any) -> VlaEvalRemotePolicy:
    settings = {"connect_timeout_s": 20, "reconnect_timeout_s": 20, "first_request_timeout_s": 30, "request_timeout_s": 30}
    config = VlaEvalRemoteConfig(remote_port=port, embodiment="metaworld", **{**settings, **options})
    policy = VlaEvalRemotePolicy(config)
    policy.start(_Env(num_envs))
    policy.set_task_description("Reach the goal.")
    return policy


def _marks(action: np.ndarray) -> tuple[int, int, int, int]:
    """(step at inference, row, batch size, episode count) of one dummy action."""
    return tuple(int(round(v * 100)) for v in np.asarray(action, np.float64)[:4])  # type: ignore[return-value]


def _observation() -> dict[str, Any]:
    return {"images": {"cam": np.zeros((8, 8, 3), np.uint8)}, "states": np.zeros(39), "task_description": "reach"}


def test_hello_names_the_model_server_and_the_observation_params_it_asks_for(serve_dummy):
    with serve_dummy(send_state=False) as (_, port):
        client = VlaEvalClient("127.0.0.1", port, connect_timeout_s=10)
        meta = client.connect()
        client.close()
    assert isinstance(client, WireClient)
    assert meta["model_server"] == "DummyModelServer"
    assert meta["protocol_version"] == 1
    assert meta["observation_params"] == {"send_state": False}
    assert meta["action_spec"]["action"]["dims"] == 4


def test_one_action_per_observation_with_the_chunk_replayed_from_the_servers_buffer(serve_dummy):
    with serve_dummy(chunk_size=3) as (model, port):
        client = VlaEvalClient("127.0.0.1", port, connect_timeout_s=10)
        client.connect()
        client.start_episode(0, {"task": {"name": "reach"}})
        marks = [_marks(client.infer(_observation())["actions"]) for _ in range(5)]
        client.close()
    # rows 0, 1, 2 of the chunk inferred at step 0, then a new chunk at step 3: two model calls
    assert [(m[0], m[1]) for m in marks] == [(0, 0), (0, 1), (0, 2), (3, 0), (3, 1)]
    assert model.batch_sizes == [1, 1]


def test_each_arena_episode_is_one_server_episode_and_its_start_drops_the_chunk_buffer(serve_dummy):
    with serve_dummy(chunk_size=4) as (model, port):
        policy = _policy(port)
        try:
            policy.reset([0], [7])
            first = [_marks(policy.get_action(None, _obs(1))[0]) for _ in range(2)]
            extras = policy.episode_info(0)  # the rollout's call when the episode ends: EPISODE_END
            policy.reset([0], [8])
            second = _marks(policy.get_action(None, _obs(1))[0])
        finally:
            policy.close()
        time.sleep(0.2)  # the server handles EPISODE_END after its last reply
    assert [m[1] for m in first] == [0, 1]
    # without EPISODE_START the server would have served row 2 of the first chunk
    assert second[:2] == (0, 0) and second[3] == first[0][3] + 1
    assert extras["serving"] == "step" and extras["vla_eval"]["model_server"] == "DummyModelServer"
    assert model.episode_ends[0]["steps"] == 2
    assert len(model.episode_ends) == 2  # the second episode ended at close()


def test_an_error_reply_ends_only_that_episode_and_keeps_the_connection(serve_dummy):
    with serve_dummy(chunk_size=1, fail_at_step=1) as (_, port):
        policy = _policy(port)
        try:
            policy.reset([0], [0])
            policy.get_action(None, _obs(1))
            with pytest.raises(PolicyError) as err:
                policy.get_action(None, _obs(1))
            connection = policy._clients[0]._conn
            policy.reset([0], [1])
            action = policy.get_action(None, _obs(1))
            assert policy._clients[0]._conn is connection  # the same websocket
        finally:
            policy.close()
    assert "observation_failed: RuntimeError: dummy model fails at step 1" in str(err.value)
    assert err.value.env_ids == [0]
    assert policy.reconnects == 0
    assert _marks(action[0])[0] == 0


def test_envs_due_on_one_step_are_batched_up_to_the_servers_max_batch_size(serve_dummy):
    with serve_dummy(chunk_size=1, max_batch_size=4, max_wait_time=0.05, delay_s=0.02) as (model, port):
        policy = _policy(port, num_envs=6)
        try:
            policy.reset(list(range(6)), list(range(6)))
            actions = [policy.get_action(None, _obs(6)) for _ in range(3)]
        finally:
            policy.close()
    assert sum(model.batch_sizes) == 18
    assert max(model.batch_sizes) > 1 and max(model.batch_sizes) <= 4
    # each action carries the size of the batch that computed it
    assert {_marks(a)[2] for step in actions for a in step} <= set(model.batch_sizes)


@pytest.mark.parametrize("fmt", ["png", "raw", "jpeg"])
def test_images_reach_the_model_exactly_as_png_and_raw_and_approximately_as_jpeg(serve_dummy, fmt):
    image = np.random.default_rng(1).integers(0, 256, (24, 32, 3), dtype=np.uint8)
    with serve_dummy(chunk_size=1) as (model, port):
        client = VlaEvalClient("127.0.0.1", port, connect_timeout_s=10, image_format=fmt)
        client.connect()
        client.infer({"images": {"cam": image}, "task_description": "x"})
        client.close()
    seen = model.observations[-1]["images"]["cam"]
    assert seen.shape == image.shape and seen.dtype == np.uint8
    assert np.array_equal(seen, image) == (fmt != "jpeg")


def test_a_killed_server_is_reconnected_and_told_the_episode_again(server_process):
    server = server_process("--args.chunk_size=4")
    policy = _policy(server.port, max_reconnect_attempts=2)
    try:
        policy.reset([0], [0])
        before = [_marks(policy.get_action(None, _obs(1))[0]) for _ in range(2)]
        server.kill()
        server.stop()  # closes the dead process's pipe
        server.start()  # the same port; a fresh process knows no session
        after = _marks(policy.get_action(None, _obs(1))[0])
        record = policy.episode_info(0)
    finally:
        policy.close()
    assert [m[1] for m in before] == [0, 1]
    assert policy.reconnects == 1
    # the episode's record says its third request reconnected to a fresh server session
    assert record["reconnects"] == {"count": 1, "at_request": [2], "at_step": [2], "session_reset": True}
    # a new chunk (row 0) of a session that got EPISODE_START again (episode count 1)
    assert after[1] == 0 and after[3] == 1


def test_a_server_back_with_another_hello_makes_the_episode_an_error_naming_what_changed(server_process):
    from arena.testing.doubles import ServerProcess

    server = server_process("--args.chunk_size=4", "--args.send_state=true")
    policy = _policy(server.port, max_reconnect_attempts=2)
    other = ServerProcess("arena_vla_eval.testing", "--args.chunk_size=4", "--args.send_state=false", port=server.port)
    try:
        policy.reset([0], [0])
        policy.get_action(None, _obs(1))
        server.kill()
        server.stop()
        other.start()  # the same port, a server whose HELLO asks for other observation_params
        with pytest.raises(PolicyError) as info:
            policy.get_action(None, _obs(1))
    finally:
        policy.close()
        other.stop()
    said = str(info.value)
    assert "ServerChanged" in said and "'observation_params'" in said, said
    assert "'send_state': True" in said and "'send_state': False" in said
    assert policy.reconnects == 0  # the reconnect was refused, never used


def test_a_server_that_stays_down_makes_the_episode_an_error_within_the_reconnect_timeout(server_process):
    server = server_process("--args.chunk_size=1")
    policy = _policy(server.port, max_reconnect_attempts=1, reconnect_timeout_s=1.0)
    try:
        policy.reset([0], [0])
        policy.get_action(None, _obs(1))
        server.kill()
        started = time.monotonic()
        with pytest.raises(PolicyError, match="reconnect failed"):
            policy.get_action(None, _obs(1))
        elapsed = time.monotonic() - started
    finally:
        policy.close()
    assert elapsed < 10


@contextlib.contextmanager
def _scripted_server(model_server: str, replies: dict[Any, Any]) -> Iterator[VlaEvalClient]:
    """A websocket server built on vla-eval's own message code: HELLO answered as
    ``model_server``, a message of each other type in ``replies`` with ``replies[type](msg)``;
    yields a connected client."""
    from websockets.sync.server import serve

    from vla_eval.protocol.messages import Message, MessageType, make_hello_payload, pack_message, unpack_message

    def handler(ws):
        for raw in ws:
            msg = unpack_message(raw)
            if msg.type == MessageType.HELLO:
                ws.send(pack_message(Message(MessageType.HELLO, make_hello_payload(model_server=model_server), seq=msg.seq)))
            elif msg.type in replies:
                ws.send(pack_message(replies[msg.type](msg)))

    with serve(handler, "127.0.0.1", 0) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        client = VlaEvalClient("127.0.0.1", server.socket.getsockname()[1], connect_timeout_s=10)
        client.connect()
        try:
            yield client
        finally:
            server.shutdown()


def test_an_action_for_another_seq_is_refused_as_out_of_step():
    """A server that answers with a stale ``seq`` (vla-eval's own client only logs a warning)."""
    from vla_eval.protocol.messages import Message, MessageType

    def stale(msg):
        return Message(MessageType.ACTION, {"actions": np.zeros(4, np.float32)}, seq=msg.seq - 1)

    with _scripted_server("Stale", {MessageType.OBSERVATION: stale}) as client:
        with pytest.raises(ProtocolError, match="out of step"):
            client.infer(_observation())
        assert not client.connected


def test_an_error_answering_an_earlier_episode_start_drops_the_connection():
    from vla_eval.protocol.messages import Message, MessageType

    def refuse(msg):
        return Message(MessageType.ERROR, {"error": "episode_start_failed: KeyError: 'suite'"}, seq=msg.seq)

    def act(msg):
        return Message(MessageType.ACTION, {"actions": np.zeros(4, np.float32)}, seq=msg.seq)

    with _scripted_server("Picky", {MessageType.EPISODE_START: refuse, MessageType.OBSERVATION: act}) as client:
        client.start_episode(0, {"task": {"name": "x"}})
        with pytest.raises(RemoteError, match="episode_start_failed"):
            client.infer(_observation())
        assert not client.connected


def test_observation_frames_decode_with_vla_evals_own_unpack_message():
    """What arena sends is what vla-eval's ``unpack_message`` reads (arrays and images)."""
    from vla_eval.protocol.messages import MessageType, unpack_message

    from arena.transport.codec import packb

    from arena_vla_eval.codec import encode_observation, envelope

    image = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    obs = {"images": {"a": image}, "states": np.linspace(0, 1, 8), "task_description": "t", "n": np.int64(3)}
    msg = unpack_message(packb(envelope("observation", encode_observation(obs), 7)))
    assert msg.type == MessageType.OBSERVATION and msg.seq == 7
    assert np.array_equal(msg.payload["images"]["a"], image)
    assert msg.payload["states"].dtype == np.float64 and np.array_equal(msg.payload["states"], obs["states"])
    assert msg.payload["n"] == 3 and msg.payload["task_description"] == "t"
    assert msgpack.unpackb(packb({"x": 1})) == {"x": 1}


def test_an_action_spec_of_another_size_is_warned_about_as_vla_eval_does(serve_dummy):
    with serve_dummy(action_dim=7) as (_, port):
        with pytest.warns(UserWarning, match="action_spec .* has 7 dims; the metaworld adapter expects 4"):
            policy = _policy(port)
        policy.close()
