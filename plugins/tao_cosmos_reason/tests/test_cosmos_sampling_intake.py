"""Spec §10 sampling, PEFT and run mode: T25-T35 (plans built from real fixture folders)."""

import tomllib

import pytest

from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.planner import build_plan
from arena_tao_cosmos_reason.toml_emit import dump_toml


def test_t25_fps_and_frames_are_exclusive(make_request):
    with pytest.raises(CosmosPlanError, match="fps and frames/nframes are mutually exclusive"):
        build_plan(make_request(backend="cosmos-rl", fps=2, frames=8))


def test_t26_max_frames_needs_fps(make_request):
    with pytest.raises(CosmosPlanError, match="min_frames and max_frames require fps sampling"):
        build_plan(make_request(backend="cosmos-rl", max_frames=64))


def test_t28_daft_options_are_rl_only(make_request):
    with pytest.raises(CosmosPlanError, match=r"DAFT vision options apply only to the cosmos-rl backend: \['fps'\]"):
        build_plan(make_request(backend="cosmos-framework", fps=2))


def test_t29_fps_profile_and_rl_vision_block(make_request):
    plan = build_plan(make_request(backend="cosmos-rl", fps=2, max_frames=64))
    profile = plan["processor_profile"]
    assert (profile["sampling_mode"], profile["frames"], profile["capacity_frames"]) == ("fps", 0, 64)
    vision = tomllib.loads(dump_toml(plan["spec"]))["custom"]["vision"]
    assert vision == {"fps": 2.0, "max_frames": 64, "max_pixels": 81920,
                      "video_decoder": plan["rl_video_runtime"]["video_decoder"]}
    assert "max_pixels" not in profile["vision"]
    assert plan["training"]["vision"]["max_pixels"] == 81920


def test_t31_peft_needs_target_modules(make_request):
    with pytest.raises(CosmosPlanError, match="PEFT requires lora rank, alpha, and at least one target module"):
        build_plan(make_request(training_mode="peft", lora_rank=16, lora_alpha=32))


def test_t32_dense_rejects_active_lora(make_request):
    with pytest.raises(CosmosPlanError, match="dense SFT must not include an active LoRA configuration"):
        build_plan(make_request(training_mode="dense", lora_rank=16))


def test_peft_target_modules_are_split_on_commas(make_request):
    req = make_request(training_mode="peft", lora_rank=8, lora_alpha=16, lora_target_modules=["q_proj, k_proj", "v_proj,"],
                       backend="cosmos-framework")
    plan = build_plan(req)
    assert plan["spec"]["model"]["lora_target_modules"] == "q_proj,k_proj,v_proj"
    assert plan["spec"]["checkpoint"]["keys_to_skip_loading"] == ["optimizer", "scheduler"]


def test_t34_run_mode_sample_limits(make_request):
    with pytest.raises(CosmosPlanError, match="full runs must not contain a smoke/subset sample limit"):
        build_plan(make_request(run_mode="full", train_sample_limit=4))
    with pytest.raises(CosmosPlanError, match="diagnostic runs require at least one explicit sample limit"):
        build_plan(make_request(run_mode="diagnostic"))


def test_t35_each_split_needs_one_record_per_gpu(workspace, make_request):
    from cosmos_fixtures import conversation_split

    ann, media = conversation_split(workspace["root"] / "small", "val4", n=4)
    with pytest.raises(CosmosPlanError, match="at least one record per global GPU"):
        build_plan(make_request(validation_annotation=[str(ann)], validation_media_root=[str(media)]))


def test_child_timeout_fields_are_checked(make_request):
    with pytest.raises(CosmosPlanError, match="child timeout must use HH:MM:SS format"):
        build_plan(make_request(timeout="4h"))
    with pytest.raises(CosmosPlanError, match="greater than zero"):
        build_plan(make_request(timeout="00:00:00"))


def test_required_runtime_paths_are_named(make_request):
    with pytest.raises(CosmosPlanError, match="write_spec is required"):
        build_plan(make_request(write_spec=""))
    with pytest.raises(CosmosPlanError, match="required runtime path is missing: ssh_key_path"):
        build_plan(make_request(ssh_key_path=""))
    with pytest.raises(CosmosPlanError, match="--gpus-per-node is required"):
        build_plan(make_request(gpus_per_node=0))
