"""arena plugin wiring: registers the ``arena cosmos-reason`` command group."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_commands(app):
    from arena_tao_cosmos_reason.cli import app as cosmos_app

    app.add_typer(cosmos_app, name="cosmos-reason")
