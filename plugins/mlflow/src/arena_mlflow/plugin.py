"""Entry point ``mlflow`` of group ``arena``: registers the ``mlflow`` result sink."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_result_sinks(register):
    from arena_mlflow.sink import MlflowSink

    register("mlflow", MlflowSink)
