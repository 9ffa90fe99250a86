"""The Kinetix venv, declared: kinetix-env 3.0.2 with CPU JAX, arena-core and this plugin.

kinetix-env caps JAX at 0.9.0 and brings flax, gymnax, jax2d, jaxgl (and wandb, pygame) with
numpy 2, none of which arena's own interpreter needs, so the ``kinetix`` environment's workers
run under this venv's interpreter. ``arena venv setup kinetix`` creates it (~1.4 GB, ~100 s
from a warm pip cache; nothing is downloaded at run time: the levels ship in the wheel).
"""

from __future__ import annotations

from arena.venvs import VenvSpec

VENV = VenvSpec(
    name="kinetix",
    summary="kinetix-env 3.0.2, JAX 0.9.0 (CPU), flax, jax2d; ~1.4 GB",
    python=">=3.11,<3.13",
    distributions=("arena-plugin-kinetix",),
    requirements=("kinetix-env==3.0.2", "jax[cpu]==0.9.0"),
)
