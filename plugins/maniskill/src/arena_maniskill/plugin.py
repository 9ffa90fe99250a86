"""Entry point ``maniskill`` of group ``arena``: the ManiSkill3 environment and its experts."""

from arena.hookspecs import hookimpl  # noqa: F401  (the hook implementations follow)
