"""Atomic file writes: readers see the old file or the new one, never half of one.

The temporary file is created with a plain ``open`` (not ``mkstemp``, whose mode is always
0600), so results on a shared disk get the user's umask like every other file arena writes.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def write_text_atomic(path: str | os.PathLike[str], text: str, *, fsync: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file and ``os.replace``.

    ``fsync`` flushes the data to disk before the rename (crash-safe status and results).

    Raises:
        OSError: it cannot be written (disk full, read-only); ``filename`` is ``path``, and
            the file keeps its old content.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as handle:
            handle.write(text)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None or str(exc.filename) == str(tmp):  # name the file the user knows
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
