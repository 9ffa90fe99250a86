"""Which process listens on a TCP port, read from ``/proc`` (Linux).

A readiness probe only shows that *something* answers on the port. When the server arena
started failed to bind (the port was taken between choosing and binding, or a crashed
server's port was reused), that something is an impostor: a different model, another
user's server. :func:`foreign_listeners` finds the sockets listening on the port
(``/proc/net/tcp`` and ``tcp6``, state ``0A``) and their owners (``/proc/<pid>/fd`` links
``socket:[inode]``), and keeps those that do not belong to the process arena started: the
process itself, its process group (servers start in their own session) or its descendants
(a server's worker processes). Works for any server, arena's or a third party's.

Elsewhere than Linux there is no ``/proc`` and nothing can be checked: the functions say so
(``None``) and callers fall back to "the process arena started is alive".
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Listener", "foreign_listeners", "listeners"]

_PROC = Path("/proc")
_LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    """A socket listening on the port: its address, inode and owner (``pid`` ``None`` when
    the owner is not visible to this user, which means it is not arena's)."""

    address: str
    inode: int
    pid: int | None = None
    command: str | None = None

    def describe(self) -> str:
        if self.pid is None:
            return f"a process arena cannot see (another user's?) listening on {self.address}"
        return f"pid {self.pid} ({self.command or '?'}) listening on {self.address}"


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    # IPv6: four 32-bit words, each in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    address = ipaddress.IPv6Address(words)
    return str(address.ipv4_mapped or address)


def listeners(port: int) -> list[Listener] | None:
    """Every socket listening on TCP ``port`` (IPv4 and IPv6), owners not yet resolved;
    ``None`` when ``/proc/net/tcp`` cannot be read (not Linux)."""
    found: list[Listener] = []
    readable = False
    for table in ("tcp", "tcp6"):
        try:
            lines = (_PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            address, _, hex_port = fields[1].partition(":")
            if int(hex_port, 16) == port:
                found.append(Listener(_address(address), int(fields[9])))
    return found if readable else None


def _pids() -> list[int]:
    return [int(entry.name) for entry in _PROC.iterdir() if entry.name.isdigit()]


def _stat(pid: int) -> tuple[int, int] | None:
    """``(ppid, pgid)`` of ``pid``."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return int(fields[1]), int(fields[2])


def _family(root: int) -> set[int]:
    """``root``, the members of its process group and its descendants."""
    parents: dict[int, int] = {}
    family = {root}
    for pid in _pids():
        stat = _stat(pid)
        if stat is None:
            continue
        parents[pid] = stat[0]
        if stat[1] == root:
            family.add(pid)
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in family and pid not in family:
                family.add(pid)
                changed = True
    return family


def _socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    try:
        fds = list((_PROC / str(pid) / "fd").iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _command(pid: int) -> str | None:
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    text = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    return text[:200] or None


def _reaches(address: str, host: str) -> bool:
    """Whether a connection to ``host`` can land on a socket bound to ``address``."""
    wanted = {host}
    try:
        wanted |= {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except OSError:
        pass
    unspecified = {"0.0.0.0", "::"}
    return address in unspecified or bool(wanted & unspecified) or address in wanted


def _marked(pid: int, marker: tuple[str, str]) -> bool:
    """Whether ``pid``'s environment holds ``NAME=VALUE`` (``marker``)."""
    try:
        entries = (_PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{marker[0]}={marker[1]}".encode() in entries


def foreign_listeners(
    port: int, root_pid: int, host: str = "0.0.0.0", marker: tuple[str, str] | None = None
) -> list[Listener] | None:
    """The sockets listening on ``port`` that a connection to ``host`` may reach and that do
    not belong to ``root_pid`` (itself, its process group or its descendants), with their
    owners where visible. ``[]``: every such listener is ours (or nothing listens); ``None``:
    this system has no ``/proc`` to tell.

    ``marker`` ``(NAME, VALUE)``: a process whose environment holds ``NAME=VALUE`` is ours too,
    wherever it runs on this node: a server a scheduler started for us (a Slurm step's tasks
    are children of ``slurmstepd``, not of the ``srun`` arena started) carries the value arena
    gave that start."""
    found = listeners(port)
    if found is None:
        return None
    relevant = [entry for entry in found if _reaches(entry.address, host)]
    if not relevant:
        return []
    ours: set[int] = set()
    for pid in _family(root_pid):
        ours |= _socket_inodes(pid)
    foreign = [entry for entry in relevant if entry.inode not in ours]
    if not foreign:
        return []
    owners: dict[int, int] = {}
    wanted = {entry.inode for entry in foreign}
    for pid in _pids():
        for inode in _socket_inodes(pid) & wanted:
            owners[inode] = pid
    if marker is not None:
        foreign = [entry for entry in foreign if entry.inode not in owners or not _marked(owners[entry.inode], marker)]
    return [
        Listener(entry.address, entry.inode, owners.get(entry.inode), _command(owners[entry.inode]) if entry.inode in owners else None)
        for entry in foreign
    ]
