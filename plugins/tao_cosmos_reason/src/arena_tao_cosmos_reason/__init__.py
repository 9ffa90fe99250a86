"""Cosmos3 Reason fine-tune and evaluation planner for arena (``arena cosmos-reason``).

Pure planning and rendering: routing, model and dataset contracts, a sealed plan, canonical
TOML training specs, SLURM/Docker job scripts, metadata and metrics. Nothing here runs a GPU.
The behaviour follows ``reference/tao-cosmos-reason.md`` (section numbers cited as "spec §N").
"""

SCHEMA_VERSION = 2
"""Version of the plan document (spec §5.1); the sealing envelope has its own version 1."""
