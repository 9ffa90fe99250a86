"""Files in the compute frame: written and hashed locally, or on the login host over ``ssh``
(spec §1.2, §1.3, §5.5).

A plan whose inputs were inspected on the controller (``input_frame.kind == submission_host``)
writes its generated files with the local atomic writer. A plan inspected on a SLURM login host
(``slurm_remote``) writes them there, through the user's own ``ssh`` with the options of the
remote inspection (BatchMode, public keys only, strict host keys): ``umask 077``, ``mktemp`` in the
target folder, the bytes streamed on stdin, ``chmod 0640``, ``mv -f``, then ``sha256sum``, whose
output must equal the hash of what was sent ("remote config checksum mismatch").
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable

from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.hashing import atomic_write_text, sha256_bytes, sha256_file
from arena_tao_cosmos_reason.remote_inspection import SSH_LIMIT_S, ssh_argv

MISSING = "TAO_FRAME_FILE_MISSING"
UNREADABLE = "TAO_FRAME_PATH_UNREADABLE"
UNWRITABLE = "TAO_FRAME_PATH_UNWRITABLE"


class LocalFrame:
    """The controller's own file system (the frame of a ``submission_host`` plan)."""

    kind = "submission_host"

    def write_text(self, path: str, text: str, mode: int = 0o640) -> str:
        """Write ``text`` atomically; return its SHA-256 (lower-case hex)."""
        atomic_write_text(path, text, mode=mode)
        return sha256_bytes(text.encode("utf-8"))

    def sha256(self, path: str) -> str | None:
        """The SHA-256 of the file at ``path``, or ``None`` when there is no such file."""
        return sha256_file(path) if os.path.isfile(path) else None

    def unreadable(self, paths: list[str]) -> list[str]:
        """The ``paths`` that do not exist or cannot be read."""
        return [p for p in paths if not os.access(os.path.expanduser(p), os.R_OK)]

    def unwritable(self, paths: list[str]) -> list[str]:
        """The ``paths`` whose nearest existing ancestor is not writable."""
        bad = []
        for path in paths:
            probe = os.path.abspath(os.path.expanduser(path))
            while not os.path.exists(probe) and os.path.dirname(probe) != probe:
                probe = os.path.dirname(probe)
            if not os.access(probe, os.W_OK):
                bad.append(path)
        return bad


Runner = Callable[..., subprocess.CompletedProcess]


class SshFrame:
    """A SLURM login host's file system, reached with ``ssh user@host`` and the user's key.

    Args:
        user, host, key: ``slurm_user``, the verified inspection host and ``ssh_key_path``.
        run: the subprocess runner (``subprocess.run``); tests put a fake ``ssh`` on ``PATH``.
    """

    kind = "slurm_remote"

    def __init__(self, user: str, host: str, key: str, run: Runner = subprocess.run) -> None:
        if not (user and host and key):
            raise CosmosPlanError("a remote SLURM frame needs slurm_user, a verified slurm_host and ssh_key_path")
        self.user, self.host, self.key, self.run = user, host, os.path.expanduser(key), run

    def _ssh(self, script: str, stdin: str = "") -> str:
        argv = ssh_argv(self.user, self.host, self.key, script)
        try:
            done = self.run(argv, input=stdin, capture_output=True, text=True, timeout=SSH_LIMIT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CosmosPlanError(f"ssh to {self.user}@{self.host} failed: {exc}") from None
        if done.returncode != 0:
            raise CosmosPlanError(f"ssh to {self.user}@{self.host} failed (exit {done.returncode}): "
                                  f"{done.stderr.strip()[-300:]}")
        return done.stdout

    def write_text(self, path: str, text: str, mode: int = 0o640) -> str:
        """Write ``text`` to ``path`` on the login host atomically; return the verified SHA-256.

        Raises:
            CosmosPlanError: ssh fails, or the remote ``sha256sum`` differs from what was sent.
        """
        expected = sha256_bytes(text.encode("utf-8"))
        folder, name = os.path.dirname(path) or ".", os.path.basename(path)
        q_dir, q_path = shlex.quote(folder), shlex.quote(path)
        script = (f"set -eu; umask 077; mkdir -p {q_dir}; tmp=$(mktemp {q_dir}/.{shlex.quote(name)}.XXXXXXXX); "
                  f"trap 'rm -f \"$tmp\"' EXIT; cat > \"$tmp\"; chmod {mode:04o} \"$tmp\"; mv -f \"$tmp\" {q_path}; "
                  f"trap - EXIT; sha256sum {q_path}")
        found = self._ssh(script, text).split()[:1]
        if found != [expected]:
            raise CosmosPlanError(f"remote config checksum mismatch for {self.host}:{path}: expected {expected}, "
                                  f"found {found[0] if found else '<nothing>'}")
        return expected

    def sha256(self, path: str) -> str | None:
        q_path = shlex.quote(path)
        out = self._ssh(f"if [ -f {q_path} ]; then sha256sum {q_path}; else echo {MISSING}; fi").split()
        return None if not out or out[0] == MISSING else out[0]

    def _each(self, paths: list[str], test: str, marker: str) -> list[str]:
        if not paths:
            return []
        quoted = " ".join(shlex.quote(p) for p in paths)
        out = self._ssh(f"for p in {quoted}; do {test} || printf '%s\\t%s\\n' {marker} \"$p\"; done")
        return [line.split("\t", 1)[1] for line in out.splitlines() if line.startswith(marker + "\t")]

    def unreadable(self, paths: list[str]) -> list[str]:
        return self._each(paths, '[ -r "$p" ]', UNREADABLE)

    def unwritable(self, paths: list[str]) -> list[str]:
        probe = 'q="$p"; while [ ! -e "$q" ] && [ "$q" != / ]; do q=$(dirname "$q"); done; [ -w "$q" ]'
        return self._each(paths, f"( {probe} )", UNWRITABLE)


def frame_for(plan: dict, run: Runner = subprocess.run) -> LocalFrame | SshFrame:
    """The frame a sealed plan's generated files live in."""
    frame = plan["input_frame"]
    if frame["kind"] != "slurm_remote":
        return LocalFrame()
    req = plan["planner_request"]
    return SshFrame(req.get("slurm_user", ""), frame.get("verified_host") or "", req.get("ssh_key_path", ""), run)
