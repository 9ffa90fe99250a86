"""The preflight contract carried by the plan, and the read-only ``preflight`` verb (spec §7.7).

The container assertion program is backend-owned text: it is embedded once in the training
step and never run on the controller.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from arena_tao_cosmos_reason.compute import check_gpu_architecture
from arena_tao_cosmos_reason.container_paths import check_accesses
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.frame_files import LocalFrame

ASSERTION_TAGS = ("cuda_available", "device_count", "backend_import", "converter_import", "decoder_profile",
                  "gpu_memory", "nccl_probe")
STARTUP_OK = "TAO_COSMOS_PACKAGED_RUNTIME_STARTUP_OK"
FREE_SPACE_GIB = 384


def assertion_program(backend_module: str, gpus: int, env_expect: dict[str, str]) -> str:
    """The container startup assertions as one ``python3 -c`` program (opaque to the plan)."""
    expect = json.dumps(env_expect, sort_keys=True)
    return "\n".join([
        "import importlib, json, os, sys",
        "def fail(tag, why):",
        "    print(f'TAO_PREFLIGHT_ASSERTION_FAILED:{tag}: {why}', file=sys.stderr); sys.exit(3)",
        "import torch",
        "torch.cuda.is_available() or fail('cuda_available', 'CUDA is not available')",
        f"torch.cuda.device_count() == {gpus} or fail('device_count', f'expected {gpus} GPUs, found {{torch.cuda.device_count()}}')",
        "try:",
        f"    importlib.import_module({backend_module!r})",
        "except Exception as exc:",
        "    fail('backend_import', repr(exc))",
        "try:",
        "    importlib.util.find_spec('cosmos_framework.scripts.convert_model_to_vlm_safetensors')",
        "except Exception as exc:",
        "    fail('converter_import', repr(exc))",
        f"expected = json.loads({expect!r})",
        "bad = {k: os.environ.get(k) for k, v in expected.items() if os.environ.get(k) != v}",
        "bad and fail('decoder_profile', json.dumps(bad))",
        "(torch.cuda.get_device_properties(0).total_memory >> 30) >= 30 or fail('gpu_memory', 'less than 30 GiB')",
        "import torch.distributed as dist",
        "try:",
        "    dist.init_process_group('nccl', init_method='tcp://127.0.0.1:29512', rank=0, world_size=1)",
        "    t = torch.ones(1, device='cuda'); dist.all_reduce(t, op=dist.ReduceOp.MIN); dist.all_reduce(t, op=dist.ReduceOp.MAX)",
        "    dist.destroy_process_group()",
        "except Exception as exc:",
        "    fail('nccl_probe', repr(exc))",
    ])


def preflight_contract(ctx: dict) -> dict:
    req = ctx["req"]
    backend_module = "cosmos_framework" if ctx["backend"] == "cosmos-framework" else "cosmos_rl"
    env_expect = {k: ctx["environment"][k] for k in ("FORCE_QWENVL_VIDEO_READER", "TAO_VIDEO_DECODER_DEVICE")
                  if k in ctx["environment"]}
    program = assertion_program(backend_module, req.gpus_per_node, env_expect)
    sqsh = (ctx["image"].get("sqsh") or {}).get("path")
    return {
        "submission_host": ["command -v ssh"] if req.platform == "slurm" else ["docker version"],
        "target_compute_node": ["command -v enroot", "srun --help | grep -q -- --container-image",
                                f"test -r {sqsh}" if sqsh else "true", "df -BG <results_dir> <checkpoint_dir>",
                                "nvidia-smi --query-gpu=name,memory.total --format=csv"] if req.platform == "slurm" else [],
        "container_runtime": "one-node srun (or docker run --rm --gpus) of container_startup",
        "container_startup": program,
        "assertion_tags": list(ASSERTION_TAGS),
        "checks": ["CUDA available and device count equals gpus_per_node", "backend modules and converter import",
                   "decoder profile matches the plan", "GPU memory >= 30 GiB", "single-rank NCCL MIN/MAX all-reduce",
                   f"{FREE_SPACE_GIB} GiB free result/checkpoint space"],
    }


def run_preflight(plan: dict, frame=None, which=shutil.which, run=subprocess.run, probe_limit: int = 4) -> dict:
    """Read-only readiness checks; ``ok`` is false when any error is found.

    Checks the submission host's tools and SSH key; that every host path the container reads or
    writes is covered by the mounts the render will use, at the path the plan uses; that the
    inputs are readable and the outputs have a writable parent in the plan's compute frame (over
    ssh for a remote frame); the SQSH; the GPU architecture; and, on a local frame, decodes a few
    media files with ``ffprobe``.
    """
    if plan.get("kind") == "cosmos_evaluation_plan":
        raise CosmosPlanError("preflight checks a sealed training plan; an evaluation plan inherits its checks")
    frame = frame or LocalFrame()
    req = plan["planner_request"]
    errors, warnings = [], []
    slurm = req["platform"] == "slurm"
    local = plan["input_frame"]["kind"] == "submission_host"
    where = "submission host" if local else f"target SLURM frame ({plan['input_frame']['verified_host']})"
    if slurm and not which("ssh"):
        errors.append("submission host: ssh is not installed")
    if not slurm and not which("docker"):
        errors.append("submission host: docker is not installed")
    if slurm and req["ssh_key_path"] and not os.path.isfile(os.path.expanduser(req["ssh_key_path"])):
        errors.append(f"submission host: ssh_key_path is inaccessible: {req['ssh_key_path']}")
    access = plan.get("container_access")
    if access is None:
        errors.append("the plan records no container access list (planned by an older version); plan it again")
        access = []
    errors += [f"container mounts: {p}" for p in check_accesses(access, plan["container_mounts"])]
    readable = [a for a in access if a["role"] == "input" and a["field"] != "write_spec"]
    try:
        unreadable = set(frame.unreadable([a["host"] for a in readable]))
        errors += [f"{a['field']} is not readable on the {where}: {a['host']}" for a in readable if a["host"] in unreadable]
        outputs = [(k, req[k]) for k in ("results_dir", "checkpoint_dir", "cache_dir", "sqsh_cache_dir") if req.get(k)]
        unwritable = set(frame.unwritable([v for _, v in outputs]))
        errors += [f"runtime path has no writable parent on {where}: {k}={v}" for k, v in outputs if v in unwritable]
        sqsh = plan["image"].get("sqsh") or {}
        sqsh_missing = bool(sqsh) and bool(frame.unreadable([sqsh["path"]]))
    except CosmosPlanError as exc:  # the login host could not be asked
        errors.append(f"{where}: {exc}")
        sqsh, sqsh_missing = plan["image"].get("sqsh") or {}, False
    if req.get("gpu_architecture"):
        try:
            check_gpu_architecture(req["gpu_architecture"])
        except CosmosPlanError as exc:
            errors.append(str(exc))
    if sqsh:
        if not sqsh["path"].endswith(".sqsh"):
            errors.append(f"sqsh_path must name a .sqsh artifact: {sqsh['path']}")
        elif sqsh.get("conversion_required"):
            warnings.append(f"planned SQSH {sqsh['path']} must be converted once through tao-run-on-slurm before the "
                            f"GPU job is submitted: {sqsh['command']}")
        elif sqsh_missing:
            if plan["image"]["mode"] == "existing-sqsh":
                errors.append(f"existing SQSH {sqsh['path']} is missing on the target compute frame; no historical or "
                              "default replacement will be selected")
            else:
                errors.append(f"planned SQSH is inaccessible on the target compute frame: {sqsh['path']}")
    if local:
        media = [m["path"] for split in ("train", "validation") for m in plan["datasets"][split]["media_manifest"]]
        if media and not which("ffprobe"):
            warnings.append("ffprobe is not installed; media decode probes were skipped")
        elif media:
            for path in media[:probe_limit]:
                done = run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_name", "-of", "json", path],
                           capture_output=True, text=True, check=False, timeout=60)
                if done.returncode != 0:
                    errors.append(f"media does not decode (ffprobe exit {done.returncode}): {path}")
    return {"ok": not errors, "errors": errors, "warnings": warnings, "backend": plan["backend"]}
