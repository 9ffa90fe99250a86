"""The openpi ``libero`` adapter passes arena's conformance check on LIBERO: the scripted
pick-and-place expert's successes survive being served through the adapter's inverse and
replayed by ``pi0_remote`` (``arena.testing.conformance``). The expert reads privileged state
(object poses), so its actions are replayed; the request side is pinned by
``test_openpi_libero_reference.py``."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from arena.testing.venvs import benchmark_python

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3000)]


def test_the_pick_place_expert_survives_the_openpi_libero_adapter(tmp_path, monkeypatch):
    from arena.testing.conformance import Expert, check_adapter_conformance
    from arena_libero.env import LiberoConfig
    from arena_libero.expert import LiberoExpertConfig, LiberoPickPlaceExpert
    from arena_openpi.adapters import OpenPILiberoAdapter

    benchmark_python("libero", "arena libero setup")
    monkeypatch.setitem(os.environ, "MUJOCO_GL", os.environ.get("MUJOCO_GL", "osmesa"))
    expert = LiberoPickPlaceExpert(LiberoExpertConfig())
    expert.start(SimpleNamespace(num_envs=1, config=LiberoConfig(suite="libero_spatial", task=0)))
    report = check_adapter_conformance(
        OpenPILiberoAdapter(),
        Expert(act=lambda obs, i: expert.get_action(None, obs)[i], reset=lambda seed: expert.reset([0])),
        environment={"type": "libero", "suite": "libero_spatial", "task": 0, "image_size": 32},
        # the expert reads object poses: alone it runs without the two cameras (~0.3 s a step on osmesa)
        expert_environment={"type": "libero", "suite": "libero_spatial", "task": 0, "cameras": False},
        policy={"type": "pi0_remote", "policy_variant": "pi05", "openpi_embodiment_adapter": "libero",
                "open_loop_horizon": 5},
        seeds=[0],  # one solved episode carries the check; each more seed costs minutes of CI (osmesa)
        max_episode_steps=220,
        chunk_rows=10,
        output_dir=tmp_path,
    )
    assert report.expert_successes >= 1 and report.adapter_outcomes == report.expert_outcomes
    assert report.adapter_steps == report.expert_steps
