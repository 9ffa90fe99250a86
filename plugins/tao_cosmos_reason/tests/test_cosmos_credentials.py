"""No credentials in plans or job metadata (spec §5.1, §9): any value under a secret-looking key,
and any token-shaped value anywhere, fails and is reported by its path, never echoed."""

import json

import pytest
from typer.testing import CliRunner

from arena_tao_cosmos_reason import verbs
from arena_tao_cosmos_reason.cli import app
from arena_tao_cosmos_reason.credentials import find_credentials, secret_looking
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.job_metadata import validate_metadata

runner = CliRunner()
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"
NGC = "nvapi-" + "x" * 40


@pytest.fixture
def metadata(make_request, workspace):
    sealed = verbs.plan(make_request(backend="cosmos-framework").model_dump(), workspace["root"] / "plan.json")
    return sealed["initial_metadata"]


@pytest.mark.parametrize("where,value", [
    (("environment", "HF_TOKEN"), HF),
    (("environment", "HF_TOKEN"), "plain-looking-secret-value"),
    (("environment", "NGC_KEY"), "abc123"),
    (("slurm", "password"), "hunter2"),
    (("image", "digest"), NGC),
    (("launch_command",), f"torchrun train.py --token {HF}"),
    (("stdout",), "/logs/run.out Authorization: Bearer abcdefghijklmnop"),
    (("launch_command",), "HF_TOKEN=s3cr3tvalue torchrun train.py"),
])
def test_validate_metadata_rejects_credentials_and_names_where(metadata, tmp_path, where, value):
    record = json.loads(json.dumps(metadata))
    target = record
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    with pytest.raises(CosmosPlanError) as err:
        validate_metadata(record)
    message = str(err.value)
    assert message.startswith("SLURM metadata must not contain credentials: $." + ".".join(where)), message
    assert value not in message
    path = tmp_path / "meta.json"
    path.write_text(json.dumps(record))
    result = runner.invoke(app, ["validate-metadata", str(path)])
    assert result.exit_code == 2 and "must not contain credentials" in result.stderr


def test_names_and_flags_are_not_credentials(metadata):
    record = json.loads(json.dumps(metadata))
    record["environment"]["HF_TOKEN"] = "HF_TOKEN"  # a pass-through by name
    record["model"]["revision"]["token_sent"] = True
    record["launch_command"] = "docker run -e HF_TOKEN -e NGC_KEY image"
    assert validate_metadata(record) == {"ok": True}
    assert find_credentials({"cache_keys": {"train": "a" * 64}, "ssh_key_path": "/home/me/.ssh/id", "max_tokens": 64}) == []


@pytest.mark.parametrize("key,secret", [("HF_TOKEN", True), ("HUGGING_FACE_HUB_TOKEN", True), ("NGC_KEY", True),
                                        ("apiKey", True), ("db_password", True), ("client-secret", True),
                                        ("ssh_key_path", False), ("cache_keys", False), ("max_tokens", False),
                                        ("keyframe", False)])
def test_secret_looking_keys(key, secret):
    assert secret_looking(key) is secret


def test_a_token_in_the_request_is_never_sealed(make_request, workspace):
    with pytest.raises(CosmosPlanError, match=r"must not contain credentials .*\$\.planner_request\.system_prompt"):
        verbs.plan(make_request(system_prompt=f"use {HF} for downloads").model_dump(), workspace["root"] / "plan.json")
    assert not (workspace["root"] / "plan.json").exists()
    assert not (workspace["root"] / "run" / "config" / "train.toml").exists()
