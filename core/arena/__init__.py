"""arena: evaluate robot foundation-model policies in simulation.

The model runs as a policy server behind a websocket; the simulator runs a thin client
policy. docs/architecture.md describes the data flow
config -> plan -> launch -> rollout -> records -> report, the hooks and the contracts.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("arena-core")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

__all__ = ["ExperimentResult", "__version__", "evaluate"]


def __getattr__(name: str):  # arena.evaluate / arena.ExperimentResult, imported on first use
    if name == "evaluate":
        from arena.evaluation import evaluate

        globals()["evaluate"] = evaluate
        return evaluate
    if name == "ExperimentResult":
        from arena.results.experiment_result import ExperimentResult

        return ExperimentResult
    raise AttributeError(f"module 'arena' has no attribute {name!r}")
