"""Models hosted by arena's own policy server (``arena serve NAME``)."""

from arena.models.model import Model

__all__ = ["Model"]
