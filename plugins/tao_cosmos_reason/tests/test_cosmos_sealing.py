"""Spec §10 sealing: T73-T80, at the file and CLI level."""

import json
import os

import pytest

from arena_tao_cosmos_reason import artifact, verbs
from arena_tao_cosmos_reason.errors import CosmosPlanError


@pytest.fixture
def sealed(make_request, workspace):
    path = workspace["root"] / "plan.json"
    verbs.plan(make_request(backend="cosmos-framework").model_dump(), str(path))
    return path


def test_sealed_plan_round_trips_and_holds_no_token(sealed, monkeypatch):
    plan = artifact.load(str(sealed))
    assert plan["plan_artifact"]["schema_version"] == 1 and plan["schema_version"] == 2
    assert plan["planner_request"]["backend"] == "cosmos-framework"
    assert plan["initial_metadata"]["terminal_tao_status"] == "PENDING"
    assert sealed.read_text().endswith("}\n")


def test_t73_flipped_value_is_a_checksum_mismatch(sealed):
    doc = json.loads(sealed.read_text())
    doc["training"]["learning_rate"] = 2e-5
    sealed.write_text(json.dumps(doc))
    with pytest.raises(CosmosPlanError, match="approved plan artifact checksum mismatch: expected [0-9a-f]{64}, found"):
        artifact.load(str(sealed))


def test_t74_unsupported_envelope_version(sealed):
    doc = json.loads(sealed.read_text())
    doc["plan_artifact"]["schema_version"] = 2
    sealed.write_text(json.dumps(doc))
    with pytest.raises(CosmosPlanError, match="unsupported schema version"):
        artifact.load(str(sealed))


def test_t76_remote_plan_artifact_is_rejected(make_request):
    with pytest.raises(CosmosPlanError, match="must be a local controller-side filesystem path"):
        verbs.plan(make_request().model_dump(), "s3://b/plan.json")


def test_t77_crash_during_save_keeps_old_artifact(sealed, monkeypatch):
    before = sealed.read_bytes()
    plan = artifact.load(str(sealed))

    def boom(*args, **kwargs):
        raise OSError("disk went away")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        artifact.save(dict(plan, experiment_id="changed"), str(sealed))
    assert sealed.read_bytes() == before
    assert not [p for p in sealed.parent.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]


def test_t79_render_needs_a_job_id(sealed):
    with pytest.raises(CosmosPlanError, match="requires --tao-job-id from a newly opened job record"):
        verbs.render_slurm_verb(str(sealed), None)


def test_t80_edited_spec_on_disk_is_stale(sealed, workspace):
    verbs.materialize_verb(str(sealed))
    spec = workspace["root"] / "run" / "config" / "train.toml"
    spec.write_text(spec.read_text() + "\n# edited\n")
    with pytest.raises(CosmosPlanError, match="generated config is stale: expected SHA256 .* rerun materialize"):
        verbs.render_slurm_verb(str(sealed), "job-7")


def test_render_reseals_with_job_id_but_keeps_approved_hash(sealed):
    approved = artifact.load(str(sealed))["plan_artifact"]["sha256"]
    verbs.render_slurm_verb(str(sealed), "job-8")
    plan = artifact.load(str(sealed))
    assert plan["planner_request"]["tao_job_id"] == "job-8"
    assert plan["plan_artifact"]["approved_sha256"] == approved != plan["plan_artifact"]["sha256"]
