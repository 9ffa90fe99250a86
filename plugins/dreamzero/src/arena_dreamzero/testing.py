"""A DreamZero policy-server double for arena's tests and for plugin authors.

:class:`DreamZeroDouble` is a websocket server in a background thread that behaves like
DreamZero's RoboArena server (``reference/protocols.md`` sections 4 and 9.2):

* on connect it sends the ``PolicyServerConfig`` greeting (msgpack map);
* every message must carry ``endpoint``: without it the server sends a traceback text frame
  ending ``KeyError: 'endpoint'`` and closes with 1011;
* ``reset`` -> the text frame ``reset successful`` (history cleared);
* ``infer`` -> checks every key, dtype and shape, then one binary frame with a **bare**
  ``float32 (horizon, action_columns)`` ndarray (7 joint positions = the current ones,
  gripper 0);
* **one** observation history for the whole server (single-tenant): a ``session_id``
  different from the last one clears it. The first call of a session uses 1 frame, later
  calls the last ``frames_per_chunk`` (4), so tests can assert the client's frame schedule
  via ``calls`` (one :class:`InferCall` per inference);
* a failing request: traceback text frame, then close 1011.

Fault knobs, arena's shared ones (:mod:`arena.testing.faults`, counted per inference):
``never_reply`` (requests are read but never answered), ``hang_from_request`` (from that
1-based inference on, inferences are never answered; resets still are), ``infer_delay_s`` /
``first_delay_s``, ``fail_on_request`` (that inference is answered with a traceback),
``restart_on_request`` (that inference is dropped, the server restarts on the same port
and loses its history); and :meth:`DreamZeroDouble.restart`.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve

from arena.testing.faults import Fault, FaultKnobs
from arena.transport.codec import packb, unpackb

__all__ = ["DreamZeroDouble", "InferCall"]

_IMAGE_KEYS = ("observation/exterior_image_0_left", "observation/exterior_image_1_left", "observation/wrist_image_left")


@dataclass
class InferCall:
    """What one inference received and used."""

    session_id: str
    frames_received: int  # frames per camera in this request (1 or T of a stack)
    frames_used: int  # frames the model conditioned on (1 first in a session, else frames_per_chunk)
    history_len: int  # frames in the server's history after this request
    prompt: str
    new_session: bool


class DreamZeroDouble(FaultKnobs):
    """DreamZero's server on ``ws://host:port`` (port 0: a free one); a context manager.

    Attributes read by tests: ``calls`` (:class:`InferCall` per answered inference),
    ``messages`` (every decoded message, images dropped), ``resets`` (explicit resets),
    ``history_resets`` (history clears: explicit or by a new session), ``connections``,
    ``restarts``, ``infer_count`` (inferences received), ``port``.
    """

    fault_unit = "inference"

    def __init__(
        self,
        *,
        image_resolution: tuple[int, int] = (180, 320),
        horizon: int = 24,
        action_columns: int = 8,
        frames_per_chunk: int = 4,
        never_reply: bool = False,
        infer_delay_s: float = 0.0,
        first_delay_s: float | None = None,
        fail_on_request: int | None = None,
        restart_on_request: int | None = None,
        hang_from_request: int | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.image_resolution = tuple(image_resolution)
        self.horizon = horizon
        self.action_columns = action_columns
        self.frames_per_chunk = frames_per_chunk
        self.init_faults(
            never_reply=never_reply, hang_from_request=hang_from_request, restart_on_request=restart_on_request,
            fail_on_request=fail_on_request, infer_delay_s=infer_delay_s, first_delay_s=first_delay_s,
        )
        self.host = host
        self.port = port
        self.greeting = {
            "image_resolution": list(self.image_resolution),
            "needs_wrist_camera": True,
            "n_external_cameras": 2,
            "needs_stereo_camera": False,
            "needs_session_id": True,
            "action_space": "joint_position",
        }
        self.calls: list[InferCall] = []
        self.messages: list[dict[str, Any]] = []
        self.resets = 0
        self.history_resets = 0
        self.connections = 0
        self.restarts = 0
        self.restart_error: OSError | None = None  # why a restart could not listen again
        self._session: str | None = None
        self._history = 0
        self._lock = threading.Lock()
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # ---- life cycle -----------------------------------------------------------------------
    def start(self) -> DreamZeroDouble:
        """Listen and serve in a background thread."""
        self._stopping.clear()
        last: OSError | None = None
        for _ in range(50):  # a restarted server may wait for the port to be released
            try:
                self._server = serve(self._handle, self.host, self.port, compression=None, max_size=None)
                break
            except OSError as exc:
                last = exc
                time.sleep(0.02)
        else:
            raise last  # type: ignore[misc]
        self.port = self._server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="dreamzero-double", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop every connection."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def restart(self) -> None:
        """Stop and start on the same port; the history is lost, as in a real restart."""
        self.stop()
        with self._lock:
            self._session = None
            self._history = 0
        self.restarts += 1
        try:
            self.start()
        except OSError as exc:  # e.g. the port stayed taken: kept for __exit__ to raise
            self.restart_error = exc
            raise

    def __enter__(self) -> DreamZeroDouble:
        return self.start()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.stop()
        if self.restart_error is not None and exc_type is None:
            raise RuntimeError(f"the double could not restart on port {self.port}: {self.restart_error}") from self.restart_error

    @property
    def sessions(self) -> list[str]:
        """Distinct session ids in the order they first appeared."""
        return list(dict.fromkeys(c.session_id for c in self.calls))

    # ---- one connection -------------------------------------------------------------------
    def _handle(self, ws: ServerConnection) -> None:
        self.connections += 1
        ws.send(packb(self.greeting))
        try:
            for frame in ws:
                if isinstance(frame, str):
                    raise TypeError("text frames are not requests")
                message = unpackb(frame)
                self.messages.append({k: v for k, v in message.items() if k not in _IMAGE_KEYS} if isinstance(message, dict) else {"raw": message})
                if self.never_reply:
                    while not self._stopping.is_set():
                        time.sleep(0.02)
                    return
                try:
                    reply = self._respond(message)
                except _Restart:
                    threading.Thread(target=self.restart, daemon=True).start()
                    return
                except _Hung:
                    return
                except Exception:  # noqa: BLE001 - like the real server: traceback, then 1011
                    ws.send(traceback.format_exc())
                    ws.close(1011, "Internal server error. Traceback included in previous frame.")
                    return
                ws.send(reply if isinstance(reply, str) else packb(reply))
        except ConnectionClosed:
            return

    def _respond(self, message: Any) -> Any:
        if not isinstance(message, dict):
            raise TypeError(f"expected a map, got {type(message).__name__}")
        obs = dict(message)
        endpoint = obs.pop("endpoint")  # KeyError: 'endpoint', as the real server
        if endpoint == "reset":
            with self._lock:
                self.resets += 1
                self._clear()
            return "reset successful"
        fault = self.before_inference()  # raises InjectedFailure: a traceback, as any failure
        if fault is Fault.RESTART:
            raise _Restart()
        if fault is Fault.HANG:
            self._stopping.wait()  # a hung model: this connection never hears back
            raise _Hung()
        return self._infer(obs)

    @property
    def infer_count(self) -> int:
        """Inferences received, answered or not."""
        return self.inferences

    def _clear(self) -> None:
        self._session = None
        self._history = 0
        self.history_resets += 1

    def _infer(self, obs: dict[str, Any]) -> np.ndarray:
        h, w = self.image_resolution
        frames = None
        for key in _IMAGE_KEYS:
            image = obs[key]
            if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.shape[-3:] != (h, w, 3) or image.ndim not in (3, 4):
                raise ValueError(f"{key}: expected uint8 ({h}, {w}, 3) or (T, {h}, {w}, 3); got {getattr(image, 'dtype', type(image))} {getattr(image, 'shape', '')}")
            t = 1 if image.ndim == 3 else image.shape[0]
            if frames is not None and t != frames:
                raise ValueError(f"{key}: {t} frames, other cameras sent {frames}")
            frames = t
        joints = np.asarray(obs["observation/joint_position"], dtype=np.float64)
        gripper = np.asarray(obs["observation/gripper_position"], dtype=np.float64)
        if joints.shape != (7,) or gripper.shape != (1,):
            raise ValueError(f"joint_position {joints.shape} / gripper_position {gripper.shape}: expected (7,) / (1,)")
        if np.asarray(obs["observation/cartesian_position"]).shape != (6,):
            raise ValueError("cartesian_position: expected (6,)")
        prompt, session = obs["prompt"], obs["session_id"]
        if not isinstance(prompt, str) or not isinstance(session, str) or not session:
            raise ValueError("prompt and session_id must be strings (session_id non-empty)")
        assert frames is not None
        with self._lock:
            new = session != self._session
            if new:
                self._clear()
                self._session = session
            first = self._history == 0
            self._history += frames
            used = 1 if first else self.frames_per_chunk
            self.calls.append(InferCall(session, frames, used, self._history, prompt, new))
        actions = np.zeros((self.horizon, self.action_columns), np.float32)
        actions[:, :7] = joints.astype(np.float32)
        return actions


class _Restart(Exception):
    pass


class _Hung(Exception):
    pass
