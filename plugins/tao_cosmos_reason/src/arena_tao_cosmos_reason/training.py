"""The backend-neutral training contract and the batch/step/warmup arithmetic (spec §6.2, §6.5-6.7)."""

from __future__ import annotations

import math

from arena_tao_cosmos_reason.annotations import TASK_AWARE
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.routing import FRAMEWORK


def lora_block(req) -> dict | None:
    """Validate the dense/PEFT inputs and return the LoRA block (``None`` when dense)."""
    active = req.lora_rank or req.lora_alpha or req.lora_target_modules or req.lora_modules_to_save
    if req.training_mode == "dense":
        if active:
            fields = [f"{n}={getattr(req, n)!r}" for n in ("lora_rank", "lora_alpha", "lora_target_modules",
                                                           "lora_modules_to_save") if getattr(req, n)]
            raise CosmosPlanError(f"dense SFT must not include an active LoRA configuration: {', '.join(fields)} "
                                  "(set training_mode=peft, or clear them)")
        return None
    if req.lora_rank <= 0 or req.lora_alpha <= 0 or not req.lora_target_modules:
        raise CosmosPlanError("PEFT requires lora rank, alpha, and at least one target module: "
                              f"lora_rank={req.lora_rank}, lora_alpha={req.lora_alpha}, "
                              f"lora_target_modules={list(req.lora_target_modules)}")
    return {"rank": req.lora_rank, "alpha": req.lora_alpha, "dropout": req.lora_dropout,
            "target_modules": list(req.lora_target_modules), "bias": req.lora_bias,
            "use_rslora": req.lora_use_rslora, "modules_to_save": list(req.lora_modules_to_save),
            "precision": req.lora_precision}


def run_mode_limits(req, train_records: int, val_records: int, total_gpus: int) -> dict:
    """Apply the run-mode and sample-limit rules (spec §3.11); return the selected counts."""
    limits = {"train": req.train_sample_limit, "validation": req.validation_sample_limit}
    if any(v is not None and v < 0 for v in limits.values()):
        raise CosmosPlanError("sample limits must be nonnegative: " + ", ".join(
            f"{k}_sample_limit={v}" for k, v in limits.items() if v is not None and v < 0))
    given = {k: v for k, v in limits.items() if v}
    available = {"train": train_records, "validation": val_records}
    if req.run_mode == "full":
        if given:
            raise CosmosPlanError("full runs must not contain a smoke/subset sample limit: " + ", ".join(
                f"{k}_sample_limit={v}" for k, v in given.items()) + " (use run_mode=smoke or diagnostic)")
        return {"train": train_records, "validation": val_records, "limits": {}}
    if req.run_mode == "diagnostic":
        if not given:
            raise CosmosPlanError("diagnostic runs require at least one explicit sample limit "
                                  "(train_sample_limit or validation_sample_limit)")
        for split, value in given.items():
            if value < total_gpus:
                raise CosmosPlanError(f"diagnostic {split} sample limit must be at least total_gpus={total_gpus}: "
                                      f"{split}_sample_limit={value}")
            if value > available[split]:
                raise CosmosPlanError(f"diagnostic {split} sample limit {value} exceeds available records "
                                      f"{available[split]}: {split}_sample_limit={value}")
        selected = {k: given.get(k, available[k]) for k in available}
        return {**selected, "limits": given}
    smoke = {"train": given.get("train", req.smoke_train_samples), "validation": given.get("validation", req.smoke_validation_samples)}
    selected = {k: max(total_gpus, min(v, available[k])) for k, v in smoke.items()}
    selected = {k: min(v, available[k]) for k, v in selected.items()}
    return {**selected, "limits": dict(selected)}


def training_contract(req, family: str, profile: dict, selected: dict) -> dict:
    """The shared contract plus derived counts (``optimizer_updates`` etc.)."""
    task_aware = family == TASK_AWARE
    multiplier = 2 if task_aware else 1
    epochs = 1 if req.run_mode == "smoke" else req.epochs
    logical = selected["train"]
    exposed = logical * multiplier
    return {
        "training_mode": req.training_mode,
        "epochs": epochs,
        "effective_global_batch": req.effective_global_batch,
        "optimizer": req.optimizer,
        "learning_rate": req.learning_rate,
        "optimizer_epsilon": req.optimizer_epsilon,
        "scheduler": req.scheduler,
        "warmup": req.warmup,
        "minimum_lr_factor": req.minimum_lr_factor,
        "weight_decay": req.weight_decay,
        "gradient_clip": req.gradient_clip,
        "precision": req.precision,
        "seed": req.seed,
        "sequence_length": profile["profile"]["sequence_length"],
        "frames": profile["frames"],
        "vision": profile["contract_vision"],
        "system_prompt": req.system_prompt,
        "train_response_mode": "hybrid" if task_aware else "answer",
        "train_sample_multiplier": multiplier,
        "validation_frequency_epochs": 1,
        "checkpoint_frequency_epochs": 1,
        "lora": lora_block(req),
        "logical_train_records": logical,
        "selected_validation_records": selected["validation"],
        "exposed_train_samples": exposed,
        "optimizer_updates": math.ceil(exposed / req.effective_global_batch) * epochs,
    }


def _multiples_near(base: int, value: int) -> str:
    """``"8 or 16"``: the multiples of ``base`` just below and above ``value``."""
    low = max(base, value // base * base)
    high = low + base if low >= value else (value // base + 1) * base
    return f"{low} or {high}" if low != high else str(low)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def framework_geometry(req, tier: str, contract: dict, validation_shard_strategy: str) -> dict:
    """Framework world, per-forward batch, grad accumulation, steps and warmup (spec §6.5-6.6)."""
    world = req.nodes * req.gpus_per_node
    egb = req.effective_global_batch
    if egb % world:
        raise CosmosPlanError(
            f"Framework effective global batch must be divisible by total GPUs: effective_global_batch={egb}, "
            f"total GPUs = nodes x gpus_per_node = {req.nodes} x {req.gpus_per_node} = {world}; "
            f"set effective_global_batch to a multiple of {world} (e.g. {_multiples_near(world, egb)})")
    per_rank = egb // world
    if req.framework_per_forward_batch < 0:
        raise CosmosPlanError(f"framework_per_forward_batch must be nonnegative, got {req.framework_per_forward_batch}")
    per_forward = req.framework_per_forward_batch or (per_rank if tier == "nano" else 1)
    if egb % (world * per_forward):
        raise CosmosPlanError(
            "Framework effective global batch must be divisible by total GPUs times per-forward batch: "
            f"effective_global_batch={egb}, total GPUs={world}, framework_per_forward_batch={per_forward}; set "
            f"framework_per_forward_batch to one of {_divisors(per_rank)} (0 = the per-rank batch {per_rank})")
    steps = math.ceil(contract["exposed_train_samples"] / egb)
    per_rank_val = math.ceil(contract["selected_validation_records"] / world)
    if per_rank_val % req.validation_batch_size and validation_shard_strategy != "media_grouped":
        raise CosmosPlanError(
            "Framework non-media-grouped validation batch size must divide the padded per-rank validation count "
            f"exactly (per-rank {per_rank_val}, validation_batch_size={req.validation_batch_size}); set "
            f"validation_batch_size to one of {_divisors(per_rank_val)} or validation_shard_strategy=media_grouped")
    raw_warmup = steps * contract["warmup"]
    warmup_steps = math.ceil(raw_warmup)
    return {"world": world, "per_rank": per_rank, "per_forward_batch": per_forward,
            "gradient_accumulation": egb // (world * per_forward), "steps_per_epoch": steps,
            "max_iter": steps * contract["epochs"], "val_steps": math.ceil(per_rank_val / req.validation_batch_size),
            "warm_up_steps": warmup_steps,
            "warmup_rounding": {"exact": raw_warmup, "emitted": warmup_steps, "rounded_up": warmup_steps != raw_warmup}}


def rl_batch(req) -> dict:
    """Cosmos-RL batch checks; the real global batch is ``train_batch_per_replica x world``."""
    per_replica = req.rl_train_batch_per_replica or req.rl_mini_batch
    if per_replica % req.rl_mini_batch:
        raise CosmosPlanError(f"rl_train_batch_per_replica must be divisible by rl_mini_batch: "
                              f"rl_train_batch_per_replica={per_replica}, rl_mini_batch={req.rl_mini_batch}")
    world = req.nodes * req.gpus_per_node
    egb = req.effective_global_batch
    if per_replica * world != egb:
        given = ("" if req.rl_train_batch_per_replica else
                 f" (rl_train_batch_per_replica=0 means rl_mini_batch={req.rl_mini_batch})")
        if egb % world == 0 and (egb // world) % req.rl_mini_batch == 0:
            fix = (f"set rl_train_batch_per_replica={egb // world}, or effective_global_batch={per_replica * world} "
                   "to keep this per-replica batch")
        elif egb % world == 0:
            fix = (f"set rl_train_batch_per_replica={egb // world} with an rl_mini_batch dividing it "
                   f"(one of {_divisors(egb // world)}), or effective_global_batch={per_replica * world}")
        else:
            fix = (f"set effective_global_batch to a multiple of the {world} GPUs (e.g. {_multiples_near(world, egb)}) "
                   f"and rl_train_batch_per_replica = effective_global_batch / {world}")
        raise CosmosPlanError(
            f"Cosmos-RL global batch rl_train_batch_per_replica x total GPUs = {per_replica} x {world} = "
            f"{per_replica * world} must equal effective_global_batch={egb}{given}; {fix}")
    if req.minimum_lr_factor is not None and not 0 <= req.minimum_lr_factor <= 1:
        raise CosmosPlanError(f"minimum_lr_factor must lie in [0, 1], got {req.minimum_lr_factor}")
    if req.rl_validation_freq_steps < 0:
        raise CosmosPlanError(f"rl_validation_freq_steps must be nonnegative, got {req.rl_validation_freq_steps}")
    if req.rl_dataset_cache_mode not in ("direct", "prewarm"):
        raise CosmosPlanError(f"rl_dataset_cache_mode must be direct or prewarm, got {req.rl_dataset_cache_mode!r}")
    return {"train_batch_per_replica": per_replica, "mini_batch": req.rl_mini_batch, "dp_shard_size": world,
            "real_global_batch": per_replica * world}


def rl_warmup_epochs(warmup: float) -> int | float:
    """Integer for whole epochs (RL reads a float <= 1 as a fraction of the run)."""
    return int(warmup) if float(warmup).is_integer() else float(warmup)


def backend_is_framework(backend: str) -> bool:
    return backend == FRAMEWORK
