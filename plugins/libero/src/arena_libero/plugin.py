"""Entry point ``libero`` of group ``arena``: the environment, the scripted expert, ``arena libero``."""

from arena.declare import declare

declare(
    __name__,
    environments={"libero": "arena_libero.env:LiberoEnvironment"},
    policies={"libero_pick_place_expert": "arena_libero.expert:LiberoPickPlaceExpert"},
    commands={"libero": "arena_libero.cli:app"},
)
