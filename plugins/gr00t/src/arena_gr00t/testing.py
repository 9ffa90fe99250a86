"""A GR00T policy-server double for arena's tests and for plugin authors.

:class:`Gr00tDouble` is a ZeroMQ REP server in a background thread that answers like GR00T's
``PolicyServer`` (``reference/protocols.md`` sections 5.2-5.4 and 9.2):

* msgpack with ``__ndarray_class__``/``as_npy`` arrays; ``ModalityConfig`` as a JSON map (N1.6)
  or a JSON string (N1.5);
* endpoints ``ping``, ``get_modality_config``, ``get_action`` (the default when ``endpoint`` is
  missing), ``reset`` (N1.6 only) and ``kill``; an unknown endpoint, a wrong ``api_token`` or
  any exception in a handler answers ``{"error": str}`` and the socket stays usable;
* ``get_action`` checks the observation like ``Gr00tPolicy`` in strict mode (keys from the
  modality config; ``video`` uint8 ``(B, T, H, W, 3)``; ``state`` float32 ``(B, T, D)``;
  ``language`` ``[[str]] * B``; N1.5 flat keys) and answers ``[action, info]`` (N1.6) or the
  ``action.<group>`` map (N1.5), each group ``float32 (B, T_a, d)``;
* ``generation="n1.6-sim"`` is an N1.6 server started with ``--use-sim-policy-wrapper``
  (``Gr00tSimPolicyWrapper``): ``{observation, options}`` whose observation is flat
  (``video.<camera>``, ``state.<group>``, the language key — or the legacy
  ``annotation.human.coarse_action`` for ``task`` — as ``[str] * B``), reply ``[{"action.<group>":
  ...}, info]``. A nested N1.6 observation fails like the wrapper does ("Video key
  'video.…' must be in observation"), a flat N1.5 request on the unexpected keyword.

Fault knobs, arena's shared ones (:mod:`arena.testing.faults`, counted per ``get_action``):
``never_reply`` (a hung server: requests are never read), ``hang_from_request`` (from that
1-based ``get_action`` on, the server hangs for good: nothing is read any more, ``ping``
included), ``restart_on_request`` (that ``get_action`` is dropped and the server restarts on
the same port, losing it), ``fail_on_request`` (answered ``{"error": ...}``; an int or a
collection; ``error_requests`` is the same knob), ``infer_delay_s`` / ``first_delay_s``; and
GR00T's own ``hang_requests`` (1-based ``get_action`` numbers answered only after
``hang_s``, after a client would have given up) and :meth:`Gr00tDouble.restart`.

    with Gr00tDouble() as server:
        policy config: remote_host=server.host, remote_port=server.port
        ... server.batches  # batch size of each get_action
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import zmq

from arena.testing.faults import Fault, FaultKnobs, InjectedFailure, add_fault_arguments, fault_options

from arena_gr00t.adapters import DROID_MODALITY
from arena_gr00t.codec import ModalityConfig, packb, unpackb

__all__ = ["DROID_STATE_DIMS", "GENERATIONS", "Gr00tDouble", "main"]

#: The wire generations the double speaks (``Gr00tRemoteConfig.wire_generation``).
GENERATIONS = ("n1.6", "n1.6-sim", "n1.5")

#: Width of each DROID state and action group.
DROID_STATE_DIMS = {"joint_position": 7, "gripper_position": 1, "eef_position": 3, "eef_rotation": 3}

ActionFn = Callable[[dict[str, np.ndarray], int, int], dict[str, np.ndarray]]


def _bare(key: str) -> str:
    for prefix in ("video.", "state.", "action."):
        if key.startswith(prefix):
            return key[len(prefix) :]
    return key


def hold_still(state: dict[str, np.ndarray], batch: int, horizon: int) -> dict[str, np.ndarray]:
    """Default action: every row repeats the current joint positions; gripper open."""
    joints = state.get("joint_position")
    joints = np.zeros((batch, 7), np.float32) if joints is None else joints[:, -1]
    return {
        "joint_position": np.repeat(joints[:, None].astype(np.float32), horizon, axis=1),
        "gripper_position": np.zeros((batch, horizon, 1), np.float32),
    }


class Gr00tDouble(FaultKnobs):
    """A GR00T ``PolicyServer`` stand-in on ``tcp://host:port`` (port 0: a free one).

    Attributes read by tests: ``requests`` (every decoded request, in order), ``batches``
    (batch size of each answered ``get_action``), ``get_action_count`` (received, answered or
    not), ``errors`` (the error strings sent), ``port``.
    """

    fault_unit = "get_action"

    def __init__(
        self,
        *,
        generation: str = "n1.6",
        modality: dict[str, ModalityConfig] | None = None,
        state_dims: dict[str, int] | None = None,
        image_size: tuple[int, int] = (180, 320),
        api_token: str | None = None,
        action_fn: ActionFn = hold_still,
        never_reply: bool = False,
        hang_requests: Iterable[int] = (),
        hang_s: float = 1.0,
        hang_from_request: int | None = None,
        restart_on_request: int | None = None,
        restart_gap_s: float = 0.05,
        fail_on_request: int | Iterable[int] | None = None,
        error_requests: Iterable[int] = (),
        infer_delay_s: float = 0.0,
        first_delay_s: float | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if generation not in GENERATIONS:
            raise ValueError(f"generation must be one of {', '.join(GENERATIONS)}; got {generation!r}")
        self.generation = generation
        self.modality = dict(modality or DROID_MODALITY)
        self.state_dims = dict(state_dims or DROID_STATE_DIMS)
        self.image_size = tuple(image_size)
        self.api_token = api_token
        self.action_fn = action_fn
        fails = {fail_on_request} if isinstance(fail_on_request, int) else set(fail_on_request or ())
        self.init_faults(
            never_reply=never_reply, hang_from_request=hang_from_request, restart_on_request=restart_on_request,
            fail_on_request=fails | set(error_requests), infer_delay_s=infer_delay_s, first_delay_s=first_delay_s,
        )
        self.hang_requests = set(hang_requests)
        self.hang_s = hang_s
        self.restart_gap_s = restart_gap_s
        self.host = host
        self.port = port
        self.requests: list[dict[str, Any]] = []
        self.batches: list[int] = []
        self.errors: list[str] = []
        self.restarts = 0
        self._context = zmq.Context.instance()
        self._socket: zmq.Socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # ---- life cycle -----------------------------------------------------------------------
    def _bind(self) -> None:
        sock = self._context.socket(zmq.REP)
        sock.setsockopt(zmq.LINGER, 0)
        if self.port == 0:
            self.port = sock.bind_to_random_port(f"tcp://{self.host}")
        else:
            for _ in range(50):  # the old socket may take a moment to release the port
                try:
                    sock.bind(f"tcp://{self.host}:{self.port}")
                    break
                except zmq.ZMQError:
                    time.sleep(0.02)
            else:
                sock.bind(f"tcp://{self.host}:{self.port}")
        self._socket = sock

    def start(self) -> Gr00tDouble:
        """Bind and serve in a background thread."""
        self._bind()
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name="gr00t-double", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (pending requests are lost)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None

    def restart(self) -> None:
        """Stop and start again on the same port, as a crashed-and-restarted server would."""
        self.stop()
        self.restarts += 1
        self.start()

    def __enter__(self) -> Gr00tDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- the REP loop ---------------------------------------------------------------------
    def _serve(self) -> None:
        while not self._stop.is_set():
            sock = self._socket
            if sock is None or self.never_reply:
                time.sleep(0.02)
                continue
            if not sock.poll(20) or self.never_reply:
                continue
            raw = sock.recv()
            try:
                request = unpackb(raw)
            except Exception as exc:  # noqa: BLE001 - the real server answers any failure with {"error"}
                self._send(sock, {"error": f"cannot decode request: {exc}"})
                continue
            self.requests.append(request if isinstance(request, dict) else {"raw": request})
            endpoint = request.get("endpoint", "get_action") if isinstance(request, dict) else "get_action"
            if endpoint == "get_action":
                numbers = self.count_inferences()
                fault = self.fault_for(numbers)
                if fault is Fault.HANG:
                    self.never_reply = True  # hung mid-inference: this and later requests go unanswered
                    continue
                if fault is Fault.RESTART:
                    self._crash_and_rebind()
                    continue
                if numbers[0] in self.hang_requests:
                    time.sleep(self.hang_s)
                try:
                    self.apply_delay_and_failure(numbers)
                except InjectedFailure as exc:  # answered like any failing handler
                    self._send(sock, {"error": str(exc)})
                    continue
            reply = self._handle(request, endpoint)
            self._send(sock, reply)
            if endpoint == "kill":
                self._stop.set()

    @property
    def get_action_count(self) -> int:
        """``get_action`` requests received, answered or not."""
        return self.inferences

    def _crash_and_rebind(self) -> None:
        assert self._socket is not None
        self._socket.close(linger=0)
        self._socket = None
        time.sleep(self.restart_gap_s)
        self.restarts += 1
        self._bind()

    def _send(self, sock: zmq.Socket, reply: Any) -> None:
        if isinstance(reply, dict) and "error" in reply:
            self.errors.append(str(reply["error"]))
        sock.send(packb(reply))

    def _handle(self, request: Any, endpoint: str) -> Any:
        try:
            if not isinstance(request, dict):
                raise TypeError(f"request must be a map, got {type(request).__name__}")
            if self.api_token is not None and request.get("api_token") != self.api_token:
                return {"error": "Unauthorized: Invalid API token"}
            if endpoint == "ping":
                return {"status": "ok", "message": "Server is running"}
            if endpoint == "kill":
                return None
            if endpoint == "get_modality_config":
                return self._modality_reply()
            if endpoint == "reset" and self.generation != "n1.5":
                return {}
            if endpoint == "get_action":
                return self._get_action(request.get("data"))
            return {"error": f"Unknown endpoint: {endpoint}"}
        except Exception as exc:  # noqa: BLE001 - GR00T sends str(e) only, no traceback
            return {"error": str(exc)}

    def _modality_reply(self) -> dict[str, Any]:
        if self.generation != "n1.5":
            return dict(self.modality)
        return {
            part: {"__ModalityConfig_class__": True, "as_json": json.dumps(mc.to_json())}
            for part, mc in self.modality.items()
        }

    # ---- get_action ---------------------------------------------------------------------
    def _get_action(self, data: Any) -> Any:
        if self.generation == "n1.5":
            video, state, language = self._flat(data)
        else:
            if not isinstance(data, dict) or "observation" not in data:
                raise TypeError("get_action() got an unexpected keyword argument (expected observation, options)")
            unexpected = set(data) - {"observation", "options"}
            if unexpected:
                raise TypeError(f"get_action() got an unexpected keyword argument '{sorted(unexpected)[0]}'")
            if self.generation == "n1.6":
                video, state, language = self._nested(data["observation"])
            else:
                video, state, language = self._sim_wrapped(data["observation"])
        batch = self._check(video, state, language)
        horizon = self.modality["action"].horizon
        groups = self.action_fn(state, batch, horizon)
        self.batches.append(batch)
        if self.generation == "n1.6":
            return [{k: np.asarray(v, np.float32) for k, v in groups.items()}, {}]
        flat = {f"action.{k}": np.asarray(v, np.float32) for k, v in groups.items()}
        return [flat, {}] if self.generation == "n1.6-sim" else flat

    def _sim_wrapped(self, obs: Any) -> tuple[dict, dict, dict]:
        """What ``Gr00tSimPolicyWrapper`` reads: flat keys, each looked up by the modality config."""
        if not isinstance(obs, dict):
            raise ValueError(f"observation must be a map; got {type(obs).__name__}")
        video, state, language = {}, {}, {}
        for part, out in (("video", video), ("state", state)):
            for key in self.modality[part].modality_keys:
                flat = f"{part}.{_bare(key)}"
                if flat not in obs:
                    raise KeyError(f"{part.capitalize()} key '{flat}' must be in observation")
                out[_bare(key)] = obs[flat]
        for key in self.modality["language"].modality_keys:
            source = "annotation.human.coarse_action" if key == "task" and "annotation.human.coarse_action" in obs else key
            if source not in obs:
                raise KeyError(f"Language key '{source}' must be in observation")
            texts = obs[source]
            if not isinstance(texts, (list, tuple)) or not texts or not isinstance(texts[0], str):
                raise ValueError(f"Language key '{source}' must be a tuple or list of strings")
            language[key] = list(texts)
        return video, state, language

    @staticmethod
    def _nested(obs: Any) -> tuple[dict, dict, dict]:
        if not isinstance(obs, dict) or set(obs) != {"video", "state", "language"}:
            raise ValueError(f"observation must have exactly video, state and language; got {sorted(obs) if isinstance(obs, dict) else type(obs).__name__}")
        video = {_bare(k): v for k, v in obs["video"].items()}
        state = {_bare(k): v for k, v in obs["state"].items()}
        language = {k: [row[0] if isinstance(row, list) and len(row) == 1 else _bad_language(k) for row in v] for k, v in obs["language"].items()}
        return video, state, language

    @staticmethod
    def _flat(obs: Any) -> tuple[dict, dict, dict]:
        if not isinstance(obs, dict):
            raise ValueError(f"observation must be a map; got {type(obs).__name__}")
        video = {k[6:]: v for k, v in obs.items() if k.startswith("video.")}
        state = {k[6:]: v for k, v in obs.items() if k.startswith("state.")}
        language = {k: list(v) for k, v in obs.items() if not k.startswith(("video.", "state."))}
        return video, state, language

    def _check(self, video: dict, state: dict, language: dict) -> int:
        want_video = [_bare(k) for k in self.modality["video"].modality_keys]
        want_state = [_bare(k) for k in self.modality["state"].modality_keys]
        want_lang = list(self.modality["language"].modality_keys)
        if sorted(video) != sorted(want_video):
            raise KeyError(f"video keys {sorted(video)} != modality {sorted(want_video)}")
        if sorted(state) != sorted(want_state):
            raise KeyError(f"state keys {sorted(state)} != modality {sorted(want_state)}")
        if sorted(language) != sorted(want_lang):
            raise KeyError(f"language keys {sorted(language)} != modality {sorted(want_lang)}")
        t_v, t_s = self.modality["video"].horizon, self.modality["state"].horizon
        h, w = self.image_size
        batch = None
        for key, value in video.items():
            if not isinstance(value, np.ndarray) or value.dtype != np.uint8 or value.shape[1:] != (t_v, h, w, 3):
                raise ValueError(f"video.{key}: expected uint8 (B, {t_v}, {h}, {w}, 3); got {getattr(value, 'dtype', type(value))} {getattr(value, 'shape', '')}")
            batch = value.shape[0] if batch is None else batch
            if value.shape[0] != batch:
                raise ValueError(f"video.{key}: batch {value.shape[0]} != {batch}")
        for key, value in state.items():
            d = self.state_dims[key]
            if not isinstance(value, np.ndarray) or value.dtype != np.float32 or value.shape[1:] != (t_s, d) or value.shape[0] != batch:
                raise ValueError(f"state.{key}: expected float32 ({batch}, {t_s}, {d}); got {getattr(value, 'dtype', type(value))} {getattr(value, 'shape', '')}")
        for key, texts in language.items():
            if len(texts) != batch or not all(isinstance(t, str) for t in texts):
                raise ValueError(f"{key}: expected {batch} instruction strings")
        assert batch is not None
        return batch


def _bad_language(key: str) -> str:
    raise ValueError(f"language.{key}: each env's entry must be a list holding exactly one string")


def main(argv: list[str] | None = None) -> None:
    """``python -m arena_gr00t.testing``: the double in its own process (for fault tests that
    kill a real server). Prints ``listening on tcp://HOST:PORT`` once bound; SIGTERM stops it."""
    import argparse
    import os
    import signal

    parser = argparse.ArgumentParser(description="GR00T policy-server double (ZeroMQ REP)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed once bound)")
    parser.add_argument("--generation", default="n1.6", choices=GENERATIONS)
    parser.add_argument("--api-token-env", default=None, help="NAME of the variable holding the api_token")
    add_fault_arguments(parser)  # --infer-delay-s, --hang-from-request, --restart-on-request, ...
    args = parser.parse_args(argv)
    token = os.environ[args.api_token_env] if args.api_token_env else None
    double = Gr00tDouble(
        generation=args.generation, api_token=token, host=args.host, port=args.port, **fault_options(args)
    ).start()
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    print(f"listening on tcp://{args.host}:{double.port}", flush=True)
    stopped.wait()
    double.stop()


if __name__ == "__main__":
    main()
