"""DreamZero's dialect: greeting, endpoint, reset acknowledgement, bare ndarray replies."""

from __future__ import annotations

import numpy as np
import pytest

from arena.transport.client import PolicyClient
from arena.transport.errors import ProtocolError, ServerError

from arena_dreamzero.adapters import DreamZeroDroidAdapter
from arena_dreamzero.client import RESET_ACK, DreamZeroClient, ServerConfig
from arena_dreamzero.testing import DreamZeroDouble
from arena.testing.droid import droid_obs


def request(session="s1", frames=None):
    adapter = DreamZeroDroidAdapter()
    obs = droid_obs(1)
    return adapter.pack_request(frames or adapter.frames(obs, 0), adapter.state(obs, 0), "open", session, (180, 320))


def test_greeting_is_read_as_the_server_config():
    with DreamZeroDouble() as server:
        client = DreamZeroClient("127.0.0.1", server.port, connect_timeout_s=5)
        client.connect()
        assert client.server_config == ServerConfig((180, 320), True, 2, False, True, "joint_position")
        client.close()


def test_reset_is_acknowledged_by_a_text_frame_and_the_connection_stays_open():
    with DreamZeroDouble() as server:
        client = DreamZeroClient("127.0.0.1", server.port, connect_timeout_s=5)
        client.connect()
        client.reset_server()
        assert client.request({"endpoint": "reset"}) == RESET_ACK
        assert client.connected and server.resets == 2
        assert client.infer_actions(request()).shape == (24, 8)
        client.close()


def test_infer_carries_the_endpoint_without_touching_the_callers_dict_and_gets_a_bare_ndarray():
    with DreamZeroDouble() as server:
        client = DreamZeroClient("127.0.0.1", server.port, connect_timeout_s=5)
        client.connect()
        req = request()
        actions = client.infer_actions(req)
        assert "endpoint" not in req
        assert server.messages[-1]["endpoint"] == "infer"
        assert isinstance(actions, np.ndarray) and actions.dtype == np.float32 and actions.shape == (24, 8)
        client.close()


def test_as_a_wire_client_start_episode_resets_and_infer_sends_an_infer():
    from arena.transport.interface import WireClient

    with DreamZeroDouble() as server:
        client = DreamZeroClient("127.0.0.1", server.port, connect_timeout_s=5)
        assert isinstance(client, WireClient)
        client.connect()
        client.start_episode(0, {"session_id": "s1"})
        assert client.infer(request()).shape == (24, 8)
        assert [m["endpoint"] for m in server.messages] == ["reset", "infer"] and server.resets == 1
        client.close()


def test_a_plain_openpi_client_gets_the_keyerror_traceback_and_close_1011():
    with DreamZeroDouble() as server:
        client = PolicyClient("127.0.0.1", server.port, connect_timeout_s=5)
        client.connect()
        with pytest.raises(ServerError) as info:
            client.request(request())
        assert "KeyError: 'endpoint'" in info.value.traceback
        assert not client.connected


def test_other_text_frames_are_still_server_errors():
    with DreamZeroDouble(fail_on_request=1) as server:
        client = DreamZeroClient("127.0.0.1", server.port, connect_timeout_s=5)
        client.connect()
        with pytest.raises(ServerError, match="injected failure"):
            client.infer_actions(request())
        assert not client.connected


def test_a_new_session_id_resets_the_single_history():
    adapter = DreamZeroDroidAdapter()
    obs = droid_obs(1)
    frames = adapter.frames(obs, 0)
    stack = {k: np.stack([v] * 4) for k, v in frames.items()}
    with DreamZeroDouble() as server:
        client = DreamZeroClient("127.0.0.1", server.port, connect_timeout_s=5)
        client.connect()
        client.infer_actions(request("a"))
        client.infer_actions(request("a", stack))
        client.infer_actions(request("b"))
        client.close()
    assert [(c.session_id, c.frames_received, c.frames_used, c.history_len, c.new_session) for c in server.calls] == [
        ("a", 1, 1, 1, True),
        ("a", 4, 4, 5, False),
        ("b", 1, 1, 1, True),
    ]
    assert server.history_resets == 2


def test_seven_column_replies_get_an_open_gripper_column():
    chunk = DreamZeroDroidAdapter().unpack_actions(np.ones((24, 7), np.float64), 24)
    assert chunk.shape == (24, 8) and chunk.dtype == np.float32 and np.all(chunk[:, 7] == 0)


def test_short_or_malformed_replies_are_protocol_violations():
    from arena.policies.adapters import ProtocolViolation

    with pytest.raises(ProtocolViolation, match="24"):
        DreamZeroDroidAdapter().unpack_actions(np.ones((10, 8), np.float32), 24)
    with pytest.raises(ProtocolViolation, match="shape"):
        DreamZeroDroidAdapter().unpack_actions(np.ones((24, 6), np.float32), 24)


def test_request_has_three_letterboxed_images_state_and_zero_cartesian_position():
    req = request()
    for key in ("observation/exterior_image_0_left", "observation/exterior_image_1_left", "observation/wrist_image_left"):
        assert req[key].shape == (180, 320, 3) and req[key].dtype == np.uint8
    assert req["observation/joint_position"].shape == (7,) and req["observation/gripper_position"].shape == (1,)
    assert np.all(req["observation/cartesian_position"] == 0) and req["observation/cartesian_position"].shape == (6,)


@pytest.mark.parametrize("source", ["black", "duplicate"])
def test_cam2_source_fills_the_second_exterior_image(source):
    obs = droid_obs(1)
    frames = DreamZeroDroidAdapter(cam2_source=source).frames(obs, 0)
    second = frames["observation/exterior_image_1_left"]
    if source == "black":
        assert second.max() == 0
    else:
        np.testing.assert_array_equal(second, obs["camera_obs"]["external_camera_rgb"][0])


def test_an_unusable_greeting_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="image_resolution"):
        ServerConfig.from_greeting({"image_resolution": [180]})


def test_a_restart_that_cannot_listen_again_is_raised_when_the_double_exits():
    import socket

    with pytest.raises(RuntimeError, match="could not restart on port") as raised:
        with DreamZeroDouble() as server:
            server.stop()
            with socket.create_server(("127.0.0.1", server.port)):  # someone else took the port
                with pytest.raises(OSError):
                    server.restart()
    assert isinstance(raised.value.__cause__, OSError)
