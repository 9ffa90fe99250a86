"""The one error type of the planner (spec §0.3).

Every validation failure raises :class:`CosmosPlanError` with a deterministic message; the CLI
maps it to exit code 2 and prints it to stderr prefixed ``ERROR:``.
"""

from __future__ import annotations

from arena.errors import ArenaError


class CosmosPlanError(ArenaError, ValueError):
    """A Cosmos plan input, artifact, record or rendering precondition is invalid."""
