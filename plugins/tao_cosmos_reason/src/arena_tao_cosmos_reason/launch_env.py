"""Runtime environment variables and the container launch command (spec §6.8-6.9)."""

from __future__ import annotations

import json

from arena_tao_cosmos_reason.annotations import TASK_AWARE
from arena_tao_cosmos_reason.routing import FRAMEWORK

METADATA_ENV_ALLOWLIST = (
    "PYTHONUNBUFFERED", "PYTHONHASHSEED", "NCCL_DEBUG", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "PYTORCH_CUDA_ALLOC_CONF",
    "NVIDIA_DRIVER_CAPABILITIES", "CUDA_FORWARD_COMPAT", "FORCE_QWENVL_VIDEO_READER", "TAO_SFT_BATCH_THREADS",
    "TAO_PYNV_FRAME_TRANSFER", "TAO_PYNV_VIDEO_CACHE_SIZE", "TAO_PYNV_DECODER_CACHE_SIZE", "COSMOS_CACHE",
    "TAO_VIDEO_CACHE_SIZE", "TAO_FRAMEWORK_SFT_PROCESS_THREADS", "TAO_VIDEO_DECODER_DEVICE", "TAO_VIDEO_DECODER_THREADS",
)
TORCHRUN = "/workspace/.venv/bin/torchrun"
RL_PYTHON = "/opt/venv/cosmos_rl/bin/python"
RL_CONTROLLER_PORT = 18082


def environment(ctx: dict, job_id: str) -> dict[str, str]:
    """Name -> value for every runtime variable; credentials never appear (names only, at render)."""
    req, c, cont = ctx["req"], ctx["contract"], ctx["container"]
    env = {
        "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": str(c["seed"]), "NCCL_DEBUG": req.nccl_debug,
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "PYTORCH_CUDA_ALLOC_CONF": req.cuda_allocator,
        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility,video", "TAO_DATALOADER_SEED": str(c["seed"]),
        "TAO_JOB_ID": job_id, "TAO_API_JOB_ID": job_id, "TAO_RESULTS_ROOT": cont["results_dir"],
        "TAO_API_RESULTS_DIR": cont["results_dir"], "TAO_STATUS_FILE": f"{cont['results_dir']}/{job_id}/status.json",
    }
    if ctx["decoder_artifact"]["container_map"]:
        env["TAO_VIDEO_OVERRIDE_MAP"] = ctx["decoder_artifact"]["container_map"]
    rt, data = ctx["video_runtime"], ctx["container_data"]
    if ctx["backend"] == FRAMEWORK:
        prof = ctx["profile"]
        env.update({
            "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
            "VLM_SAFETENSORS_PATH": ctx["prepared_model_container_path"],
            "IMAGINAIRE_OUTPUT_ROOT": cont["checkpoint_dir"], "TAO_VIDEO_DATASET_FAMILY": ctx["family"],
            "TAO_VIDEO_TRAIN_ANNOTATIONS": json.dumps(data["train_annotations"]),
            "TAO_VIDEO_VAL_ANNOTATIONS": json.dumps(data["validation_annotations"]),
            "TAO_VIDEO_TRAIN_MEDIA_ROOTS": json.dumps(data["train_media_roots"]),
            "TAO_VIDEO_VAL_MEDIA_ROOTS": json.dumps(data["validation_media_roots"]),
            "TAO_VIDEO_TRAIN_ANNOTATION": data["train_annotations"][0],
            "TAO_VIDEO_VAL_ANNOTATION": data["validation_annotations"][0],
            "TAO_VIDEO_TRAIN_MEDIA": data["train_media_roots"][0], "TAO_VIDEO_VAL_MEDIA": data["validation_media_roots"][0],
            "TAO_VIDEO_NUM_FRAMES": str(prof["frames"]), "TAO_VIDEO_FRAME_WIDTH": str(prof["frame_width"]),
            "TAO_VIDEO_FRAME_HEIGHT": str(prof["frame_height"]), "TAO_VIDEO_SYSTEM_PROMPT": c["system_prompt"],
            "TAO_VIDEO_MAX_PIXELS": str(prof["max_pixels"]), "TAO_VIDEO_CACHE_SIZE": str(rt["video_cache_size"]),
            "TAO_VIDEO_DECODER_DEVICE": "cuda", "TAO_VIDEO_DECODER_THREADS": str(rt["decoder_threads"]),
            "TAO_FRAMEWORK_SFT_PROCESS_THREADS": str(rt["process_threads"]),
            "TAO_FRAMEWORK_DATALOADER_NUM_WORKERS": str(rt["dataloader_workers"]),
            "TAO_FRAMEWORK_DATALOADER_PREFETCH_FACTOR": str(rt["prefetch_factor"]),
            "TAO_FRAMEWORK_VALIDATION_BATCH_SIZE": str(req.validation_batch_size),
            "TAO_FRAMEWORK_VALIDATION_SHARD_STRATEGY": rt["validation_shard_strategy"],
            "TAO_FRAMEWORK_VALIDATION_VIDEO_FEATURE_CACHE_SIZE": str(rt["validation_feature_cache_size"]),
            "TAO_FRAMEWORK_VALIDATION_PROCESSED_VIDEO_CACHE_SIZE": str(rt["validation_processed_video_cache_size"]),
        })
        limits = ctx["selected"]["limits"]
        if req.run_mode != "full":
            if "train" in limits:
                multiplier = 2 if ctx["family"] == TASK_AWARE else 1
                env["TAO_VIDEO_TRAIN_LIMIT"] = str(limits["train"] * multiplier)
            if "validation" in limits:
                env["TAO_VIDEO_VAL_LIMIT"] = str(limits["validation"])
        if req.framework_baked_overlay_pythonpath:
            env["PYTHONPATH"] = req.framework_baked_overlay_pythonpath
    else:
        env.update({"COSMOS_SFT_REQUIRE_VISUAL_GRADIENTS": "1", "FORCE_QWENVL_VIDEO_READER": rt["reader"],
                    "TAO_SFT_BATCH_THREADS": str(rt["batch_threads"]),
                    "TAO_VALIDATION_VIDEO_FEATURE_CACHE_SIZE": str(rt["validation_feature_cache_size"])})
        if rt["profile"] == "pynv-device-rgbp":
            env.update({"TAO_PYNV_FRAME_TRANSFER": "device_rgbp", "TAO_PYNV_VIDEO_CACHE_SIZE": str(rt["video_cache_size"]),
                        "TAO_PYNV_DECODER_CACHE_SIZE": str(rt["decoder_cache_size"])})
        if req.rl_dataset_cache_mode == "prewarm" and req.run_mode == "full":
            env["COSMOS_CACHE"] = cont["cache_dir"]
        if req.rl_baked_overlay_pythonpath:
            env["PYTHONPATH"] = req.rl_baked_overlay_pythonpath
    return env


def rl_hook(family: str) -> str:
    module = "tao_vl_reason_daft_sft_example" if family == TASK_AWARE else "tao_sft_example"
    return f"cosmos_rl.tools.custom_hooks.{module}"


def command(ctx: dict) -> str:
    """The container command that starts training on every node (spec §6.8)."""
    req, spec = ctx["req"], ctx["container"]["spec_path"]
    nodes, gpus = req.nodes, req.gpus_per_node
    if ctx["backend"] == FRAMEWORK:
        return (f"{TORCHRUN} --nproc_per_node={gpus} --nnodes={nodes} --node_rank=${{SLURM_PROCID:-0}} "
                f"--master_addr=${{MASTER_ADDR:-127.0.0.1}} --master_port=${{MASTER_PORT:-29500}} "
                f"-m cosmos_framework.scripts.train --sft-toml={spec} --")
    module = rl_hook(ctx["family"])
    lines = [
        f'hook="$({RL_PYTHON} -c \'import importlib.util as u; print(u.find_spec("{module}").origin)\')"',
        'test -f "$hook"',
    ]
    if req.rl_baked_overlay_pythonpath:
        lines.append('case "$hook" in /tao-patches/*) ;; *) echo "Cosmos-RL hook is not under /tao-patches/: $hook" >&2; exit 2;; esac')
    if nodes == 1:
        lines.append(f'cosmos-rl --config {spec} "$hook"')
    else:
        lines += [
            f'export COSMOS_CONTROLLER_HOST="$MASTER_ADDR:{RL_CONTROLLER_PORT}"',
            'controller_pid=""',
            'if [ "${SLURM_PROCID:-0}" == "0" ]; then',
            f'  launch_controller.sh --port {RL_CONTROLLER_PORT} --config {spec} --script "$hook" &',
            '  controller_pid=$!',
            'fi',
            'sleep 10',
            'set +e',
            f'launch_replica.sh --type policy --ngpus {gpus} --nnodes {nodes} '
            '--rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT" --script "$hook"',
            'child_rc=$?',
            'set -e',
            'if [ -n "$controller_pid" ]; then kill "$controller_pid" 2>/dev/null || true; fi',
            'exit "$child_rc"',
        ]
    return "\n".join(lines)


def metadata_environment(env: dict[str, str]) -> dict[str, str]:
    """Only the reproducibility allow-list (spec §6.9)."""
    return {k: env[k] for k in METADATA_ENV_ALLOWLIST if k in env}
