"""Who can reach a policy server: its bind address, and whether it requires an API key.

A server bound to a non-loopback address is reachable by anyone who can reach its node, so
binding one is an explicit, visible choice: every backend binds loopback when server and
simulation share a node and says so where they cannot (OSMO tasks, Slurm het jobs on two
nodes); ``--dry-run`` and the run's provenance show the decision. arena's own server
(a ServerTask with ``api_key_args``) then requires a key: the user's (the policy's
``api_key_env``) or one generated for the run. A generated key travels only by environment
variable — its NAME (:data:`GENERATED_KEY_ENV`) is what the snapshot, the scripts and
``submission.json`` may hold, never the value. Third-party servers without authentication
(openpi's, Cosmos', GR00T's ``run_gr00t_server.py``) stay reachable by anyone who reaches
the node; the description says so.
"""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import asdict, dataclass
from typing import Any, Literal

from arena.servertask import ServerTask

__all__ = ["GENERATED_KEY_ENV", "Exposure", "decide_exposure", "generate_key", "is_loopback"]

#: The variable holding a key generated for a run (its value never reaches a file).
GENERATED_KEY_ENV = "ARENA_SERVER_API_KEY"

KeySource = Literal["generated", "user", "none"]


def is_loopback(address: str) -> bool:
    """Whether ``address`` (an IP or ``localhost``) is reachable from this node only. Any
    other host name counts as exposed (it resolves to something the network can reach)."""
    if address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def generate_key() -> str:
    """A fresh API key: 32 random bytes as 64 hex digits."""
    return secrets.token_hex(32)


@dataclass(frozen=True)
class Exposure:
    """One server's exposure.

    ``bind``: the address it listens on. ``exposed``: not loopback. ``key``: where the key it
    requires comes from (``generated`` for this run, the ``user``'s ``api_key_env``, or
    ``none``: it requires none). ``server_key_env``: NAME of the variable the server reads its
    key from (``None``: unauthenticated). ``client_key_env``: NAME of the variable the
    client and the readiness probe read (the server's, or the user's for a server that
    ignores keys).
    """

    server: str
    bind: str
    exposed: bool
    key: KeySource
    server_key_env: str | None
    client_key_env: str | None

    @property
    def authenticated(self) -> bool:
        return self.server_key_env is not None

    def describe(self) -> str:
        """One line for ``--dry-run`` and logs."""
        if not self.exposed:
            where = f"binds {self.bind} (loopback: reachable from its own node only)"
        else:
            where = f"binds {self.bind}: EXPOSED to the network"
        if self.key == "generated":
            auth = f"requires an API key generated for this run (handed over as ${self.server_key_env}, never written)"
        elif self.key == "user":
            auth = f"requires the API key in ${self.server_key_env}"
        elif self.exposed:
            auth = f"WITHOUT authentication ('{self.server}' cannot require an API key)"
        else:
            auth = "no API key"
        return f"policy server {self.server} {where}, {auth}"

    def as_dict(self) -> dict[str, Any]:
        """For provenance and ``run_result.json``: names only, never a key."""
        return {**asdict(self), "authenticated": self.authenticated}


def decide_exposure(task: ServerTask, argv: list[str], requested_bind: str, policy_key_env: str | None) -> Exposure:
    """The exposure of ``task`` started with ``argv`` (its ``command`` or ``local_command``)
    when the backend asks it to bind ``requested_bind``.

    A server that can require a key (``api_key_args``) requires the user's when the policy
    names one (``api_key_env``), else a generated one whenever it is exposed; on loopback
    it requires none.
    """
    bind = task.bind_address(argv, requested_bind)
    exposed = not is_loopback(bind)
    key: KeySource = "none"
    server_key_env = None
    if task.api_key_args:
        if policy_key_env:
            key, server_key_env = "user", policy_key_env
        elif exposed:
            key, server_key_env = "generated", GENERATED_KEY_ENV
    return Exposure(
        server=task.name,
        bind=bind,
        exposed=exposed,
        key=key,
        server_key_env=server_key_env,
        client_key_env=server_key_env or policy_key_env or None,
    )
