"""The openpi ``aloha`` adapter passes arena's conformance check on the ALOHA sim: the scripted
transfer-cube expert's successes survive being served through the adapter's inverse and
replayed by ``pi0_remote`` (``arena.testing.conformance``). The expert reads privileged state
(the cube's pose), so its actions are replayed; the request side is pinned by
``test_openpi_aloha_reference.py``."""

from __future__ import annotations

import os

import pytest

from arena.testing.venvs import benchmark_python

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_the_transfer_cube_expert_survives_the_openpi_aloha_adapter(tmp_path, monkeypatch):
    from arena.testing.conformance import Expert, check_adapter_conformance
    from arena_aloha.expert import AlohaTransferCubeExpert, AlohaTransferCubeExpertConfig
    from arena_openpi.adapters import OpenPIAlohaAdapter

    benchmark_python("aloha", "arena aloha setup")
    monkeypatch.setitem(os.environ, "MUJOCO_GL", os.environ.get("MUJOCO_GL", "osmesa"))
    expert = AlohaTransferCubeExpert(AlohaTransferCubeExpertConfig())
    report = check_adapter_conformance(
        OpenPIAlohaAdapter(),
        Expert(act=lambda obs, i: expert.get_action(None, obs)[i], reset=lambda seed: expert.reset([0], [seed])),
        environment={"type": "aloha", "task": "transfer_cube", "image_height": 48, "image_width": 64},
        # the expert reads the cube's pose: alone it runs without rendering
        expert_environment={"type": "aloha", "task": "transfer_cube", "cameras": []},
        policy={"type": "pi0_remote", "policy_variant": "pi0", "openpi_embodiment_adapter": "aloha",
                "open_loop_horizon": 10},
        seeds=[0, 1],
        max_episode_steps=300,
        chunk_rows=50,
        output_dir=tmp_path,
    )
    assert report.expert_outcomes == report.adapter_outcomes == ["success", "success"]
    assert report.adapter_steps == report.expert_steps
