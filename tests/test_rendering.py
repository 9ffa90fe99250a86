"""MuJoCo's OpenGL platform: EGL on an NVIDIA node, OSMesa otherwise, the user's choice first."""

from __future__ import annotations

import pytest

from arena import rendering


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("MUJOCO_GL", "PYOPENGL_PLATFORM", rendering.CHOSEN_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(rendering.sys, "platform", "linux")


def test_a_node_with_an_nvidia_gpu_renders_through_egl(clean_env, monkeypatch):
    monkeypatch.setattr(rendering, "nvidia_egl_available", lambda: True)
    rendering.configure_headless_rendering()
    info = rendering.rendering_info()
    assert info["mujoco_gl"] == "egl" and info["chosen_by"] == "arena" and "NVIDIA" in info["reason"]
    assert rendering.os.environ["PYOPENGL_PLATFORM"] == "egl"


def test_without_a_gpu_it_is_osmesa(clean_env, monkeypatch):
    monkeypatch.setattr(rendering, "nvidia_egl_available", lambda: False)
    rendering.configure_headless_rendering()
    assert rendering.rendering_info()["mujoco_gl"] == "osmesa"


def test_the_users_mujoco_gl_always_wins(clean_env, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "glfw")
    monkeypatch.setattr(rendering, "nvidia_egl_available", lambda: True)
    rendering.configure_headless_rendering()
    assert rendering.rendering_info() == {"mujoco_gl": "glfw", "chosen_by": "user", "reason": None}


def test_nvidia_egl_needs_the_device_node(monkeypatch):
    monkeypatch.setattr(rendering.os.path, "exists", lambda path: False)
    assert rendering.nvidia_egl_available() is False


def test_the_runs_provenance_says_which_backend(tmp_path):
    from arena.results.provenance import collect_provenance

    assert set(collect_provenance(None)["rendering"]) == {"mujoco_gl", "chosen_by", "reason"}
