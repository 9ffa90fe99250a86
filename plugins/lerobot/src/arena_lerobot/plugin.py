"""Entry point ``lerobot`` of group ``arena``: LeRobot serving, the PushT environment, export."""

from arena.hookspecs import hookimpl  # noqa: F401  (the hook implementations follow)
