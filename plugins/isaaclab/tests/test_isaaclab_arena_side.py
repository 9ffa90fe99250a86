"""The arena side of the isaaclab plugin (any interpreter, no Isaac Lab): config, validation,
dry runs on every launch backend, the expert and its server, the venv set-up's decisions."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from arena import venvs
from arena.testing.plugin_tests import run_arena
from arena_isaaclab.config import IsaacLabConfig
from arena_isaaclab.venv import ISAACLAB_REQUIREMENT, VENV
from arena_isaaclab.expert import FOREARM, SHOULDER_HEIGHT, UPPER_ARM, ReachExpertModel, reach

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
REACH = EXAMPLES / "isaaclab_reach_cpu.yaml"
DROID = EXAMPLES / "isaaclab_arena_droid_pi05.yaml"


def test_exactly_one_source_names_what_to_build():
    with pytest.raises(ValidationError, match="exactly one of task"):
        IsaacLabConfig()
    with pytest.raises(ValidationError, match="got task, env_cfg"):
        IsaacLabConfig(task="Isaac-Cartpole", env_cfg="my_lab.tasks:CartpoleCfg")
    assert IsaacLabConfig(task="Isaac-Cartpole").task_name() == "Isaac-Cartpole"
    arena_env = IsaacLabConfig(isaaclab_arena={"environment": "pick_and_place_maple_table", "embodiment": "droid_abs_joint_pos"})
    assert arena_env.task_name() == "pick_and_place_maple_table"
    assert arena_env.isaaclab_arena.environment_options() == {"embodiment": "droid_abs_joint_pos"}


def test_env_cfg_is_a_code_reference_and_device_is_checked():
    with pytest.raises(ValidationError, match="package.module:Class"):
        IsaacLabConfig(env_cfg="my_lab.tasks.CartpoleCfg")
    with pytest.raises(ValidationError, match="cpu, cuda or cuda:N"):
        IsaacLabConfig(task="Isaac-Cartpole", device="gpu")
    config = IsaacLabConfig(env_cfg="my_lab.tasks:CartpoleCfg", device="cuda:1")
    assert config.code_references() == {"env_cfg": "my_lab.tasks:CartpoleCfg"}
    assert IsaacLabConfig(task="Isaac-Cartpole").code_references() == {}


def _arena(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_arena(*args, cwd=cwd, timeout=300)  # with cwd, TMPDIR: a Slurm dry-run writes scripts there


@pytest.mark.parametrize("backend", ["local", "slurm", "osmo"])
def test_droid_example_validates_and_dry_runs_on_every_backend(tmp_path, backend):
    assert _arena("validate", str(DROID), cwd=tmp_path).returncode == 0
    done = _arena("run", str(DROID), "--backend", backend, "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "pick_and_place_maple_table" in done.stdout


def test_reach_example_validates(tmp_path):
    done = _arena("validate", str(REACH), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 run(s)" in done.stdout


def test_arena_side_never_imports_isaac_lab(tmp_path):
    code = (
        "import sys\n"
        "from arena.config import load_experiment\n"
        f"load_experiment({str(DROID)!r}); load_experiment({str(REACH)!r})\n"
        "import arena_isaaclab.plugin, arena_isaaclab.env, arena_isaaclab.expert, arena_isaaclab.venv\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('isaaclab', 'isaaclab_arena', 'torch', 'warp', 'newton', 'pxr'))\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_plugins_lists_the_environment_the_expert_and_the_command(tmp_path):
    done = _arena("plugins", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    entries = data["plugins"] if isinstance(data, dict) else data
    (isaaclab,) = [p for p in entries if p.get("name") == "isaaclab"]
    text = json.dumps(isaaclab)
    for name in ("arena-plugin-isaaclab", "isaaclab_reach_expert", "isaaclab-reach-expert", '"isaaclab"'):
        assert name in text
    assert "setup" in _arena("isaaclab", "--help", cwd=tmp_path).stdout
    help_text = _arena("isaaclab", "setup", "--help", cwd=tmp_path).stdout
    assert "arena venv setup isaaclab" in help_text and "--full" in help_text and "--if-possible" in help_text


@pytest.mark.skipif(venvs.venv_python("isaaclab").exists(), reason="the Isaac Lab venv exists: runs use it")
def test_building_without_isaac_lab_says_how_to_set_it_up():
    import importlib.util

    if importlib.util.find_spec("isaaclab") is not None:
        pytest.skip("Isaac Lab is installed for this interpreter")
    from arena_isaaclab.env import IsaacLabEnvironment
    from arena_isaaclab.sim.process import IsaacLabSetupError

    with pytest.raises(IsaacLabSetupError, match="arena isaaclab setup"):
        IsaacLabEnvironment(IsaacLabConfig(task="Arena-Reach-Cube-v0"), num_envs=2)


def _tip(q: np.ndarray) -> np.ndarray:
    """Forward kinematics of the reach arm (the expert's model): tip position for joints ``q``."""
    yaw, shoulder, elbow = (float(v) for v in q)
    r = UPPER_ARM * math.sin(shoulder) + FOREARM * math.sin(shoulder + elbow)
    h = SHOULDER_HEIGHT + UPPER_ARM * math.cos(shoulder) + FOREARM * math.cos(shoulder + elbow)
    return np.array([r * math.cos(yaw), r * math.sin(yaw), h])


@pytest.mark.parametrize("target", [(0.3, 0.0, 0.125), (0.2, 0.35, 0.125), (0.45, -0.2, 0.3), (-0.1, 0.3, 0.5)])
def test_expert_inverse_kinematics_puts_the_tip_on_the_target(target):
    q = reach(np.array(target))
    assert q.dtype == np.float32 and q.shape == (3,)
    np.testing.assert_allclose(_tip(q), target, atol=1e-5)


def test_expert_out_of_reach_stretches_towards_the_target():
    q = reach(np.array([2.0, 0.0, 0.3]))
    assert q[2] == pytest.approx(0.0, abs=1e-6)  # elbow straight
    assert _tip(q)[0] == pytest.approx(UPPER_ARM + FOREARM, abs=1e-5)


def test_expert_model_answers_a_chunk_of_one_row_and_refuses_bad_requests():
    model = ReachExpertModel()
    reply = model.infer({"observation/target_pos": np.array([0.3, 0.1, 0.125])})
    assert reply["actions"].shape == (1, 3) and reply["actions"].dtype == np.float32
    with pytest.raises(ValueError, match="target_pos"):
        model.infer({"observation/target_pos": np.array([np.nan, 0.0, 0.0])})


def test_remote_expert_through_arenas_own_server(policy_server):
    from arena.envs.base import Environment
    from arena_isaaclab.expert import ReachExpertRemoteConfig, ReachExpertRemotePolicy
    import gymnasium as gym

    server = policy_server("isaaclab-reach-expert")
    env = Environment.__new__(Environment)
    env.num_envs = 2
    env.action_space = gym.spaces.Box(-3.0, 3.0, (3,), np.float32)
    targets = np.array([[0.3, 0.0, 0.125], [0.25, -0.2, 0.2]], np.float32)
    observation = {"policy": {"target_pos": targets, "joint_pos": np.zeros((2, 3), np.float32)}}
    policy = ReachExpertRemotePolicy(ReachExpertRemoteConfig(remote_host=server.host, remote_port=server.port))
    try:
        policy.start(env)
        policy.reset([0, 1], [0, 1])
        actions = policy.get_action(env, observation)
    finally:
        policy.close()
    np.testing.assert_allclose(actions, np.stack([reach(t) for t in targets]), atol=1e-6)


def _sim_extra() -> list[str]:
    """The ``[sim]`` extra's requirements of the installed plugin, without their markers."""
    from importlib import metadata

    from packaging.requirements import Requirement

    out = []
    for text in metadata.requires("arena-plugin-isaaclab") or []:
        req = Requirement(text)
        if req.marker is not None and req.marker.evaluate({"extra": "sim"}) and not req.marker.evaluate({"extra": ""}):
            req.marker = None
            out.append(str(req))
    return out


def test_the_venv_installs_the_sim_extra_and_isaaclab_without_its_dependencies():
    reqs = _sim_extra()
    assert "torch==2.11.0" in reqs and "warp-lang==1.17.0" in reqs and "newton==1.6.1" in reqs
    assert not any(r.startswith("isaaclab") for r in reqs)
    assert ISAACLAB_REQUIREMENT == "isaaclab==3.0.0"
    assert VENV.distributions == ("arena-plugin-isaaclab[sim]",) and VENV.python == "==3.12.*"
    assert venvs.install_args("arena-plugin-isaaclab[sim]")[-1].endswith("[sim]")
    kitless, full = VENV.steps
    assert kitless.args == ("--no-deps", ISAACLAB_REQUIREMENT) and kitless.unless_installed == ISAACLAB_REQUIREMENT
    assert kitless.unless_option == "full" and full.option == "full" and full.args == (ISAACLAB_REQUIREMENT,)
    assert VENV.python_env == "ARENA_ISAACLAB_PYTHON"  # the variable `arena isaaclab setup` always read


def test_setup_without_python_312_fails_saying_what_to_install(monkeypatch):
    monkeypatch.setattr(venvs, "python_candidates", lambda spec: [])
    with pytest.raises(venvs.NoPythonError, match=r"needs Python ==3\.12\.\*"):
        venvs.setup_venv(VENV)
    with pytest.raises(venvs.VenvError, match=r"the isaaclab venv needs Python ==3\.12"):
        venvs.setup_venv(VENV, python=sys.executable if sys.version_info[:2] != (3, 12) else "/nonexistent/python")


@pytest.mark.parametrize("argv", [["isaaclab", "setup", "--if-possible"], ["venv", "setup", "isaaclab", "--if-possible"]])
def test_setup_if_possible_skips_with_a_reason_when_there_is_no_python_312(monkeypatch, argv):
    from typer.testing import CliRunner

    from arena.cli import app
    from arena.plugins import get_plugin_manager

    if not any(group.name == "isaaclab" for group in app.registered_groups):  # as `arena` itself starts
        get_plugin_manager().register_commands(app)
    monkeypatch.setattr(venvs, "python_candidates", lambda spec: [])
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert "isaaclab: skipped: the isaaclab venv needs Python ==3.12.* and none was found" in " ".join(result.output.split())
    monkeypatch.setattr(venvs, "python_candidates", lambda spec: [])
    failed = CliRunner().invoke(app, argv[:-1])
    assert failed.exit_code == 3 and "none was found" in failed.output
