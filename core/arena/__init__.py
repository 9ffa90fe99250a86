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

__all__ = ["__version__"]
