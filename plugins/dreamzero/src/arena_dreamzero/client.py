"""The DreamZero websocket client: arena's openpi-protocol client plus DreamZero's dialect.

DreamZero serves through a RoboArena-style server (``reference/protocols.md`` section 4):

* same transport and codec as openpi; on connect the server sends its ``PolicyServerConfig``
  (the greeting: image size, cameras, whether it needs ``session_id``, action space);
* every message carries ``"endpoint"``: ``"infer"`` or ``"reset"`` (a message without it
  kills the connection with ``KeyError: 'endpoint'``);
* ``infer`` answers one binary frame holding a **bare** ``float32 (N, 8)`` ndarray (a map
  with ``actions`` is accepted too);
* ``reset`` answers the **text** frame ``"reset successful"`` -- the only text frame that is
  not a traceback; it is handled through the core client's ``_on_text_frame`` extension point.

As a :class:`arena.transport.interface.WireClient`, ``infer`` sends an ``infer`` message and
``start_episode`` a ``reset``.

``first_request_timeout_s`` covers the first **inference** after the server started (the
model's warm-up takes minutes), not merely the first message: the policy sends ``reset``
before the first ``infer`` of every episode, and that quick acknowledgement neither uses up
the long wait nor counts as the warm-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from arena.transport.client import PolicyClient
from arena.transport.errors import ProtocolError

__all__ = ["RESET_ACK", "DreamZeroClient", "ServerConfig"]

RESET_ACK = "reset successful"


@dataclass(frozen=True)
class ServerConfig:
    """The greeting (RoboArena ``PolicyServerConfig``); defaults are DreamZero-DROID's."""

    image_resolution: tuple[int, int] | None = (180, 320)
    needs_wrist_camera: bool = True
    n_external_cameras: int = 2
    needs_stereo_camera: bool = False
    needs_session_id: bool = True
    action_space: str = "joint_position"

    @classmethod
    def from_greeting(cls, greeting: dict[str, Any] | None) -> ServerConfig:
        """Read the greeting; missing fields keep DreamZero-DROID's values.

        Raises:
            ProtocolError: a field has the wrong type (e.g. image_resolution not ``[H, W]``).
        """
        g = dict(greeting or {})
        res = g.get("image_resolution", cls.image_resolution)
        if res is not None:
            if not (isinstance(res, (list, tuple)) and len(res) == 2 and all(isinstance(v, int) and v > 0 for v in res)):
                raise ProtocolError(f"greeting image_resolution must be [H, W] or null; got {res!r}")
            res = (int(res[0]), int(res[1]))
        n_ext = g.get("n_external_cameras", cls.n_external_cameras)
        if n_ext not in (0, 1, 2):
            raise ProtocolError(f"greeting n_external_cameras must be 0, 1 or 2; got {n_ext!r}")
        return cls(
            image_resolution=res,
            needs_wrist_camera=bool(g.get("needs_wrist_camera", cls.needs_wrist_camera)),
            n_external_cameras=int(n_ext),
            needs_stereo_camera=bool(g.get("needs_stereo_camera", cls.needs_stereo_camera)),
            needs_session_id=bool(g.get("needs_session_id", cls.needs_session_id)),
            action_space=str(g.get("action_space", cls.action_space)),
        )


class DreamZeroClient(PolicyClient):
    """:class:`arena.transport.PolicyClient` speaking DreamZero's dialect (see module doc)."""

    def _on_text_frame(self, text: str) -> Any:
        if text == RESET_ACK:
            return RESET_ACK
        return super()._on_text_frame(text)

    @property
    def server_config(self) -> ServerConfig:
        """The greeting read by :meth:`connect`."""
        return ServerConfig.from_greeting(self.metadata)

    def infer(self, request: dict[str, Any]) -> np.ndarray:  # type: ignore[override]
        """The :class:`~arena.transport.interface.WireClient` request: :meth:`infer_actions`."""
        return self.infer_actions(request)

    def start_episode(self, env_id: int, info: dict[str, Any]) -> None:
        """A new episode (session): :meth:`reset_server` clears the server's history."""
        self.reset_server()

    def infer_actions(self, request: dict[str, Any]) -> np.ndarray:
        """Send ``request`` as an ``infer`` (the caller's dict is not modified); return the
        reply's ndarray (a bare ndarray, or a map's ``actions``).

        Raises:
            ProtocolError: the reply is not an ndarray (or a map holding one), or is a
                ``reset successful`` acknowledgement.
            and everything :meth:`PolicyClient.request` raises.
        """
        reply = self.request({**request, "endpoint": "infer"})
        if isinstance(reply, dict) and "actions" in reply:
            reply = reply["actions"]
        if not isinstance(reply, np.ndarray):
            raise ProtocolError(f"{self.endpoint}: infer reply is {type(reply).__name__} {reply!r:.80}; expected an ndarray")
        return reply

    def reset_server(self) -> None:
        """Send ``{"endpoint": "reset"}`` and wait for the ``reset successful`` text frame.

        Raises:
            ProtocolError: any other reply; and everything :meth:`PolicyClient.request` raises.
        """
        reply = self.request({"endpoint": "reset"}, inference=False)
        if reply != RESET_ACK:
            raise ProtocolError(f"{self.endpoint}: reset answered {reply!r:.80} instead of {RESET_ACK!r}")
