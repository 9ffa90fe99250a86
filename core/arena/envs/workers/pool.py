"""The parent's side of environment workers: one vectorized ``Environment`` over worker processes.

:class:`WorkerEnvironment` starts one worker per slice of a :class:`WorkerPlan`
(``PYTHON -m arena.envs.workers``, under :mod:`arena.keeper` through
:func:`arena.processes.spawn`, so it dies with this process whatever kills it), and answers the
rollout like the environment class would in-process:

- ``step`` sends every worker its rows of the actions at once, then gathers the replies, so
  the workers simulate and render in parallel. Observations are joined by env id: every
  array or list whose first dimension is the worker's env count is per env; other values are
  the first worker's.
- A worker that dies (a segfault, ``os._exit``, the OOM killer), whose environment raises, or
  that does not answer a step or reset within the config's ``worker_timeout_s`` (it is then
  killed: a deadlocked simulator) costs only its own envs: ``step`` names them in
  ``info["env_errors"]`` with the reason (the env ids, the exit status or exception, the
  worker's last lines of output) and keeps the other workers' results; ``reset_envs`` raises
  :class:`arena.errors.SimulatorError` naming them, with the observation of the others. A dead worker is started again when the
  rollout next resets one of its envs. Its envs' rows keep their last values meanwhile.
- The workers' stdout and stderr go to this process's stderr, each line prefixed with
  ``[env worker K]``.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

import gymnasium as gym
import numpy as np

from arena.envs.base import ENV_ERRORS, Environment, EnvironmentConfig, declared_success_key
from arena.envs.workers.layout import WorkerPlan
from arena.envs.workers.protocol import PROTOCOL_VERSION, Channel, SharedArraysIn, WorkerGone
from arena.errors import ArenaError, SimulatorError
from arena.processes import spawn, terminate
from arena.transport.errors import CodecError

#: Lines of a worker's output kept for the reason of its death.
OUTPUT_TAIL_LINES = 20
CLOSE_TIMEOUT_S = 30.0


class WorkerError(ArenaError):
    """A worker could not be started or could not build its environment."""


def import_path(env_cls: type) -> str:
    """``module:QualifiedName`` of ``env_cls``, for a worker to import.

    Raises:
        WorkerError: the class lives in ``__main__`` or in a function, where no worker can find it.
    """
    module, qualname = env_cls.__module__, env_cls.__qualname__
    if module == "__main__" or "<locals>" in qualname:
        raise WorkerError(
            f"environment class {qualname} is defined in {'__main__' if module == '__main__' else 'a function'}; "
            "a worker process cannot import it: move it into a module"
        )
    return f"{module}:{qualname}"


class _Worker:
    """One worker process and its channel, owning the envs ``ids`` (contiguous)."""

    def __init__(self, index: int, ids: tuple[int, ...], python: str, timeout_s: float | None = None) -> None:
        self.index = index
        self.timeout_s = timeout_s  # bound of one answer after the build (None: unbounded)
        self.ids = ids
        self.start = ids[0]
        self.stop = ids[-1] + 1
        self.python = python
        self.proc: subprocess.Popen | None = None
        self.channel: Channel | None = None
        self.shared = SharedArraysIn()
        self.pid: int | None = None
        self.python_version: str | None = None
        self.alive = False
        self.pending = 0  # requests sent and not answered yet
        self.violation: str | None = None
        self.part: Any = None  # the worker's last observation (views into its shared buffers)
        self.tail: collections.deque[str] = collections.deque(maxlen=OUTPUT_TAIL_LINES)
        self._reader: threading.Thread | None = None

    @property
    def label(self) -> str:
        span = f"{self.start}" if len(self.ids) == 1 else f"{self.start}-{self.stop - 1}"
        return f"env worker {self.index} (envs {span}{f', pid {self.pid}' if self.pid else ''})"

    # -- life cycle --------------------------------------------------------------------------
    def launch(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            theirs.set_inheritable(True)
            argv = [self.python, "-m", "arena.envs.workers", "--fd", str(theirs.fileno())]
            self.proc = spawn(argv, None, _worker_env(self.python), pass_fds=[theirs.fileno()], capture_output=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.channel = Channel(ours)
        self.shared = SharedArraysIn()
        self.part = None
        self.pid = None
        self.tail.clear()
        self.pending = 0
        self.violation = None
        self.alive = True
        self._reader = threading.Thread(target=self._read_output, name=f"arena-env-worker-{self.index}", daemon=True)
        self._reader.start()

    def hello(self) -> None:
        message = self.receive()
        if message.get("op") != "hello" or message.get("protocol") != PROTOCOL_VERSION:
            raise WorkerError(
                f"{self.label} under {self.python} speaks worker protocol {message.get('protocol')!r} "
                f"(arena {message.get('arena')}), this arena speaks {PROTOCOL_VERSION}: install the same "
                "arena-core in that interpreter (e.g. the plugin's `arena NAME setup`)"
            )
        self.pid = int(message["pid"])
        self.python_version = str(message.get("python"))

    def _read_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        prefix = f"[env worker {self.index}] "
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.tail.append(line)
            try:
                sys.stderr.write(prefix + line + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass

    # -- messages ----------------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        if self.channel is None:
            raise WorkerGone("the worker's channel is closed")
        self.channel.send(message)
        self.pending += 1

    def receive(self, what: str | None = None) -> dict[str, Any]:
        """The next reply, with shared arrays resolved; ``what`` (e.g. ``"step"``) bounds the
        wait by ``timeout_s`` (the hello and the build are not bounded).

        Raises:
            WorkerGone: the worker died, broke the protocol, or did not answer ``what`` in time
                (it is then killed).
        """
        if self.channel is None:
            raise WorkerGone("the worker's channel is closed")
        bounded = what is not None and self.timeout_s is not None
        try:
            if bounded:
                self.channel.sock.settimeout(self.timeout_s)
            message, fds = self.channel.receive()
        except TimeoutError:
            if not bounded:
                raise
            self.violation = (
                f"did not answer its {what} within worker_timeout_s={self.timeout_s:g} s (an environment option) "
                "and was killed"
            )
            if self.proc is not None:
                terminate(self.proc, grace_s=1.0)
            raise WorkerGone(self.violation) from None
        except CodecError as exc:
            self.violation = f"it broke the worker protocol ({exc})"
            if self.proc is not None:
                terminate(self.proc, grace_s=1.0)
            raise WorkerGone(self.violation) from None
        self.pending -= 1
        self.shared.add(message.pop("shared", None) or [], fds)
        return message

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        return self.receive(str(message.get("op")))

    def resolve(self, tree: Any) -> Any:
        return self.shared.resolve(tree)

    # -- the end -----------------------------------------------------------------------------
    def death(self) -> str:
        """Mark the worker dead and describe how it died (exit status, last output)."""
        self.alive = False
        code = self._reap(timeout_s=5.0)
        how = self.violation or _describe_exit(code)
        # faulthandler's list of extension modules says nothing about the crash
        tail = "\n".join(line for line in self.tail if line.strip() and not line.startswith("Extension modules:"))
        return f"{self.label} {how}" + (f"; its last output:\n{tail}" if tail else "")

    def shut(self, timeout_s: float) -> None:
        """Ask the worker to close its environment, then make sure the process is gone.

        With a request still unanswered (an interrupted step), closing the channel is the
        request: the worker closes its environment when it sees the end of the channel.
        """
        if self.alive and self.channel is not None and self.pending == 0:
            try:
                self.channel.sock.settimeout(timeout_s)
                self.send({"op": "close"})
                self.receive()
            except (WorkerGone, OSError, CodecError):
                pass
        self.alive = False
        self._reap(timeout_s)

    def _reap(self, timeout_s: float) -> int | None:
        """Close the channel, wait for the process (killing it after ``timeout_s``) and for the
        rest of its output; return its exit code."""
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                code = terminate(self.proc, grace_s=5.0)
        if self._reader is not None:
            self._reader.join(timeout=5)
            self._reader = None
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        return code


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped answering and was killed"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the OOM killer, or kill -9)" if -code == signal.SIGKILL else ""
        return f"was killed by {name}{hint}"
    return f"exited with code {code}"


def _worker_env(python: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"  # a segfault prints the worker's Python traceback
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        # Same interpreter: whatever this process can import (a test's or a script's modules),
        # the worker can too. Another interpreter keeps its own paths. Symlinks are not
        # resolved: every venv's bin/python links to its base interpreter, so resolved paths
        # would give a benchmark venv's worker this venv's packages (another MuJoCo).
        paths = [p for p in sys.path if p and os.path.isdir(p)]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def _join(parts: list[Any], sizes: list[int]) -> Any:
    """Join the workers' values of one message tree by env id (see the module docstring)."""
    first = parts[0]
    if isinstance(first, dict):
        return {key: _join([p[key] for p in parts], sizes) for key in first if all(isinstance(p, dict) and key in p for p in parts)}
    if all(isinstance(p, np.ndarray) and p.ndim >= 1 and p.shape[0] == n for p, n in zip(parts, sizes)):
        return np.concatenate(parts)
    if all(isinstance(p, list) and len(p) == n for p, n in zip(parts, sizes)):
        return [x for p in parts for x in p]
    return first.copy() if isinstance(first, np.ndarray) else first  # never a view of a shared buffer


class WorkerEnvironment(Environment):
    """``num_envs`` envs of ``env_cls`` spread over worker processes as ``plan`` says.

    The vectorized :class:`Environment` contract, plus the per-env faults described in the
    module docstring. Build it with :func:`arena.envs.workers.build_environment`.

    Raises:
        WorkerError: a worker could not start or build its envs (closes every worker first).
    """

    def __init__(self, env_cls: type[Environment], config: EnvironmentConfig, *, plan: WorkerPlan, cameras: bool = False) -> None:
        if plan.in_process or plan.python is None:
            raise ValueError("a WorkerEnvironment needs a plan with at least one worker")
        super().__init__(config, num_envs=sum(len(s) for s in plan.slices), cameras=cameras)
        self.name = env_cls.name
        self.env_cls = env_cls
        self.success_key = declared_success_key(env_cls)  # the workers' envs report success there
        self.upside_down_cameras = env_cls.upside_down_cameras
        self.plan = plan
        self._build_message = {
            "op": "build",
            "env_class": import_path(env_cls),
            # the parent-side keys stay here (an older arena-core in a benchmark venv knows no worker_timeout_s)
            "config": {
                **config.model_dump(mode="json", by_alias=True, exclude={"worker_timeout_s"}), "workers": 0, "python": None,
            },
            "cameras": bool(cameras),
        }
        timeout_s = getattr(config, "worker_timeout_s", None)
        self._workers = [_Worker(k, ids, plan.python, timeout_s) for k, ids in enumerate(plan.slices)]
        self._closed = False
        try:
            for worker in self._workers:
                worker.launch()
            for worker in self._workers:  # each builds while the next one says hello
                self._handshake(worker)
            described = [self._built(worker) for worker in self._workers]
        except BaseException:
            self.close()
            raise
        meta = described[0]
        space = meta["action_space"]
        self.action_space = gym.spaces.Box(
            np.asarray(space["low"]), np.asarray(space["high"]), dtype=np.dtype(space["dtype"])
        )
        self.task_description = meta["task_description"]
        self.default_max_episode_steps = int(meta["default_max_episode_steps"])
        self.cameras = bool(meta["cameras"])

    def describe(self) -> str:
        """E.g. ``2 workers (envs 0-1, 2) under /venv/bin/python (Python 3.12.1)``."""
        versions = sorted({w.python_version for w in self._workers if w.python_version})
        return self.plan.describe() + (f" (Python {', '.join(versions)})" if versions else "")

    # -- start-up ------------------------------------------------------------------------------
    def _handshake(self, worker: _Worker) -> None:
        try:
            worker.hello()
            worker.send({**self._build_message, "num_envs": len(worker.ids)})
        except WorkerGone:
            raise WorkerError(f"could not start under {worker.python}: {worker.death()}") from None

    def _built(self, worker: _Worker) -> dict[str, Any]:
        try:
            reply = worker.receive()
        except WorkerGone:
            raise WorkerError(f"could not build its environment: {worker.death()}") from None
        if not reply.get("ok"):
            # The traceback goes to stderr (the run's runner.log); the error, which becomes the
            # run's failure reason in summaries and reports, stays one line.
            self._report(worker, "build its environment", reply)
            raise WorkerError(
                f"{worker.label} could not build '{self._build_message['env_class']}' under {worker.python}: "
                f"{reply.get('error')}" + (" (traceback in the run's log)" if reply.get("traceback") else "")
            )
        return reply

    def _restart(self, worker: _Worker) -> None:
        print(f"arena: restarting {worker.label}", file=sys.stderr, flush=True)
        worker.shut(timeout_s=5.0)
        worker.launch()
        self._handshake(worker)
        self._built(worker)

    # -- Environment API -----------------------------------------------------------------------
    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        """Reset ``env_ids`` with ``seeds`` in their workers (a dead worker is started again first).

        Raises:
            SimulatorError: envs whose worker died, could not be restarted or raised; its
                ``observation`` holds the other envs' new episodes.
        """
        env_ids, seeds = self.check_reset(env_ids, seeds)
        wanted: dict[int, tuple[list[int], list[int]]] = {}
        for worker in self._workers:
            mine = [(e - worker.start, s) for e, s in zip(env_ids, seeds) if worker.start <= e < worker.stop]
            if mine or worker.part is None:
                # A worker whose envs never reset yet resets them all (seed 0), so every row
                # of the batch holds an observation, as in-process constructors do.
                pairs = mine if mine else [(i, 0) for i in range(len(worker.ids))]
                wanted[worker.index] = ([p[0] for p in pairs], [p[1] for p in pairs])
        lost: dict[int, str] = {}
        for index in wanted:
            worker = self._workers[index]
            if not worker.alive:
                try:
                    self._restart(worker)
                except (WorkerError, WorkerGone, OSError) as exc:
                    lost.update(self._lose(worker, f"could not be restarted: {exc}"))
        asked = []
        for index, (ids, worker_seeds) in wanted.items():
            worker = self._workers[index]
            if worker.alive:
                try:
                    worker.send({"op": "reset", "env_ids": ids, "seeds": worker_seeds})
                    asked.append(worker)
                except WorkerGone:
                    lost.update(self._lose(worker, worker.death()))
        for worker in asked:
            try:
                reply = worker.receive("reset")
            except WorkerGone:
                lost.update(self._lose(worker, worker.death()))
                continue
            if reply.get("ok"):
                worker.part = worker.resolve(reply["obs"])
            else:
                self._report(worker, "reset", reply)
                lost.update(self._lose(worker, f"{worker.label} failed to reset: {reply.get('error')}"))
        lost = {e: reason for e, reason in lost.items() if e in set(env_ids)}
        if any(w.part is None for w in self._workers):  # a worker never gave an observation
            reason = next(iter(lost.values()), "a worker gave no observation")
            raise SimulatorError(f"envs could not be reset: {reason}", sorted(lost) or env_ids)
        observation = self._observation()
        if lost:
            first = next(iter(lost.values()))
            raise SimulatorError(f"envs {sorted(lost)} could not be reset: {first}", sorted(lost), observation=observation)
        return observation

    def step(self, actions: np.ndarray) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every worker's envs at once with their rows of ``actions`` ``(num_envs, action_dim)``."""
        actions = np.asarray(actions)
        if actions.ndim < 1 or actions.shape[0] != self.num_envs:
            raise ValueError(f"actions must have {self.num_envs} rows (one per env), got shape {actions.shape}")
        n = self.num_envs
        reward = np.zeros(n, np.float64)
        terminated = np.zeros(n, bool)
        truncated = np.zeros(n, bool)
        key = self.success_key
        success = np.zeros(n, bool)
        without_key: list[str] = []  # workers that answered without the declared success key
        errors: dict[int, str] = {}
        infos: list[dict[str, Any] | None] = [None] * len(self._workers)
        asked = []
        for worker in self._workers:
            if not worker.alive:
                continue  # its envs have no episode until a reset starts it again
            try:
                worker.send({"op": "step", "actions": np.ascontiguousarray(actions[worker.start : worker.stop])})
                asked.append(worker)
            except WorkerGone:
                errors.update(self._lose(worker, worker.death()))
        for worker in asked:
            rows = slice(worker.start, worker.stop)
            try:
                reply = worker.receive("step")
            except WorkerGone:
                errors.update(self._lose(worker, worker.death()))
                continue
            if not reply.get("ok"):
                self._report(worker, "step", reply)
                errors.update(self._lose(worker, f"{worker.label} failed to step: {reply.get('error')}", alive=True))
                continue
            worker.part = worker.resolve(reply["obs"])
            reward[rows] = reply["reward"]
            terminated[rows] = reply["terminated"]
            truncated[rows] = reply["truncated"]
            info = reply.get("info") or {}
            if key is not None and key in info:
                success[rows] = np.asarray(info[key], dtype=bool).reshape(-1)
            elif key is not None:
                without_key.append(worker.label)
            infos[worker.index] = info
            for local, reason in reply.get("env_errors") or []:
                errors[worker.start + int(local)] = str(reason)
        info_out: dict[str, Any] = {}
        if all(i is not None for i in infos):
            info_out = _join(infos, [len(w.ids) for w in self._workers])
        if key is not None and not without_key:  # else the rollout reports the missing signal
            info_out[key] = success
        elif key is not None:
            info_out.pop(key, None)
        if errors:
            info_out[ENV_ERRORS] = errors
        return self._observation(), reward, terminated, truncated, info_out

    def render(self, env_id: int) -> np.ndarray:
        """``uint8 (H, W, 3)`` frame of ``env_id``, rendered by its worker.

        Raises:
            SimulatorError: its worker is dead or failed to render.
        """
        worker = self._owner(env_id)
        if not worker.alive:
            raise SimulatorError(f"{worker.label} is not running", [env_id])
        try:
            reply = worker.request({"op": "render", "env_id": env_id - worker.start})
        except WorkerGone:
            reason = worker.death()
            raise SimulatorError(reason, [env_id]) from None
        if not reply.get("ok"):
            raise SimulatorError(f"{worker.label} failed to render env {env_id}: {reply.get('error')}", [env_id])
        return reply["frame"]

    def null_action(self, env_id: int) -> np.ndarray | None:
        """The workers' class's null action for this config (live mode's ``null_action`` hold)."""
        return self.env_cls.null_action_for(self.config)

    def stay_action(self, observation: dict[str, Any], env_id: int) -> np.ndarray | None:
        """The workers' class's stay action, read from the merged observation (no worker call)."""
        return self.env_cls.stay_action_for(self.config, observation, env_id)

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """The environment's extras for ``env_id``'s episode (``{}`` when its worker is dead)."""
        worker = self._owner(env_id)
        if not worker.alive:
            return {}
        try:
            reply = worker.request({"op": "episode_info", "env_id": env_id - worker.start})
        except WorkerGone:
            worker.death()
            return {}
        return dict(reply.get("info") or {}) if reply.get("ok") else {"episode_info_error": reply.get("error")}

    def close(self) -> None:
        """Close every worker's environment and end the processes. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for worker in self._workers:
            worker.shut(timeout_s=CLOSE_TIMEOUT_S)

    def __del__(self) -> None:  # best effort; close() is the contract
        try:
            self.close()
        except Exception:
            pass

    # -- helpers -------------------------------------------------------------------------------
    def _owner(self, env_id: int) -> _Worker:
        for worker in self._workers:
            if worker.start <= env_id < worker.stop:
                return worker
        raise ValueError(f"env id {env_id} out of range 0..{self.num_envs - 1}")

    def _lose(self, worker: _Worker, reason: str, *, alive: bool = False) -> dict[int, str]:
        """The envs of ``worker`` with ``reason``; a dead worker is started again at the next reset."""
        worker.alive = worker.alive and alive
        print(f"arena: {reason}", file=sys.stderr, flush=True)
        return {e: reason for e in worker.ids}

    @staticmethod
    def _report(worker: _Worker, what: str, reply: dict[str, Any]) -> None:
        trace = reply.get("traceback")
        if trace:
            print(f"arena: {worker.label} failed to {what}:\n{trace}", file=sys.stderr, flush=True)

    def _observation(self) -> dict[str, Any]:
        return _join([w.part for w in self._workers], [len(w.ids) for w in self._workers])
