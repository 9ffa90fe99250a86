"""Entry point ``kinetix`` of group ``arena``: the environment, its baseline, ``arena kinetix``."""

from arena.declare import VenvGroup, declare

declare(
    __name__,
    environments={"kinetix": "arena_kinetix.env:KinetixEnvironment"},
    policies={"kinetix_hill_climb": "arena_kinetix.baseline:KinetixHillClimb"},
    commands={"kinetix": VenvGroup("arena_kinetix.venv:VENV", "Kinetix (kinetix-env, CPU JAX): its venv.")},
)
