"""Spec §10 image, SQSH and mounts: T65-T71."""

from pathlib import Path

import pytest

from arena_tao_cosmos_reason.container_paths import parse_mount
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.image import enroot_reference, sqsh_filename
from arena_tao_cosmos_reason.planner import build_plan
from arena_tao_cosmos_reason.preflight import run_preflight


def test_t65_packaged_image_conversion_is_planned_once(workspace, make_request, fake_bin):
    fake_bin("ffprobe", "exit 0")
    cache = workspace["root"] / "c"
    cache.mkdir()
    plan = build_plan(make_request(sqsh_path="", image_tag="registry.example.com/cosmos/framework:test",
                                   sqsh_cache_dir=str(cache)))
    sqsh = plan["image"]["sqsh"]
    assert sqsh["path"] == f"{cache}/framework-test.sqsh"
    assert sqsh["conversion_required"] is True
    assert (f"enroot import --output {cache}/framework-test.sqsh docker://registry.example.com#cosmos/framework:test"
            in sqsh["command"])
    plan["planner_request"] = plan.pop("_request")
    result = run_preflight(plan)
    assert any("must be converted once" in w for w in result["warnings"])
    assert not any("converted" in e for e in result["errors"])


def test_sqsh_name_derivation():
    assert sqsh_filename("nvcr.io/nvidia/tao/tao-toolkit:6.26.0-cosmos-rl") == "tao-toolkit-6.26.0-cosmos-rl.sqsh"


def test_t67_existing_sqsh_mode_needs_a_sqsh_file(make_request):
    with pytest.raises(CosmosPlanError, match="requires the supplied .sqsh path"):
        build_plan(make_request(sqsh_path="/x/image.tar", image_runtime_mode="existing-sqsh"))


def test_t68_enroot_reference_rules():
    with pytest.raises(CosmosPlanError, match="unsupported Enroot image scheme"):
        enroot_reference("oci://reg/repo:tag")
    with pytest.raises(CosmosPlanError, match="must include a registry and repository"):
        enroot_reference("justname")
    assert enroot_reference("docker://nvcr.io/nvidia/x:1") == "docker://nvcr.io#nvidia/x:1"


def test_t70_slurm_paths_must_be_covered_by_a_mount(workspace, make_request):
    with pytest.raises(CosmosPlanError, match="runtime path is not covered by a container mount"):
        build_plan(make_request(container_mount=[f"{workspace['root'] / 'data'}:/data",
                                                 f"{workspace['root'] / 'model'}:/model"]))


def test_t71_mount_syntax():
    with pytest.raises(CosmosPlanError, match=r"container mount must be SOURCE:TARGET\[:OPTIONS\]"):
        parse_mount("/a")


def test_explicit_container_path_must_match_mount(make_request):
    with pytest.raises(CosmosPlanError, match="does not match the explicit mount mapping"):
        build_plan(make_request(container_results_dir="/elsewhere"))


def test_slurm_alignment_rewrites_container_defaults(make_request):
    plan = build_plan(make_request())
    assert plan["container_paths"] == {"spec_path": "/ws/run/config/train.toml", "results_dir": "/ws/run/results",
                                       "checkpoint_dir": "/ws/run/checkpoints", "cache_dir": "/ws/run/cache"}


SOURCE_BUILD = dict(image_runtime_mode="source-build", source_repository="tao-cosmos", source_commit="c0ffee" * 6 + "abcd",
                    source_tree="f" * 40, source_branch="main", source_base_image="nvcr.io/nvidia/pytorch:25.01-py3",
                    source_build_context=".", source_build_timestamp="2025-01-01T00:00:00Z",
                    image_tag="registry.example.com/tao/cosmos:src-c0ffee")


def test_source_build_never_reuses_an_sqsh_or_a_prebuilt_image(workspace, make_request):
    """§3.10: a source build runs only what the clean build produces."""
    old = workspace["root"] / "sqsh" / "old.sqsh"
    old.write_bytes(b"an SQSH from an earlier build")
    with pytest.raises(CosmosPlanError, match=r"source-build runtime mode disallows SQSH reuse: sqsh_path='.*old.sqsh'"):
        build_plan(make_request(**SOURCE_BUILD, sqsh_path=str(old)))
    with pytest.raises(CosmosPlanError, match="source-build runtime mode requires image_tag"):
        build_plan(make_request(**dict(SOURCE_BUILD, image_tag=""), sqsh_path="", sqsh_cache_dir=str(old.parent)))
    cache = workspace["root"] / "sqsh-cache"
    cache.mkdir()
    plan = build_plan(make_request(**SOURCE_BUILD, sqsh_path="", sqsh_cache_dir=str(cache)))
    sqsh = plan["image"]["sqsh"]
    assert sqsh["path"] == f"{cache}/cosmos-src-c0ffee-c0ffeec0ffee.sqsh"
    assert sqsh["conversion_required"] is True and sqsh["reuse_allowed"] is False
    assert sqsh["command"] == (f"enroot import --output {cache}/cosmos-src-c0ffee-c0ffeec0ffee.sqsh "
                               "docker://registry.example.com#tao/cosmos:src-c0ffee")
    assert plan["image"]["tag"] == SOURCE_BUILD["image_tag"]
    Path(sqsh["path"]).write_bytes(b"converted before this plan")
    with pytest.raises(CosmosPlanError, match="already exists and SQSH reuse is disallowed for source builds"):
        build_plan(make_request(**SOURCE_BUILD, sqsh_path="", sqsh_cache_dir=str(cache)))
