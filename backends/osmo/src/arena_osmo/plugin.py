"""Registers the ``osmo`` launch backend (imported when a run uses it)."""

from arena.declare import declare

declare(__name__, launch_backends={"osmo": "arena_osmo.backend:OsmoBackend"})
