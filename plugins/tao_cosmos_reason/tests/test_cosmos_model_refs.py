"""Spec §10 model references and revisions: T13-T23 (Hub served on 127.0.0.1)."""

import json

import pytest

from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.model_inspect import choose_base_model_format, inspect_local_model
from arena_tao_cosmos_reason.model_ref import parse_repo_id, resolve_model_reference
from cosmos_fixtures import write_model


@pytest.mark.parametrize("value", ["https://huggingface.co/nvidia/Cosmos3-Nano/tree/dev",
                                   "hf://models/nvidia/Cosmos3-Nano", "hf_model://nvidia/Cosmos3-Nano/"])
def test_t13_reference_forms_parse_to_one_repo_id(value):
    assert parse_repo_id(value) == "nvidia/Cosmos3-Nano"


def test_t13_url_tree_ref_is_not_used_as_revision(fake_hub):
    rec = resolve_model_reference("https://huggingface.co/nvidia/Cosmos3-Nano/tree/dev")
    assert rec["requested_revision"] == "main"
    assert fake_hub.revisions[0]["path"].endswith("/revision/main")


@pytest.mark.parametrize("value", ["s3://bucket/model", "nvidia/Cosmos3-Nano/extra", "https://huggingface.co/nvidia"])
def test_t14_unsupported_references(value):
    with pytest.raises(CosmosPlanError, match="not a supported Hugging Face model ID or URL"):
        parse_repo_id(value)


def test_t16_branch_resolves_through_hub_api(fake_hub):
    fake_hub.replies = [(200, {"sha": "a" * 40})]
    rec = resolve_model_reference("nvidia/Cosmos3-Nano")
    assert rec["requested_revision"] == "main"
    assert rec["resolved_revision"] == "a" * 40
    assert rec["resolution_source"] == "huggingface_model_info"
    assert rec["url"].endswith("/api/models/nvidia/Cosmos3-Nano/revision/main")
    assert rec["timeout_s"] == 30
    assert [s["path"] for s in fake_hub.seen] == ["/api/models/nvidia/Cosmos3-Nano/revision/main"]
    seen = fake_hub.seen[0]
    assert seen["headers"]["accept"] == "application/json"
    assert seen["headers"]["user-agent"] == "arena-tao-cosmos-reason/0.1"
    assert "authorization" not in seen["headers"]


def test_revision_resolution_asks_the_hub_one_question_and_writes_no_cache(fake_hub, isolated_user_dirs, monkeypatch):
    """Only the revision endpoint is called (no client telemetry, even with the library's telemetry
    left on, as a user has it), and nothing lands in HF_HOME, XDG_CACHE_HOME or HOME."""
    import sys

    monkeypatch.delenv("HF_HUB_DISABLE_TELEMETRY", raising=False)
    if "huggingface_hub.constants" in sys.modules:
        monkeypatch.setattr(sys.modules["huggingface_hub.constants"], "HF_HUB_DISABLE_TELEMETRY", False)
    resolve_model_reference("nvidia/Cosmos3-Nano", "release")
    resolve_model_reference("hf://models/nvidia/Cosmos3-Edge")
    assert [s["path"] for s in fake_hub.seen] == ["/api/models/nvidia/Cosmos3-Nano/revision/release",
                                                  "/api/models/nvidia/Cosmos3-Edge/revision/main"]
    written = [p for p in isolated_user_dirs.rglob("*") if p.is_file()]
    assert written == []


def test_token_is_sent_but_never_returned(fake_hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secretvalue")
    rec = resolve_model_reference("nvidia/Cosmos3-Nano", "release")
    assert fake_hub.seen[0]["headers"]["authorization"] == "Bearer hf_secretvalue"
    assert rec["token_sent"] is True
    assert "hf_secretvalue" not in json.dumps(rec)


def test_forty_hex_revision_needs_no_network(fake_hub):
    rec = resolve_model_reference("nvidia/Cosmos3-Nano", "ABCDEF" + "0" * 34)
    assert rec["resolved_revision"] == "abcdef" + "0" * 34
    assert rec["resolution_source"] == "user_supplied_commit"
    assert fake_hub.seen == []


def test_t17_hub_failures_have_actionable_messages(fake_hub):
    fake_hub.replies = [(403, {"error": "denied"}), (404, {"error": "nope"}), (500, {"error": "boom"}), (200, {"sha": "abc"})]
    expected = ["set HF_TOKEN", "not found: nvidia/Cosmos3-Nano@main", "HTTP 500", "no immutable commit"]
    for text in expected:
        with pytest.raises(CosmosPlanError, match=text):
            resolve_model_reference("nvidia/Cosmos3-Nano")


def test_unreachable_hub_says_retry(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(CosmosPlanError, match="retry when Hub access is available"):
        resolve_model_reference("nvidia/Cosmos3-Nano")


def test_t19_absolute_missing_path_is_a_compute_frame_snapshot():
    rec = resolve_model_reference("/cluster/models/Nano")
    assert rec["kind"] == "target_compute_local_snapshot"
    assert rec["resolved_revision"] is None


def test_t20_nano_format_must_be_chosen_explicitly():
    with pytest.raises(CosmosPlanError, match="must be selected explicitly"):
        choose_base_model_format("nano", "auto", None)


def test_t22_edge_format_rules(tmp_path, make_request):
    with pytest.raises(CosmosPlanError, match="Cosmos3-Edge base_model_format must be cosmos3_edge"):
        choose_base_model_format("edge", "qwen3_vl", None)
    with pytest.raises(CosmosPlanError, match="does not match the supplied local checkpoint"):
        choose_base_model_format("edge", "qwen3_vl", "cosmos3_edge")
    assert choose_base_model_format("edge", "auto", None) == ("cosmos3_edge", "resolved_edge_model")


def test_t22_edge_hub_id_with_commit_and_wrong_format_fails_in_plan(make_request):
    from arena_tao_cosmos_reason.planner import build_plan

    req = make_request(base_model_path_or_uri="nvidia/Cosmos3-Edge", base_model_revision="b" * 40,
                       base_model_format="qwen3_vl")
    with pytest.raises(CosmosPlanError, match="Cosmos3-Edge base_model_format must be cosmos3_edge"):
        build_plan(req)


def test_t23_index_with_missing_or_unsafe_shard(tmp_path):
    missing = write_model(tmp_path / "a", index={"weight_map": {"w": "model-00002.safetensors"}})
    with pytest.raises(CosmosPlanError, match="references a missing weight file"):
        inspect_local_model(str(missing))
    unsafe = write_model(tmp_path / "b", index={"weight_map": {"w": "../x.safetensors"}})
    with pytest.raises(CosmosPlanError, match="unsafe weight path"):
        inspect_local_model(str(unsafe))


def test_fast_model_fingerprint_skips_weight_hashes(tmp_path):
    folder = write_model(tmp_path / "m")
    full, fast = inspect_local_model(str(folder)), inspect_local_model(str(folder), fast=True)
    weights = [e for e in fast["inventory"] if e["path"].endswith(".safetensors")]
    assert weights and all("sha256" not in e for e in weights)
    assert fast["fingerprint_mode"] == "metadata_content_and_weight_sizes"
    assert full["fingerprint"] != fast["fingerprint"]
