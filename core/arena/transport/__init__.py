"""The wire layer: openpi-compatible codec, WebSocket client and server, readiness probes.

Protocol summary in docs/architecture.md ("The policy server"); the wire facts of openpi, GR00T and DreamZero are cited where each is implemented.
"""

from __future__ import annotations

from arena.transport import errors as _errors
from arena.transport.client import PolicyClient, endpoint_uri
from arena.transport.codec import Packer, packb, unpackb
from arena.transport.errors import *  # noqa: F403 - every typed error of the wire is the package's (errors.__all__)
from arena.transport.interface import WireClient
from arena.transport.policy_server import PolicyServer, serve_model
from arena.transport.probe import probe_once, wait_until_ready

__all__ = [
    *_errors.__all__,
    "Packer",
    "PolicyClient",
    "PolicyServer",
    "WireClient",
    "endpoint_uri",
    "packb",
    "probe_once",
    "serve_model",
    "unpackb",
    "wait_until_ready",
]
