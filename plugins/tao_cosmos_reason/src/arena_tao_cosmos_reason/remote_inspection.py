"""Remote (compute-frame) inspection over SSH behind an injectable transport (spec §3.10).

The login host must have this plugin installed; the payload is the JSON inspection request on
stdin of ``python3 -m arena_tao_cosmos_reason.remote_probe``, and the reply is its JSON
report. SSH runs non-interactively: BatchMode, public keys only, strict host keys, 15 s connect
timeout, 1 h overall limit.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable

from arena_tao_cosmos_reason.errors import CosmosPlanError

SSH_CONNECT_TIMEOUT_S = 15
SSH_LIMIT_S = 3600
PROBE_COMMAND = "python3 -m arena_tao_cosmos_reason.remote_probe"


def ssh_argv(user: str, host: str, key: str, remote_command: str) -> list[str]:
    return ["ssh", "-i", key, "-o", "BatchMode=yes", "-o", "PubkeyAuthentication=yes",
            "-o", "PasswordAuthentication=no", "-o", "StrictHostKeyChecking=yes",
            "-o", f"ConnectTimeout={SSH_CONNECT_TIMEOUT_S}", f"{user}@{host}", remote_command]


def ssh_transport(user: str, host: str, key: str, remote_command: str, stdin: str) -> str:
    """Run ``remote_command`` on ``host``; return stdout. Raises ``RuntimeError`` with detail."""
    try:
        done = subprocess.run(ssh_argv(user, host, key, remote_command), input=stdin, capture_output=True,
                              text=True, timeout=SSH_LIMIT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(str(exc)) from None
    if done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr.strip()[-300:]}")
    return done.stdout


Transport = Callable[[str, str, str, str, str], str]


def inspect_remote(req, payload: dict, transport: Transport | None = None) -> dict:
    """Try each ``slurm_host`` in order; the first reply with ``frame == target_compute`` wins."""
    if not req.slurm_user or not req.slurm_host:
        raise CosmosPlanError("slurm_user and slurm_host are required for remote input inspection")
    if not req.ssh_key_path:
        raise CosmosPlanError("ssh_key_path is required for remote input inspection")
    if not os.path.isfile(os.path.expanduser(req.ssh_key_path)):
        raise CosmosPlanError(f"ssh_key_path is inaccessible: {req.ssh_key_path}")
    send = transport or ssh_transport
    failures = []
    for host in req.slurm_host:
        try:
            reply = json.loads(send(req.slurm_user, host, os.path.expanduser(req.ssh_key_path), PROBE_COMMAND,
                                    json.dumps(payload)))
        except (RuntimeError, ValueError) as exc:
            failures.append(f"{host}: {exc}")
            continue
        if not isinstance(reply, dict) or reply.get("frame") != "target_compute":
            failures.append(f"{host}: reply is not a target_compute inspection")
            continue
        if reply.get("error"):
            raise CosmosPlanError(f"remote SLURM input inspection on {host}: {reply['error']}")
        reply["verified_host"] = host
        return reply
    raise CosmosPlanError("remote SLURM input inspection failed: " + "; ".join(failures))


def probe_main() -> None:  # pragma: no cover - exercised through a subprocess in tests
    """Entry of ``remote_probe``: inspect the inputs named on stdin, print JSON."""
    from arena_tao_cosmos_reason.inputs import inspect_inputs

    request = json.loads(sys.stdin.read())
    try:
        report = inspect_inputs(request)
        report.update(frame="target_compute", host=socket.gethostname())
    except Exception as exc:  # reported, then raised on the controller
        report = {"frame": "target_compute", "error": str(exc)}
    print(json.dumps(report))
