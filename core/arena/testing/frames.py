"""Length-prefixed frames of arena's wire codec on byte streams: files and pipes, never pickle.

A frame is a 4-byte header, the body's length (uint32, big-endian, as the worker protocol's
header in :mod:`arena.envs.workers.protocol`), then the body: one message of arena's wire codec
(:func:`arena.transport.codec.packb`). What travels is what that codec carries: dicts (str or
bytes keys), lists, str, bytes, bool, int, float, None, numpy arrays and numpy scalars.
Tuples come back as lists (``status, result = read_frame(f)`` still works); ``np.float64``
comes back as ``float``; decoded arrays are read-only views unless ``writable=True`` is asked
for. Nothing is ever unpickled, so a frame read from a file or a child process's stdout cannot
run code.

Used by the plugins' test helpers: the traced environments' per-env trace files
(``*.frames``, read with :func:`read_frame_files`) and the raw-simulator servers
(``python -m arena_libero.testing``, ``python -m arena_aloha.testing``) that speak
``(method, args)`` / ``(status, result)`` frames over stdin/stdout.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from arena.transport.codec import packb, unpackb
from arena.transport.errors import CodecError

__all__ = ["TraceFiles", "TruncatedFrame", "read_frame", "read_frame_files", "read_frames", "serve_calls", "write_frame"]

_HEADER = struct.Struct("!I")
_MAX_BODY = 2**32 - 1
_CHUNK = 1 << 20  # read a body in pieces: a corrupt length must not allocate 4 GiB up front


class TruncatedFrame(CodecError):
    """A stream ended inside a frame (its header or its body): the writer died mid-frame or the
    file was cut. Not an :class:`EOFError`, so a reader's loop does not take it for a clean end."""


def write_frame(stream: IO[bytes], obj: Any) -> None:
    """Write ``obj`` as one frame to the binary ``stream`` and flush it.

    Raises:
        arena.transport.errors.CodecError: ``obj`` holds a value the codec cannot carry (the
            message names its key path, e.g. ``state: objects of type builtins.set are not
            supported``); nothing is written then.
        ValueError: the encoded body exceeds 4 GiB - 1 bytes.
    """
    body = packb(obj)
    if len(body) > _MAX_BODY:
        raise ValueError(f"a frame body holds at most {_MAX_BODY} bytes, this one {len(body)}")
    stream.write(_HEADER.pack(len(body)) + body)
    stream.flush()


def read_frame(stream: IO[bytes], *, writable: bool = False) -> Any:
    """Read one frame from the binary ``stream`` and decode it.

    ``writable=True`` copies every decoded array (inside dicts and lists) so its consumer may
    write into it, as into an unpickled one; by default arrays are read-only views.

    Raises:
        EOFError: the stream ended cleanly, before the first byte of a frame.
        TruncatedFrame: the stream ended inside a frame (says how many bytes were missing).
        arena.transport.errors.CodecError: the body is not a valid codec message.
    """
    header = _read_exactly(stream, _HEADER.size)
    if not header:
        raise EOFError("end of stream")
    if len(header) < _HEADER.size:
        raise TruncatedFrame(f"truncated frame: the stream ended after {len(header)} of the header's {_HEADER.size} bytes")
    (length,) = _HEADER.unpack(header)
    body = _read_exactly(stream, length)
    if len(body) < length:
        raise TruncatedFrame(f"truncated frame: the stream ended after {len(body)} of the body's {length} bytes")
    obj = unpackb(body)
    return _writable(obj) if writable else obj


def read_frames(stream: IO[bytes], *, writable: bool = False) -> list[Any]:
    """Every frame of ``stream`` up to its clean end, in order (see :func:`read_frame`).

    Raises:
        TruncatedFrame: the last frame is cut (a trace whose writer died mid-write).
        arena.transport.errors.CodecError: a body is not a valid codec message.
    """
    frames = []
    while True:
        try:
            frames.append(read_frame(stream, writable=writable))
        except EOFError:
            return frames


def read_frame_files(directory: str | os.PathLike[str], pattern: str = "*.frames") -> list[list[Any]]:
    """The frames of every file of ``directory`` matching the glob ``pattern``, one list per file,
    files sorted by name (the traced environments name theirs ``<pid>-<env_id>.frames``).

    Raises:
        TruncatedFrame: a file ends inside a frame (the message names the file).
        arena.transport.errors.CodecError: a file holds a frame that is not a codec message.
    """
    out = []
    for path in sorted(Path(directory).glob(pattern)):
        with path.open("rb") as f:
            try:
                out.append(read_frames(f))
            except CodecError as exc:
                raise type(exc)(f"{path}: {exc}") from exc
    return out


class TraceFiles:
    """One frames file per env id under ``directory``, opened on first use and appended to:
    ``<pid>-<env_id>.frames`` (the name :func:`read_frame_files` sorts by), so several
    processes of one run (environment workers) trace into one directory without clashing.

    ``write(env_id, entry)`` appends one frame; ``close()`` closes every file (idempotent).
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._files: list[IO[bytes]] = []

    def write(self, env_id: int, entry: Any) -> None:
        """Append ``entry`` (a codec message) as one frame to env ``env_id``'s file."""
        while len(self._files) <= env_id:
            path = self.directory / f"{os.getpid()}-{len(self._files)}.frames"
            path.parent.mkdir(parents=True, exist_ok=True)
            self._files.append(path.open("ab"))
        write_frame(self._files[env_id], entry)

    def close(self) -> None:
        for f in self._files:
            f.close()
        self._files = []


def serve_calls(handle: Callable[[str, list[Any]], Any], *, stop: str = "close") -> None:
    """Answer ``[method, args]`` frames from stdin with ``["ok", result]`` / ``["error", repr]``
    frames on stdout until stdin ends or ``stop`` was answered (the raw-simulator servers' loop).

    ``handle(method, args)`` runs each call (``args`` a list, its arrays writable copies);
    whatever it raises, or a result the codec cannot carry, is answered ``["error", repr]``
    and the loop goes on. ``sys.stdout`` is pointed at stderr first, so a simulator's prints
    cannot corrupt the frames.

    Raises:
        TruncatedFrame: stdin ended inside a frame (the client died mid-write).
    """
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    while True:
        try:
            method, args = read_frame(stdin, writable=True)
        except EOFError:
            return
        try:
            reply = ["ok", handle(method, args)]
            write_frame(stdout, reply)
        except Exception as exc:  # noqa: BLE001 - the client shows it; write_frame wrote nothing
            write_frame(stdout, ["error", repr(exc)])
        if method == stop:
            return


def _read_exactly(stream: IO[bytes], n: int) -> bytes:
    """Up to ``n`` bytes: fewer only where the stream ended (pipes may return short reads)."""
    parts: list[bytes] = []
    left = n
    while left:
        part = stream.read(min(left, _CHUNK))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _writable(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return np.array(obj)
    if isinstance(obj, dict):
        return {key: _writable(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [_writable(value) for value in obj]
    return obj
