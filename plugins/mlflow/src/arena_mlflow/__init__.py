"""arena-plugin-mlflow: the ``mlflow`` result sink (:mod:`arena_mlflow.sink`)."""
