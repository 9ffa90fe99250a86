"""Entry point ``kinetix`` of group ``arena``: the environment, its baseline, ``arena kinetix``."""

from arena.declare import VenvGroup, declare

declare(
    __name__,
    environments=["arena_kinetix.env:KinetixEnvironment"],
    policies=["arena_kinetix.baseline:KinetixHillClimb"],
    commands={"kinetix": VenvGroup("arena_kinetix.venv:VENV", "Kinetix (kinetix-env, CPU JAX): its venv.")},
)
