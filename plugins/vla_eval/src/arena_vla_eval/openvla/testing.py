"""Doubles of OpenVLA's and OpenVLA-OFT's deploy servers, on FastAPI + uvicorn + json_numpy.

Neither real server installs here (OpenVLA's needs torch, transformers and draccus; OFT's
TensorFlow and a git fork of transformers), so :class:`DeployDouble` reproduces their HTTP
contract, handler for handler (openvla ``vla-scripts/deploy.py`` @ c8f03f4 l.91-121,
openvla-oft ``vla-scripts/deploy.py`` @ 213c5ff l.78-107; ``reference/live-and-protocols.md``):

* FastAPI ``POST /act`` under uvicorn, ``json_numpy.patch()`` in force, the body read as a
  plain ``Dict[str, Any]`` (so json_numpy arrays arrive decoded);
* ``{"encoded": "<json text>"}`` (and nothing else) is decoded once more and answered
  double-encoded (``JSONResponse(json_numpy.dumps(action))``);
* OpenVLA reads ``image`` (HWC uint8) and ``instruction``, optionally ``unnorm_key``, and
  answers one action ``float64 (7,)``; OFT reads ``instruction``, ``full_image`` first, then
  every key containing ``"wrist"`` (``num_images_in_input`` images in all) and ``state``, and
  answers a **list** of ``chunk`` actions (LIBERO 8 x 7, ALOHA 25 x 14);
* any failure -- a missing key, a wrong dtype or shape, an unknown ``unnorm_key`` -- is
  answered HTTP 200 with the JSON string ``"error"``, as both real servers do;
* default ports 8000 (OpenVLA) and 8777 (OFT); ``port=0`` picks a free one for tests.

``json_numpy.patch()`` changes the ``json`` module of the whole process, as in the real
servers; :meth:`DeployDouble.stop` puts the original functions back.

The "model": every action is ``[0.01 * request_index, 0.01 * row, 0, ..., gripper]`` with the
gripper column 1.0 (OpenVLA's "open" before the client's inversion), so tests can tell chunks
and rows apart. ``fail_on_request`` (1-based) answers that request with ``"error"``;
``requests`` keeps every decoded body.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any, Literal

import json_numpy
import numpy as np

__all__ = ["OFT_PLATFORMS", "DeployDouble"]

#: OFT ``prismatic/vla/constants.py``: (NUM_ACTIONS_CHUNK, ACTION_DIM, PROPRIO_DIM, images in input).
OFT_PLATFORMS: dict[str, tuple[int, int, int, int]] = {
    "libero": (8, 7, 8, 2),
    "aloha": (25, 14, 14, 3),
    "bridge": (5, 7, 7, 1),
}
IMAGE_SIZE = 224


class _Rejected(ValueError):
    pass


def _image(payload: dict[str, Any], key: str) -> None:
    value = payload.get(key)
    if not isinstance(value, np.ndarray) or value.dtype != np.uint8 or value.shape != (IMAGE_SIZE, IMAGE_SIZE, 3):
        raise _Rejected(f"{key}: expected uint8 (224, 224, 3), got {getattr(value, 'dtype', type(value))} {getattr(value, 'shape', '')}")


class DeployDouble:
    """A running double (context manager; ``.host``, ``.port``, ``.url``, ``.requests``).

    Args:
        kind: ``openvla`` or ``oft``.
        platform: OFT's robot platform (``libero``, ``aloha``, ``bridge``): its chunk size,
            action and proprio dims and number of images.
        norm_keys: the ``unnorm_key`` values an OpenVLA model knows (``None`` in a request is
            accepted only with one key, as for a single-dataset model).
        port: 0 for a free port; the servers' defaults are 8000 / 8777.
        fail_on_request: answer that 1-based request with ``"error"``.
        delay_s: seconds each request takes.
        chunk: answer OFT chunks of this many actions instead of the platform's (a server
            started for another platform than the client expects).
    """

    def __init__(
        self,
        kind: Literal["openvla", "oft"] = "openvla",
        *,
        platform: str = "libero",
        norm_keys: tuple[str, ...] = ("libero_spatial",),
        host: str = "127.0.0.1",
        port: int = 0,
        fail_on_request: int | None = None,
        delay_s: float = 0.0,
        chunk: int | None = None,
    ) -> None:
        self.kind = kind
        self.chunk = chunk
        self.platform = platform
        self.norm_keys = norm_keys
        self.host = host
        self.port = port or _free_port(host)
        self.fail_on_request = fail_on_request
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self.encoded_requests = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._json: tuple[Any, ...] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/act"

    # -- the model ------------------------------------------------------------------------------
    def _action(self, payload: dict[str, Any]) -> Any:
        n = len(self.requests)
        if self.kind == "openvla":
            _image(payload, "image")
            if not isinstance(payload["instruction"], str):
                raise _Rejected("instruction must be a str")
            key = payload.get("unnorm_key")
            if key is None and len(self.norm_keys) != 1:
                raise _Rejected("unnorm_key is required for a multi-dataset model")
            if key is not None and key not in self.norm_keys:
                raise _Rejected(f"unnorm_key {key!r} not in norm_stats")
            action = np.zeros(7)
            action[0], action[-1] = 0.01 * n, 1.0
            return action
        chunk, action_dim, proprio_dim, images = OFT_PLATFORMS[self.platform]
        chunk = self.chunk or chunk
        if not isinstance(payload["instruction"], str):
            raise _Rejected("instruction must be a str")
        keys = ["full_image"] + [k for k in payload if "wrist" in k]
        if len(keys) != images:
            raise _Rejected(f"the model takes {images} images; the request holds {keys}")
        for key in keys:
            _image(payload, key)
        state = payload["state"]
        if not isinstance(state, np.ndarray) or state.dtype.kind != "f" or state.shape != (proprio_dim,):
            raise _Rejected(f"state: expected float ({proprio_dim},), got {getattr(state, 'shape', type(state))}")
        actions = np.zeros((chunk, action_dim))
        actions[:, 0] = 0.01 * n
        actions[:, 1] = 0.01 * np.arange(chunk)
        actions[:, -1] = 1.0
        return [actions[i] for i in range(chunk)]  # deploy.py returns a list of actions

    def _app(self) -> Any:
        from fastapi import FastAPI
        from fastapi.responses import JSONResponse

        json_numpy.patch()  # as both deploy.py files do at import (undone by stop())
        app = FastAPI()

        def act(payload: dict[str, Any]) -> Any:
            try:
                if double_encode := "encoded" in payload:
                    assert len(payload.keys()) == 1, "Only uses encoded payload!"
                    payload = json.loads(payload["encoded"])
                    self.encoded_requests += 1
                self.requests.append(payload)
                if self.delay_s:
                    time.sleep(self.delay_s)
                if self.fail_on_request == len(self.requests):
                    raise _Rejected("failing as asked")
                action = self._action(payload)
                if double_encode:
                    return JSONResponse(json_numpy.dumps(action))
                return JSONResponse(action)
            except Exception:  # noqa: BLE001 - the real servers answer every failure this way
                return "error"

        app.post("/act")(act)
        return app

    # -- running --------------------------------------------------------------------------------
    def start(self) -> DeployDouble:
        import uvicorn

        self._json = (json.dumps, json.loads, json.dump, json.load)
        config = uvicorn.Config(self._app(), host=self.host, port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"{self.kind}-deploy-double", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the {self.kind} deploy double did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None
        if self._json is not None:  # json_numpy.patch() replaced the json module's functions
            json.dumps, json.loads, json.dump, json.load = self._json
            self._json = None

    def __enter__(self) -> DeployDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
