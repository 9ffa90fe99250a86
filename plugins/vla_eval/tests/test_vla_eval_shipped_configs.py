"""vla-eval's model-server configs as shipped (``policy.server_config``), at the level a user sees.

vla-eval 0.8.0's wheel ships the model-server scripts (``vla_eval/model_servers/*.py``) but no
YAML config: those live in its checkout (``configs/model_servers/...``), name their script
relative to the checkout's root (``script: "src/vla_eval/model_servers/lerobot.py"``) and
``extends:`` a ``_base.yaml`` that sets ``args.port``. So these tests lay out a checkout the
same way, the script being the installed package's own file, and run arena from another
directory: ``arena validate`` and ``arena run --dry-run`` resolve the script, name ``uv`` when
it is missing, follow the environment's embodiment and the machine's GPUs, and a run records
the model's identity (config, script, checkpoint).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
import yaml

from arena.testing.plugin_tests import OSMESA, run_arena

pytest.importorskip("vla_eval")

pytestmark = pytest.mark.timeout(240)


def _checkout(root: Path, script_source: Path, args: dict) -> Path:
    """A vla-evaluation-harness checkout's layout: ``configs/model_servers/lerobot/{_base,
    pi05_libero}.yaml`` (the child ``extends`` the base, which names the script from the root
    and sets ``args.port``) and ``src/vla_eval/model_servers/lerobot.py``."""
    script = root / "src" / "vla_eval" / "model_servers" / "lerobot.py"
    script.parent.mkdir(parents=True)
    shutil.copy(script_source, script)
    configs = root / "configs" / "model_servers" / "lerobot"
    configs.mkdir(parents=True)
    (configs / "_base.yaml").write_text(yaml.safe_dump({"script": "src/vla_eval/model_servers/lerobot.py",
                                                        "args": {"port": 8000, **args.pop("_base", {})}}))
    (configs / "pi05_libero.yaml").write_text(yaml.safe_dump({"extends": "_base.yaml", "args": args}))
    return configs / "pi05_libero.yaml"


def _installed_lerobot_script() -> Path:
    import vla_eval.model_servers as servers

    return Path(servers.__file__).parent / "lerobot.py"


def _experiment(config: Path, environment: dict, **policy) -> dict:
    return {
        "launch": {"backend": "local", "local": {"jobs": 1}},
        "shared": {"environment_builder": {"num_envs": 1, "seed": 0},
                   "rollout_limit": {"num_episodes": 1, "max_episode_steps": 3}},
        "runs": {"pi05": {"environment": environment,
                          "policy": {"type": "vla_eval_remote", "server_config": str(config), **policy}}},
    }


def _uv_double(bin_dir: Path) -> Path:
    """A ``uv`` on PATH whose ``uv run SCRIPT ARGS`` is ``python SCRIPT ARGS`` (this interpreter):
    the machine has no uv; what matters here is the command arena gives it."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    uv = bin_dir / "uv"
    uv.write_text(f'#!/bin/sh\n[ "$1" = run ] && shift\nexec {sys.executable} "$@"\n')
    uv.chmod(uv.stat().st_mode | stat.S_IXUSR)
    return bin_dir


METAWORLD = {"type": "metaworld", "task": "reach-v3", "cameras": True, "image_size": 64}


def test_a_shipped_config_runs_its_script_from_the_checkout_whatever_the_working_directory(tmp_path):
    config = _checkout(tmp_path / "vla-evaluation-harness", _installed_lerobot_script(),
                       {"_base": {"device": "cuda"}, "policy_type": "pi05",
                        "checkpoint": "lerobot/pi05_libero_finetuned", "image_keys": {"agentview": "observation.images.image"}})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = elsewhere / "exp.yaml"
    path.write_text(yaml.safe_dump(_experiment(config, METAWORLD, server_args={"device": "cpu"})))
    env = {"PATH": f"{_uv_double(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}", "CUDA_VISIBLE_DEVICES": ""}
    dry = run_arena("run", str(path), "--dry-run", "--output-dir", str(elsewhere / "out"), cwd=elsewhere, env=env)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    script = tmp_path / "vla-evaluation-harness" / "src" / "vla_eval" / "model_servers" / "lerobot.py"
    text = " ".join(dry.stdout.split())
    # cmd_serve's command, the script found from the config's checkout, the address arena's
    assert (f"uv run {script} --args.device=cpu --args.checkpoint=lerobot/pi05_libero_finetuned "
            "'--args.image_keys={\"agentview\": \"observation.images.image\"}' --args.policy_type=pi05 --address 127.0.0.1:") in text, text
    assert "--port=8000" not in text and "--args.port" not in text
    # no GPU here (CUDA_VISIBLE_DEVICES empty): the server asks for none, so the plan can start it
    assert "cannot start" not in text and "GPUs: none asked for" in text, text


def test_validate_names_uv_when_it_is_missing_and_run_refuses_before_starting_anything(tmp_path):
    config = _checkout(tmp_path / "ve", _installed_lerobot_script(), {"checkpoint": "lerobot/pi05_libero_finetuned"})
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_experiment(config, METAWORLD, server_gpus=0)))
    no_uv = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "uv").exists())
    validated = run_arena("validate", str(path), cwd=tmp_path, env={"PATH": no_uv})
    assert validated.returncode == 0, validated.stdout + validated.stderr
    said = " ".join(validated.stderr.split())
    # the missing program is named first, before any other caveat
    assert said.startswith("warning: run pi05: `uv` is not on PATH, and server task 'vla-eval-pi05_libero' starts with it"), said
    ran = run_arena("run", str(path), "--output-dir", str(tmp_path / "out"), cwd=tmp_path, env={"PATH": no_uv})
    assert ran.returncode == 2 and "`uv` is not on PATH" in " ".join(ran.stderr.split()), ran.stdout + ran.stderr
    assert not (tmp_path / "out" / "pi05").exists()


def test_a_missing_script_is_named_at_validate_with_where_arena_looked(tmp_path):
    config = _checkout(tmp_path / "ve", _installed_lerobot_script(), {})
    (tmp_path / "ve" / "src" / "vla_eval" / "model_servers" / "lerobot.py").unlink()
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_experiment(config, METAWORLD, server_gpus=0)))
    validated = run_arena("validate", str(path), cwd=tmp_path)
    said = " ".join(validated.stderr.split())
    assert validated.returncode == 2, validated.stdout + validated.stderr
    assert "src/vla_eval/model_servers/lerobot.py" in said and "each directory above it" in said, said


def test_embodiment_follows_the_environment_and_another_environments_is_refused_at_validate(tmp_path):
    pytest.importorskip("arena_libero", reason="the LIBERO environment's config (arena-plugin-libero)")
    from arena.config import load_experiment

    config = _checkout(tmp_path / "ve", _installed_lerobot_script(), {})
    libero = {"type": "libero", "suite": "libero_spatial", "task": 0}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_experiment(config, libero, server_gpus=0)))
    assert load_experiment(path).runs["pi05"].policy.embodiment == "libero"
    path.write_text(yaml.safe_dump(_experiment(config, libero, server_gpus=0, embodiment="metaworld")))
    validated = run_arena("validate", str(path), cwd=tmp_path)
    said = " ".join(validated.stderr.split())
    assert validated.returncode == 2 and "policy.embodiment 'metaworld' is the adapter of arena's 'metaworld' environment, not of 'libero'" in said, said


@pytest.mark.slow
def test_every_record_names_the_config_the_script_and_the_checkpoint_of_the_model(tmp_path):
    from arena.results.run_summary import collect_run_records

    dummy = tmp_path / "dummy_server.py"
    dummy.write_text("from arena_vla_eval.dummy import main\n\nmain()\n")
    config = _checkout(tmp_path / "ve", dummy, {"chunk_size": 2, "checkpoint": "org/model-7b"})
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_experiment(config, METAWORLD, server_startup_timeout_s=120)))
    env = {**OSMESA, "PATH": f"{_uv_double(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}", "CUDA_VISIBLE_DEVICES": ""}
    ran = run_arena("run", str(path), "--output-dir", str(tmp_path / "out"), cwd=tmp_path, env=env, timeout=200)
    records = collect_run_records(tmp_path / "out" / "pi05")
    assert [(r.outcome, r.error) for r in records] == [("timeout", None)], ran.stdout + ran.stderr
    script = str(tmp_path / "ve" / "src" / "vla_eval" / "model_servers" / "lerobot.py")
    assert records[0].policy_extras["vla_eval"]["model"] == {
        "server_config": str(config), "script": script, "checkpoint": "org/model-7b"}
    run_result = json.loads((tmp_path / "out" / "pi05" / "run_result.json").read_text())
    assert run_result["model"]["checkpoint"] == "org/model-7b"


def test_a_policy_built_outside_a_run_without_embodiment_says_to_name_it():
    from arena.errors import ConfigError

    from arena_vla_eval.policy import VlaEvalRemoteConfig, VlaEvalRemotePolicy

    with pytest.raises(ConfigError, match="policy.embodiment is unset"):
        VlaEvalRemotePolicy(VlaEvalRemoteConfig())
    assert VlaEvalRemotePolicy(VlaEvalRemoteConfig(embodiment="libero")).adapter.action_dim == 7
