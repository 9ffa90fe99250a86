"""Spec §10 plan arithmetic and spec emission: T53-T64."""

import json
import tomllib

import pytest

from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.planner import build_plan
from arena_tao_cosmos_reason.toml_emit import dump_toml
from cosmos_fixtures import task_aware_split

FW = "cosmos-framework"


def test_t53_framework_nano_arithmetic(make_request):
    plan = build_plan(make_request(backend=FW))
    spec = tomllib.loads(dump_toml(plan["spec"]))
    assert spec["trainer"]["max_iter"] == 2
    assert spec["trainer"]["grad_accum_iter"] == 1
    assert spec["model"]["parallelism"]["data_parallel_shard_degree"] == 8
    assert spec["model"]["parallelism"]["data_parallel_replicate_degree"] == 1
    assert spec["dataloader_train"]["max_samples_per_batch"] == 1
    assert "lora_enabled" not in spec["model"]
    assert spec["scheduler"]["warm_up_steps"] == [0] and spec["scheduler"]["f_start"] == [1.0]


def test_t55_framework_batch_must_divide_by_gpus(make_request):
    with pytest.raises(CosmosPlanError, match="effective global batch must be divisible by total GPUs"):
        build_plan(make_request(backend=FW, effective_global_batch=12))


def test_t56_explicit_per_forward_batch(workspace, make_request):
    from cosmos_fixtures import conversation_split

    ann, media = conversation_split(workspace["root"] / "big", "tr64", n=64)
    plan = build_plan(make_request(backend=FW, effective_global_batch=64, framework_per_forward_batch=8,
                                   train_annotation=[str(ann)], train_media_root=[str(media)]))
    assert plan["spec"]["dataloader_train"]["max_samples_per_batch"] == 8
    assert plan["spec"]["trainer"]["grad_accum_iter"] == 1


def test_task_aware_warmup_epochs_translate_to_framework_steps(workspace, make_request):
    root = workspace["root"]
    tfiles, tmedia = task_aware_split(root / "ta", "tr")
    vfiles, vmedia = task_aware_split(root / "ta", "va")
    plan = build_plan(make_request(backend=FW, epochs=3, warmup=1, train_annotation=[str(f) for f in tfiles],
                                   train_media_root=[str(tmedia)], validation_annotation=[str(f) for f in vfiles],
                                   validation_media_root=[str(vmedia)]))
    assert plan["spec"]["trainer"]["steps_per_epoch"] == 6
    assert plan["spec"]["trainer"]["max_iter"] == 18
    assert plan["spec"]["scheduler"]["warm_up_steps"] == [6]
    assert plan["spec"]["scheduler"]["f_start"] == [0.0]


@pytest.mark.parametrize("warmup,text", [(1.0, "optm_warmup_epochs = 1\n"), (0.5, "optm_warmup_epochs = 0.5\n"),
                                         (2, "optm_warmup_epochs = 2\n")])
def test_t58_rl_warmup_epochs_integer_when_whole(make_request, warmup, text):
    plan = build_plan(make_request(backend="cosmos-rl", warmup=warmup))
    assert text in dump_toml(plan["spec"])


def test_t59_rl_constant_schedule(make_request):
    train = build_plan(make_request(backend="cosmos-rl", scheduler="constant"))["spec"]["train"]
    assert train["optm_decay_type"] == "none"
    assert train["optm_min_lr_factor"] == 1.0


def test_t61_rl_multi_node_command_and_single_node_command(make_request):
    multi = build_plan(make_request(backend="cosmos-rl", nodes=2, effective_global_batch=16))["command"]
    assert 'COSMOS_CONTROLLER_HOST="$MASTER_ADDR:18082"' in multi
    assert 'if [ "${SLURM_PROCID:-0}" == "0" ]; then' in multi
    assert multi.index('"${SLURM_PROCID:-0}" == "0"') < multi.index("launch_controller.sh")
    assert "launch_replica.sh --type policy --ngpus 8 --nnodes 2" in multi
    assert 'exit "$child_rc"' in multi
    single = build_plan(make_request(backend="cosmos-rl"))["command"]
    assert "cosmos-rl --config" in single and "launch_controller.sh" not in single


def test_rl_global_batch_must_match_effective_global_batch(make_request):
    with pytest.raises(CosmosPlanError, match="must equal effective_global_batch"):
        build_plan(make_request(backend="cosmos-rl", effective_global_batch=16))


def test_t62_canonical_toml_is_insertion_order_independent():
    spec = {"z": {"b": [1, 2], "a": "x", "n": None, "sub": {"y": 1.5, "x": True}}, "k": 1e-05, "a": {"q": "é"}}
    reverse = {k: spec[k] for k in reversed(list(spec))}
    reverse["z"] = {k: spec["z"][k] for k in reversed(list(spec["z"]))}
    text = dump_toml(reverse)
    assert text == dump_toml(json.loads(json.dumps(spec, sort_keys=True)))
    parsed = tomllib.loads(text)
    assert parsed == {"k": 1e-05, "a": {"q": "é"}, "z": {"a": "x", "b": [1, 2], "sub": {"x": True, "y": 1.5}}}
    assert "n =" not in text and "k = 1e-05" in text
    with pytest.raises(TypeError):
        dump_toml({"a": [1, None]})


def test_t64_limit_variables_only_for_subset_runs(workspace, make_request):
    full = build_plan(make_request(backend=FW))
    assert not [k for k in full["environment"] if k.endswith("_LIMIT")]
    root = workspace["root"]
    tfiles, tmedia = task_aware_split(root / "ta", "tr")
    vfiles, vmedia = task_aware_split(root / "ta", "va")
    smoke = build_plan(make_request(backend=FW, run_mode="smoke", train_annotation=[str(f) for f in tfiles],
                                    train_media_root=[str(tmedia)], validation_annotation=[str(f) for f in vfiles],
                                    validation_media_root=[str(vmedia)]))
    assert smoke["environment"]["TAO_VIDEO_TRAIN_LIMIT"] == str(2 * 16)
    assert smoke["environment"]["TAO_VIDEO_VAL_LIMIT"] == "8"
    assert smoke["spec"]["trainer"]["max_iter"] == 4
