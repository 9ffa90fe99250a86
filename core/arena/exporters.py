"""``arena export``: the command group where plugins add exporters of a run's recorded episodes.

Core has no exporter of its own; a plugin adds one as a sub-command in its
``arena_register_commands`` hook, e.g. ``arena export lerobot`` (``arena-plugin-lerobot``)::

    @hookimpl
    def arena_register_commands(app):
        from arena.exporters import export_group

        export_group(app).command("lerobot")(export_lerobot)

What an exporter reads: the episodes a run recorded with ``trajectories.enabled``
(:func:`arena.rollout.trajectories.recorded_episodes`).
"""

from __future__ import annotations

from typing import Any

GROUP = "export"
HELP = "Write a run's recorded episodes (trajectories.enabled) in another tool's format; plugins add the formats."


def export_group(app: Any) -> Any:
    """The ``export`` sub-app of the typer ``app``, added (empty) when ``app`` has none yet,
    so any number of plugins add their exporters to one group."""
    import typer

    for group in app.registered_groups:
        if group.name == GROUP:
            return group.typer_instance
    group = typer.Typer(name=GROUP, no_args_is_help=True, help=HELP)
    app.add_typer(group, name=GROUP)
    return group
