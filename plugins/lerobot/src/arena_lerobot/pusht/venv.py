"""The PushT benchmark venv, declared: gym-pusht 0.1.8 (pymunk, pygame, shapely), arena-core and
this plugin.

gym-pusht pulls pygame, pymunk, shapely and OpenCV, none of which arena-core needs, and the
LeRobot model venv holds torch: so the ``pusht`` environment's workers run under this small venv
of their own (docs/architecture.md, "Environment workers"). :data:`VENV` is the environment's
``default_venv``; ``arena venv setup pusht`` creates it (:mod:`arena.venvs`; ~410 MB; nothing
is downloaded at run time). The gym-pusht pin lives once, in the plugin's ``sim`` extra.
"""

from __future__ import annotations

from arena.venvs import VenvSpec

VENV = VenvSpec(
    name="pusht",
    summary="gym-pusht 0.1.8 (pymunk, pygame, shapely, OpenCV); ~410 MB",
    python=">=3.11,<3.14",
    distributions=("arena-plugin-lerobot[sim]",),
)
