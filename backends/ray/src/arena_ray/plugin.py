"""Registers the ``ray`` launch backend (imported when a run uses it: ``ray`` is heavy)."""

from arena.declare import declare

declare(__name__, launch_backends={"ray": "arena_ray.backend:RayBackend"})
