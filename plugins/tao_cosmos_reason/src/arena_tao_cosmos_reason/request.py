"""The planner request: every planner input with its default (spec §3.1-3.2).

One pydantic model is the single source of truth for names, defaults and basic constraints;
cross-field rules live in the modules that own the concept. ``TRANSIENT_FIELDS`` never enter
the sealed ``planner_request`` (spec §5.3).
"""

from __future__ import annotations

import os
import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from arena_tao_cosmos_reason.routing import normalize_backend

TRANSIENT_FIELDS = ("verb", "format", "plan_artifact", "render_output")
PER_INVOCATION_FIELDS = ("verb", "format", "plan_artifact", "render_output", "tao_job_id")


def _split_csv(values: list[str] | str | None) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for value in values:
        out.extend(part.strip() for part in str(value).split(",") if part.strip())
    return out


def _plain(value):
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class PlanRequest(BaseModel):
    """Fully resolved planner inputs. Sizes are counts, times are HH:MM:SS, rates are floats."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # identity and workflow
    model: str = "auto"
    base_model_path_or_uri: str = ""
    base_model_revision: str = Field("", description="branch, tag or 40-hex commit; default main")
    base_model_format: str = Field("auto", description="qwen3_vl | cosmos3_omni (Nano) | cosmos3_edge")
    prepared_checkpoint_path: str = ""
    vlm_architecture_model_path_or_uri: str = ""
    vlm_architecture_revision: str = ""
    experiment_id: str = ""
    action: str = "train"
    workload: Literal["training", "automl", "hpo"] = "training"
    comparative: bool = False
    backend: str = "auto"
    dataset_family: Literal["auto", "video_conversation", "task_aware_video_reasoning"] = "auto"
    platform: Literal["docker", "slurm"] = "slurm"
    run_mode: Literal["smoke", "diagnostic", "full"] = "full"
    train_sample_limit: int | None = None
    validation_sample_limit: int | None = None
    smoke_train_samples: int = Field(16, ge=1)
    smoke_validation_samples: int = Field(8, ge=1)
    tao_job_id: str = ""

    # data
    train_annotation: list[str] = Field(default_factory=list)
    train_media_root: list[str] = Field(default_factory=list)
    validation_annotation: list[str] = Field(default_factory=list)
    validation_media_root: list[str] = Field(default_factory=list)
    task: list[str] = Field(default_factory=list)
    system_prompt: str = ""

    # optimization
    training_mode: Literal["dense", "peft"] = "dense"
    epochs: int = Field(1, ge=1)
    effective_global_batch: int = Field(8, ge=1)
    optimizer: str = "AdamW"
    learning_rate: float = Field(1e-5, gt=0)
    optimizer_epsilon: float = Field(1e-8, gt=0)
    scheduler: Literal["linear", "cosine", "constant"] = "linear"
    warmup: float = Field(0.0, ge=0, description="epochs")
    minimum_lr_factor: float | None = None
    weight_decay: float = Field(0.01, ge=0)
    gradient_clip: float = Field(1.0, ge=0)
    loss_spike_rollback: float | None = None
    precision: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    seed: int = 42
    sequence_length: int = Field(0, ge=0, description="tokens; 0 = tier default")
    validation_batch_size: int = Field(1, ge=1)
    max_checkpoints: int = Field(2, ge=1)
    async_checkpoint: bool = False

    # PEFT
    lora_rank: int = Field(0, ge=0)
    lora_alpha: float = Field(0, ge=0)
    lora_dropout: float = Field(0.0, ge=0, le=1)
    lora_target_modules: list[str] = Field(default_factory=list)
    lora_bias: Literal["none", "all", "lora_only"] = "none"
    lora_use_rslora: bool = False
    lora_modules_to_save: list[str] = Field(default_factory=list)
    lora_precision: Literal["float32", "float16", "bfloat16"] = "bfloat16"

    # video sampling and processor
    frames: int = Field(0, ge=0, description="uniform frames; 0 = tier default")
    fps: float | None = None
    min_frames: int | None = None
    max_frames: int | None = None
    video_start: float | None = None
    video_end: float | None = None
    video_resized_height: int | None = None
    video_resized_width: int | None = None
    video_min_pixels: int | None = None
    video_max_pixels: int | None = None
    video_total_pixels: int | None = None
    frame_width: int | None = None
    frame_height: int | None = None
    attention_implementation: str = "auto"
    validation_shard_strategy: Literal["auto", "media_grouped", "stride"] = "auto"

    # Cosmos-RL knobs
    rl_mini_batch: int = Field(1, ge=1)
    rl_train_batch_per_replica: int = Field(0, ge=0)
    rl_video_profile: str = "auto"
    rl_dataset_cache_mode: str = "direct"
    rl_validation_freq_steps: int = 0
    rl_baked_overlay_pythonpath: str = ""
    rl_video_cache_size: int | None = None
    rl_decoder_cache_size: int | None = None
    rl_batch_threads: int | None = None
    rl_dataloader_workers: int | None = None
    rl_prefetch_factor: int | None = None
    rl_validation_cache_frontload_batch_size: int | None = None
    rl_validation_cache_frontload_unique_per_batch: int | None = None
    video_override_map: str = ""
    video_override_manifest: str = ""
    video_override_fingerprint: str = ""

    # Cosmos Framework knobs
    framework_per_forward_batch: int = 0
    framework_baked_overlay_pythonpath: str = ""
    framework_baked_overlay_module_prefix: str = ""
    framework_video_cache_size: int | None = None
    framework_process_threads: int | None = None
    framework_dataloader_workers: int | None = None
    framework_validation_shard_strategy: str = ""
    framework_validation_video_feature_cache_size: int | None = None

    # fingerprinting
    fast_media_fingerprint: bool = False
    fast_model_fingerprint: bool = False

    # image and runtime
    image_runtime_mode: Literal["auto", "existing-sqsh", "packaged-image", "source-build"] = "auto"
    image_tag: str = ""
    sqsh_path: str = ""
    source_repository: str = ""
    source_commit: str = ""
    source_tree: str = ""
    source_branch: str = ""
    source_base_image: str = ""
    source_build_context: str = ""
    source_build_timestamp: str = ""

    # compute and SLURM
    nodes: int = Field(1, ge=1)
    gpus_per_node: int = 0
    cpus_per_task: int = Field(64, ge=1)
    time_limit: str = "04:00:00"
    timeout: str = "04:15:00"
    exclusive: bool = False
    use_requeue: bool = False
    exclude_node: list[str] = Field(default_factory=list)
    exclude_unhealthy_inventory_nodes: bool = False
    slurm_node_inventory_file: str = ""
    qos: str = ""
    reservation: str = ""
    cluster: str = ""
    partition: str = ""
    account: str = ""
    master_port: int = Field(29500, ge=1, le=65535)
    stdout_path: str = ""
    stderr_path: str = ""
    nccl_debug: str = "INFO"
    cuda_allocator: str = "expandable_segments:True"
    gpu_architecture: str = ""
    slurm_user: str = ""
    slurm_host: list[str] = Field(default_factory=list)
    ssh_key_path: str = ""
    sqsh_cache_dir: str = ""
    container_mount: list[str] = Field(default_factory=list)

    # paths
    write_spec: str = ""
    results_dir: str = ""
    checkpoint_dir: str = ""
    cache_dir: str = ""
    container_spec_path: str = "/specs/train.toml"
    container_results_dir: str = "/results"
    container_checkpoint_dir: str = "/results/checkpoints"
    container_cache_dir: str = "/cache"

    @model_validator(mode="before")
    @classmethod
    def _paths_as_strings(cls, data):
        """``os.PathLike`` values (top level or inside a list/tuple) become ``str``; tuples become
        lists, so the sealed request is plain JSON (spec §5.3)."""
        if not isinstance(data, dict):
            return data
        return {key: _plain(value) for key, value in data.items()}

    @field_validator("backend")
    @classmethod
    def _canonical_backend(cls, value: str) -> str:
        return normalize_backend(value)

    @field_validator("lora_target_modules", "lora_modules_to_save", "task", mode="before")
    @classmethod
    def _csv(cls, value):
        return _split_csv(value)

    def with_experiment_id(self) -> PlanRequest:
        """A copy whose empty ``experiment_id`` is replaced by a fresh UUID4."""
        if self.experiment_id:
            return self
        return self.model_copy(update={"experiment_id": str(uuid.uuid4())})

    def captured(self) -> dict:
        """The JSON-safe request for ``planner_request`` (spec §5.3)."""
        return self.model_dump(mode="json")
