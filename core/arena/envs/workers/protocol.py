"""The worker protocol: messages between a :class:`WorkerEnvironment` and its worker processes.

Transport: a connected ``AF_UNIX`` stream socket (a socketpair made by the parent; the worker
gets its end as an inherited file descriptor). A message is a 5-byte header — body length
(uint32, big-endian) and the number of file descriptors that come with it (uint8) — then a
msgpack body (arena's wire codec, :mod:`arena.transport.codec`: numpy arrays as the openpi
``__ndarray__`` maps, nothing pickled). File descriptors travel as ``SCM_RIGHTS`` with the
header. Decoded arrays are read-only views (:func:`arena.transport.codec.unpackb`): the parent
joins the workers' observations into new arrays (writable, as an in-process environment's
are) and a worker hands its environment a copy of the actions.

Large arrays do not go through the socket: every array of an observation's ``camera_obs``
and every other array of :data:`SHARED_MIN_BYTES` or more is copied into a shared-memory
buffer that belongs to the worker (``memfd_create``, or an unlinked temporary file where that
is missing), and its place in the message holds a marker. A buffer is created when a path
first appears (or its shape or dtype changes) and sent once as a file descriptor; later
messages reuse it. The buffers have no name, so nothing is left behind whoever dies: the
memory is freed when the last process holding a mapping is gone. The parent reads a buffer
only between the reply that filled it and its next request to that worker.

Messages (version :data:`PROTOCOL_VERSION`; the worker says ``hello`` first, the parent then
sends one request at a time and reads one reply):

- worker: ``{"op": "hello", "protocol", "python", "arena", "pid"}``
- ``{"op": "build", "env_class": "module:Class", "config": {...}, "num_envs", "cameras"}`` ->
  ``{"ok", "action_space": {"low", "high", "dtype"}, "task_description",
  "default_max_episode_steps", "cameras"}``
- ``{"op": "reset", "env_ids", "seeds"}`` -> ``{"ok", "obs", "shared"}``
- ``{"op": "step", "actions"}`` -> ``{"ok", "obs", "reward", "terminated", "truncated",
  "info", "env_errors": [[env_id, reason], ...], "shared"}``
- ``{"op": "render", "env_id"}`` -> ``{"ok", "frame"}``; ``{"op": "episode_info",
  "env_id"}`` -> ``{"ok", "info"}``; ``{"op": "close"}`` -> ``{"ok"}``

Env ids in messages are the worker's own (``0 .. n - 1``). ``shared`` lists the buffers
created for this reply (``{"key", "shape", "dtype"}``, one file descriptor each, in order).
A failed request is answered ``{"ok": false, "error": "Type: message", "traceback"}``.
"""

from __future__ import annotations

import mmap
import os
import socket
import struct
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from arena.transport.codec import packb, unpackb

PROTOCOL_VERSION = 1
#: Arrays outside ``camera_obs`` of at least this many bytes travel through shared memory.
SHARED_MIN_BYTES = 64 * 1024
MAX_FDS = 64
_HEADER = struct.Struct("!IB")
_MARKER = b"__arena_shared__"
_SHAREABLE_KINDS = frozenset("biuf")


class WorkerGone(ConnectionError):
    """The other end of the channel closed (the process exited or was killed)."""


class Channel:
    """Framed messages with file descriptors over a connected ``AF_UNIX`` stream socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def send(self, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
        """Send one message (and ``fds``, which stay open here).

        Raises:
            WorkerGone: the peer is gone.
            arena.transport.errors.CodecError: the message holds a value that cannot travel.
        """
        if len(fds) > MAX_FDS:
            raise ValueError(f"at most {MAX_FDS} file descriptors per message, got {len(fds)}")
        body = packb(message)
        pending = [memoryview(_HEADER.pack(len(body), len(fds))), memoryview(body)]
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))] if fds else []
        try:
            while pending:
                sent = self.sock.sendmsg(pending, ancillary)
                ancillary = []
                while pending and sent >= len(pending[0]):
                    sent -= len(pending[0])
                    pending.pop(0)
                if pending and sent:
                    pending[0] = pending[0][sent:]
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise WorkerGone(str(exc)) from None

    def receive(self) -> tuple[dict[str, Any], list[int]]:
        """Read one message and the file descriptors that came with it (the caller owns them).

        Raises:
            WorkerGone: the peer closed the channel.
            arena.transport.errors.CodecError: the body is not a valid message.
        """
        header = bytearray()
        fds: list[int] = []
        while len(header) < _HEADER.size:
            try:
                data, got, _, _ = socket.recv_fds(self.sock, _HEADER.size - len(header), MAX_FDS)
            except ConnectionResetError as exc:
                raise WorkerGone(str(exc)) from None
            fds += got
            if not data:
                _close_all(fds)
                raise WorkerGone("the other end closed the channel")
            header += data
        length, _count = _HEADER.unpack(header)
        body = bytearray(length)
        view = memoryview(body)
        while view:
            try:
                n = self.sock.recv_into(view)
            except ConnectionResetError as exc:
                n = 0
                reason = str(exc)
            else:
                reason = "the other end closed the channel mid-message"
            if n == 0:
                _close_all(fds)
                raise WorkerGone(reason)
            view = view[n:]
        message = unpackb(body)
        if not isinstance(message, dict):
            _close_all(fds)
            raise WorkerGone(f"protocol violation: a message is a map, got {type(message).__name__}")
        return message, fds

    def close(self) -> None:
        self.sock.close()


def _close_all(fds: Sequence[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _anonymous_memory(size: int) -> int:
    """A file descriptor of ``size`` bytes of shared memory without a name."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("arena-env-worker", os.MFD_CLOEXEC)
    else:  # macOS: an unlinked temporary file
        with tempfile.TemporaryFile() as handle:
            fd = os.dup(handle.fileno())
    os.ftruncate(fd, size)
    return fd


def _map(fd: int, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    size = int(np.prod(shape)) * dtype.itemsize
    memory = mmap.mmap(fd, size)
    return np.ndarray(tuple(shape), dtype=dtype, buffer=memory)


def as_numpy(value: Any) -> Any:
    """A torch tensor (on any device) as a numpy array; anything else as it is."""
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return value


class SharedArraysOut:
    """The worker's side: moves large arrays of a message tree into its shared buffers."""

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}

    def export(self, tree: Any) -> tuple[Any, list[dict[str, Any]], list[int]]:
        """``tree`` with markers in place of shared arrays, the new buffers' descriptions and
        their file descriptors (close them once sent)."""
        created: list[dict[str, Any]] = []
        fds: list[int] = []
        return self._walk(tree, (), created, fds), created, fds

    def _walk(self, value: Any, path: tuple[str, ...], created: list, fds: list) -> Any:
        if isinstance(value, dict):
            return {k: self._walk(v, (*path, str(k)), created, fds) for k, v in value.items()}
        value = as_numpy(value)
        if not isinstance(value, np.ndarray) or value.dtype.kind not in _SHAREABLE_KINDS or value.nbytes == 0:
            return value
        if not (path[:1] == ("camera_obs",) or value.nbytes >= SHARED_MIN_BYTES):
            return value
        key = "/".join(path)
        buffer = self._buffers.get(key)
        if buffer is None or buffer.shape != value.shape or buffer.dtype != value.dtype:
            fd = _anonymous_memory(value.nbytes)
            buffer = self._buffers[key] = _map(fd, value.shape, value.dtype)
            created.append({"key": key, "shape": list(value.shape), "dtype": value.dtype.str})
            fds.append(fd)
        np.copyto(buffer, value)
        return {_MARKER: key}


class SharedArraysIn:
    """The parent's side: maps a worker's buffers and puts read-only views where markers are."""

    def __init__(self) -> None:
        self._views: dict[str, np.ndarray] = {}

    def add(self, created: list[dict[str, Any]], fds: list[int]) -> None:
        """Map the buffers a reply announced (closing their descriptors).

        Raises:
            WorkerGone: the reply's descriptions and descriptors do not match (protocol violation).
        """
        try:
            if len(created) != len(fds):
                raise WorkerGone(f"protocol violation: {len(created)} shared buffers but {len(fds)} descriptors")
            for spec, fd in zip(created, fds):
                view = _map(fd, spec["shape"], np.dtype(spec["dtype"]))
                view.flags.writeable = False
                self._views[spec["key"]] = view
        finally:
            _close_all(fds)

    def resolve(self, tree: Any) -> Any:
        """``tree`` with the views of the shared buffers in place of their markers."""
        if isinstance(tree, dict):
            if _MARKER in tree and len(tree) == 1:
                key = tree[_MARKER]
                if key not in self._views:
                    raise WorkerGone(f"protocol violation: unknown shared buffer {key!r}")
                return self._views[key]
            return {k: self.resolve(v) for k, v in tree.items()}
        return tree
