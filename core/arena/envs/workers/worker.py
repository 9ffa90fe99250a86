"""One environment worker: ``PYTHON -m arena.envs.workers --fd N``.

Started by :class:`arena.envs.workers.pool.WorkerEnvironment` (under :mod:`arena.keeper`),
with its end of a socketpair as file descriptor ``N``. It says hello, builds the environment
class the parent names for its slice of envs, and answers requests until ``close`` or until
the parent's end closes (:mod:`arena.envs.workers.protocol`). It imports only arena-core and
the environment's own module, so it runs under any interpreter that has those — a
benchmark's venv without the built-in simulators' extras.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import socket
import sys
import traceback
from typing import Any

import numpy as np

from arena.envs.base import ENV_ERRORS, Environment
from arena.envs.workers.protocol import PROTOCOL_VERSION, Channel, SharedArraysOut, WorkerGone, as_numpy
from arena.transport.errors import CodecError


def import_environment_class(path: str) -> type[Environment]:
    """The class at ``module:Qualified.Name``.

    Raises:
        ImportError: the module or attribute does not exist, or it is not an Environment class.
    """
    module_name, _, qualname = path.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportError(f"{module_name} has no attribute {qualname!r}") from None
    if not (isinstance(obj, type) and issubclass(obj, Environment)):
        raise ImportError(f"{path} is not an arena Environment class")
    return obj


class _Session:
    """The environment of this worker and the shared buffers of its replies."""

    def __init__(self) -> None:
        self.env: Environment | None = None
        self.shared = SharedArraysOut()
        self.dropped: set[str] = set()

    def handle(self, message: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
        op = message.get("op")
        if op == "build":
            return self._build(message), []
        env = self.env
        if env is None:
            raise RuntimeError(f"request {op!r} before 'build'")
        if op == "reset":
            obs = env.reset_envs([int(e) for e in message["env_ids"]], [int(s) for s in message["seeds"]])
            obs, created, fds = self.shared.export(obs)
            return {"ok": True, "obs": obs, "shared": created}, fds
        if op == "step":
            # Decoded arrays are read-only views; an environment may clip its actions in place.
            obs, reward, terminated, truncated, info = env.step(np.array(message["actions"]))
            info = dict(info or {})
            errors = info.pop(ENV_ERRORS, None) or {}
            obs, created, fds = self.shared.export(obs)
            reply = {
                "ok": True,
                "obs": obs,
                "reward": np.asarray(as_numpy(reward), dtype=np.float64).reshape(-1),
                "terminated": np.asarray(as_numpy(terminated), dtype=bool).reshape(-1),
                "truncated": np.asarray(as_numpy(truncated), dtype=bool).reshape(-1),
                "info": self._sendable(info),
                "env_errors": [[int(e), str(reason)] for e, reason in dict(errors).items()],
                "shared": created,
            }
            return reply, fds
        if op == "render":
            return {"ok": True, "frame": np.ascontiguousarray(env.render(int(message["env_id"])))}, []
        if op == "episode_info":
            return {"ok": True, "info": dict(env.episode_info(int(message["env_id"])) or {})}, []
        if op == "close":
            self.close()
            return {"ok": True}, []
        raise ValueError(f"unknown request {op!r}")

    def _build(self, message: dict[str, Any]) -> dict[str, Any]:
        if self.env is not None:
            raise RuntimeError("the environment is built already")
        cls = import_environment_class(str(message["env_class"]))
        data = dict(message["config"])
        data.update(workers=0, python=None)  # this process is the worker
        config = cls.Config.model_validate(data)
        self.env = env = cls(config, num_envs=int(message["num_envs"]), cameras=bool(message["cameras"]))
        space = env.action_space
        return {
            "ok": True,
            "action_space": {
                "low": np.asarray(space.low),
                "high": np.asarray(space.high),
                "dtype": np.dtype(space.dtype).str,
            },
            "task_description": env.task_description,
            "default_max_episode_steps": int(env.default_max_episode_steps),
            "cameras": bool(env.cameras),
        }

    def close(self) -> None:
        """Close the environment (the parent left without asking); never raises."""
        if self.env is not None:
            try:
                self.env.close()
            except Exception:  # noqa: BLE001 - exiting anyway
                pass
            self.env = None

    def _sendable(self, info: dict[str, Any]) -> dict[str, Any]:
        """``info`` without the entries that cannot travel (each reported once on stderr)."""
        from arena.transport.codec import packb

        kept = {}
        for key, value in info.items():
            try:
                packb(value)
            except CodecError as exc:
                if key not in self.dropped:
                    self.dropped.add(key)
                    print(f"arena env worker: info[{key!r}] cannot cross to the parent and is dropped: {exc}",
                          file=sys.stderr, flush=True)
                continue
            kept[key] = value
        return kept


def serve(fd: int) -> int:
    """Answer the parent on socket ``fd`` until it closes; return the exit code."""
    from arena.rendering import configure_headless_rendering

    configure_headless_rendering()
    channel = Channel(socket.socket(fileno=fd))
    from arena import __version__

    try:
        channel.send({
            "op": "hello",
            "protocol": PROTOCOL_VERSION,
            "python": platform.python_version(),
            "arena": __version__,
            "pid": os.getpid(),
        })
    except WorkerGone:
        return 0
    session = _Session()
    while True:
        try:
            message, fds = channel.receive()
        except (WorkerGone, CodecError):  # the parent is gone, or stopped mid-request
            session.close()
            return 0
        for extra in fds:
            os.close(extra)
        try:
            reply, fds = session.handle(message)
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
            text = str(exc)
            reply = {
                "ok": False,
                "error": f"{type(exc).__name__}: {text}" if text else type(exc).__name__,
                "traceback": traceback.format_exc(),
            }
            fds = []
        try:
            channel.send(reply, fds)
        except WorkerGone:
            session.close()
            return 0
        except CodecError as exc:  # e.g. an observation holding a Python object
            try:
                channel.send({"ok": False, "error": f"CodecError: the reply cannot travel: {exc}", "traceback": ""})
            except WorkerGone:
                session.close()
                return 0
        finally:
            for extra in fds:
                os.close(extra)
        if message.get("op") == "close":
            return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arena.envs.workers", description=__doc__.splitlines()[0])
    parser.add_argument("--fd", type=int, required=True, help="file descriptor of this worker's socket")
    args = parser.parse_args(argv)
    return serve(args.fd)
