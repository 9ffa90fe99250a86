"""A SLURM plan whose inputs only the login host can see (spec §1.2, §1.3, §5.5, §7.10).

The fake ``ssh`` of the ``login_host`` fixture keeps the cluster's files in a folder the
controller never sees; the documented sequence plan -> materialize -> preflight -> render-slurm
must work through it, with every remote write atomic and checksum-verified.
"""

import hashlib
import json
import os
import subprocess

import pytest
from typer.testing import CliRunner

from arena_tao_cosmos_reason import artifact, verbs
from arena_tao_cosmos_reason.cli import app
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.frame_files import SshFrame
from cosmos_fixtures import conversation_split, exported, slurm_mounts, write_model

runner = CliRunner()


@pytest.fixture
def cluster(login_host, tmp_path):
    """A model, two splits and an SQSH on the login host under ``<prefix>/proj``; a request for them."""
    proj = f"{login_host.prefix}/proj"
    write_model(login_host.path(f"{proj}/models/nano"))
    conversation_split(login_host.path(f"{proj}/data"), "train", n=8)
    conversation_split(login_host.path(f"{proj}/data"), "val", n=8)
    login_host.path(f"{proj}/sqsh").mkdir(parents=True)
    login_host.path(f"{proj}/sqsh/cosmos.sqsh").write_bytes(b"sqsh")
    key = tmp_path / "id_cluster"
    key.write_text("key")
    request = {
        "platform": "slurm", "backend": "cosmos-framework", "base_model_path_or_uri": f"{proj}/models/nano",
        "base_model_format": "qwen3_vl", "gpus_per_node": 8, "partition": "batch", "account": "acct",
        "train_annotation": [f"{proj}/data/train.json"], "train_media_root": [f"{proj}/data/train_media"],
        "validation_annotation": [f"{proj}/data/val.json"], "validation_media_root": [f"{proj}/data/val_media"],
        "write_spec": f"{proj}/run/config/train.toml", "results_dir": f"{proj}/run/results",
        "checkpoint_dir": f"{proj}/run/checkpoints", "cache_dir": f"{proj}/run/cache",
        "sqsh_path": f"{proj}/sqsh/cosmos.sqsh", "slurm_user": "me", "slurm_host": ["login1"],
        "ssh_key_path": str(key), "container_mount": [f"{proj}:/proj"], "experiment_id": "remote-1",
    }
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    return {"proj": proj, "request": path, "plan": str(tmp_path / "plan.json")}


def _cli(*args):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


def test_plan_materialize_preflight_render_for_a_frame_only_the_login_host_sees(cluster, login_host, tmp_path, fake_bin):
    fake_bin("ffprobe", "exit 1")  # never called: media are probed only in the controller's frame
    proj, plan_path = cluster["proj"], cluster["plan"]
    _cli("plan", "--plan-artifact", plan_path, "--request", str(cluster["request"]))
    plan = artifact.load(plan_path)
    assert plan["input_frame"] == {"kind": "slurm_remote", "verified_host": "login1",
                                   "inspection_transport": "repository_helper_streamed_over_ssh"}
    spec_on_host = login_host.path(f"{proj}/run/config/train.toml")
    assert not spec_on_host.exists() and not os.path.exists(proj)
    missing = runner.invoke(app, ["render-slurm", "--plan-artifact", plan_path, "--tao-job-id", "j1"])
    assert missing.exit_code == 2 and "generated config is missing at login1:" in missing.stderr

    done = json.loads(_cli("materialize", "--plan-artifact", plan_path))
    assert done["config"]["frame"] == "slurm_remote" and done["config"]["host"] == "login1"
    assert hashlib.sha256(spec_on_host.read_bytes()).hexdigest() == done["config"]["sha256"]
    assert oct(spec_on_host.stat().st_mode & 0o777) == "0o640"
    assert not [p for p in spec_on_host.parent.iterdir() if p.name.startswith(".")]  # no temporary left behind

    checked = json.loads(_cli("preflight", "--plan-artifact", plan_path))
    assert checked["ok"] is True, checked
    script_path = tmp_path / "job.sbatch"
    _cli("render-slurm", "--plan-artifact", plan_path, "--tao-job-id", "j1", "--render-output", str(script_path))
    script = script_path.read_text()
    assert slurm_mounts(script) == [(proj, "/proj", "")]
    env = exported(script)
    assert env["TAO_VIDEO_TRAIN_ANNOTATION"] == "/proj/data/train.json"
    assert env["VLM_SAFETENSORS_PATH"] == "/proj/models/nano"
    assert env["TAO_STATUS_FILE"] == "/proj/run/results/j1/status.json"
    assert "--sft-toml=/proj/run/config/train.toml" in script
    assert f"#SBATCH --output={proj}/run/results/slurm-%j.out" in script
    assert f"export TAO_CHILD_EXIT_FILE={proj}/run/results/j1/child_exit_code" in script
    assert f"--container-image={proj}/sqsh/cosmos.sqsh" in script

    calls = login_host.log.read_text().splitlines()
    assert calls and all("BatchMode=yes" in c and "StrictHostKeyChecking=yes" in c and "me@login1" in c for c in calls)

    spec_on_host.write_text(spec_on_host.read_text() + "# edited on the cluster\n")
    stale = runner.invoke(app, ["render-slurm", "--plan-artifact", plan_path, "--tao-job-id", "j2"])
    assert stale.exit_code == 2 and "generated config is stale" in stale.stderr and "rerun materialize" in stale.stderr


def test_preflight_checks_the_inputs_on_the_login_host(cluster, login_host):
    _cli("plan", "--plan-artifact", cluster["plan"], "--request", str(cluster["request"]))
    login_host.path(f"{cluster['proj']}/data/val.json").unlink()
    login_host.path(f"{cluster['proj']}/sqsh/cosmos.sqsh").unlink()
    result = runner.invoke(app, ["preflight", "--plan-artifact", cluster["plan"]])
    assert result.exit_code == 1
    errors = json.loads(result.stdout)["errors"]
    assert any(e.startswith("validation_annotation is not readable on the target SLURM frame (login1)") for e in errors)
    assert any("SQSH" in e and "missing on the target compute frame" in e for e in errors), errors


def test_retry_plan_of_a_remote_frame_writes_the_new_spec_on_the_login_host(cluster, login_host, tmp_path):
    _cli("plan", "--plan-artifact", cluster["plan"], "--request", str(cluster["request"]))
    attempt = f"{cluster['proj']}/run/attempt-2"
    out = tmp_path / "retry.json"
    inventory = tmp_path / "nodes.txt"
    inventory.write_text("NodeName=n1 State=IDLE Partitions=batch Gres=gpu:h100:8 Comment=(null)\n"
                         "NodeName=n2 State=DOWN Partitions=batch Gres=gpu:h100:8 Comment=(null)\n")
    result = verbs.retry_plan(cluster["plan"], "job-2", f"{attempt}/config/train.toml", "/proj/run/attempt-2/config/train.toml",
                              [], False, inventory, out)
    remote_spec = login_host.path(f"{attempt}/config/train.toml")
    assert hashlib.sha256(remote_spec.read_bytes()).hexdigest() == result["config"]["sha256"]
    script = verbs.render_slurm_verb(out, "job-2")
    assert exported(script)["TAO_STATUS_FILE"] == "/proj/run/attempt-2/results/job-2/status.json"
    assert "#SBATCH --exclude=n2" in script


def test_remote_write_is_verified_against_what_was_sent(tmp_path):
    def login_host_that_mangles(argv, input, **kwargs):
        assert argv[0] == "ssh" and "umask 077" in argv[-1] and "mv -f" in argv[-1]
        return subprocess.CompletedProcess(argv, 0, stdout=f"{'0' * 64}  /x/train.toml\n", stderr="")

    frame = SshFrame("me", "login1", str(tmp_path / "key"), run=login_host_that_mangles)
    with pytest.raises(CosmosPlanError, match="remote config checksum mismatch for login1:/x/train.toml"):
        frame.write_text("/x/train.toml", "[job]\n")

    def unreachable(argv, input, **kwargs):
        return subprocess.CompletedProcess(argv, 255, stdout="", stderr="ssh: connect to host login1 port 22: refused")

    with pytest.raises(CosmosPlanError, match="ssh to me@login1 failed .exit 255.: ssh: connect"):
        SshFrame("me", "login1", str(tmp_path / "key"), run=unreachable).sha256("/x/train.toml")
