"""Entry point ``mlflow`` of group ``arena``: registers the ``mlflow`` result sink."""

from arena.declare import declare

declare(__name__, result_sinks={"mlflow": "arena_mlflow.sink:MlflowSink"})
