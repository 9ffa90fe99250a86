"""The wire layer: openpi-compatible codec, WebSocket client and server, readiness probes.

Protocol summary in docs/architecture.md ("The policy server"); the wire facts of openpi, GR00T and DreamZero are cited where each is implemented.
"""

from __future__ import annotations

from arena.transport.client import PolicyClient, endpoint_uri
from arena.transport.codec import Packer, packb, unpackb
from arena.transport.errors import (
    CodecError,
    ConnectionLost,
    HandshakeError,
    InternalServerError,
    KeepaliveTimeout,
    MissingMetadata,
    NonMapReply,
    NotReady,
    ProtocolError,
    ReadinessTimeout,
    RemoteError,
    RequestTimeout,
    ServerError,
    ServerTraceback,
    ServerUnavailable,
    StringReply,
    TransportError,
    Unauthorized,
    UnexpectedTextFrame,
)
from arena.transport.interface import WireClient
from arena.transport.probe import probe_once, wait_until_ready
from arena.transport.policy_server import PolicyServer, serve_model

__all__ = [
    "CodecError",
    "ConnectionLost",
    "HandshakeError",
    "InternalServerError",
    "KeepaliveTimeout",
    "MissingMetadata",
    "NonMapReply",
    "NotReady",
    "Packer",
    "PolicyClient",
    "PolicyServer",
    "ProtocolError",
    "ReadinessTimeout",
    "RemoteError",
    "RequestTimeout",
    "ServerError",
    "ServerTraceback",
    "ServerUnavailable",
    "StringReply",
    "TransportError",
    "Unauthorized",
    "UnexpectedTextFrame",
    "WireClient",
    "endpoint_uri",
    "packb",
    "probe_once",
    "serve_model",
    "unpackb",
    "wait_until_ready",
]
