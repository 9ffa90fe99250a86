"""Models hosted by arena's own policy server (``arena serve NAME``)."""

from arena.servers.model import Model

__all__ = ["Model"]
