"""Training spec trees for Cosmos Framework and Cosmos-RL (spec §6.3-6.4, §6.6-6.7).

The trees are plain dicts; :mod:`toml_emit` turns them into canonical TOML. ``ctx`` is the
planner's working state (see ``planner.build_plan``).
"""

from __future__ import annotations

from arena_tao_cosmos_reason.annotations import TASK_AWARE
from arena_tao_cosmos_reason.training import rl_warmup_epochs

VLM_PATH_LITERAL = "${oc.env:VLM_SAFETENSORS_PATH}"
TRAIN_MANIFEST_PLACEHOLDER = "__TAO_TRAIN_MERGED_MANIFEST__"
VAL_MANIFEST_PLACEHOLDER = "__TAO_VALIDATION_MERGED_MANIFEST__"


def framework_spec(ctx: dict) -> dict:
    req, c, g = ctx["req"], ctx["contract"], ctx["geometry"]
    lora = c["lora"]
    experiment = "tao_task_aware_video_reasoning" if ctx["family"] == TASK_AWARE else "tao_video_conversation"
    if ctx["tier"] == "edge":
        experiment += "_edge"
    model = {"attn_implementation": ctx["profile"]["profile"]["attention_implementation"], "precision": c["precision"],
             "backbone": {"model_name": VLM_PATH_LITERAL, "safetensors_path": VLM_PATH_LITERAL},
             "ema": {"enabled": False, "rate": 0.1, "iteration_shift": 0},
             "parallelism": {"data_parallel_shard_degree": req.gpus_per_node, "data_parallel_replicate_degree": req.nodes,
                             "context_parallel_shard_degree": 1, "cfg_parallel_shard_degree": 1},
             "compile": {"enabled": False, "compile_dynamic": True},
             "activation_checkpointing": {"mode": "full", "save_ops_regex": ["fmha"], "preserve_rng_state": True,
                                          "determinism_check": "default"}}
    if lora:
        model.update(lora_enabled=True, lora_rank=lora["rank"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                     lora_target_modules=",".join(lora["target_modules"]), lora_bias=lora["bias"],
                     lora_use_rslora=lora["use_rslora"], lora_modules_to_save=",".join(lora["modules_to_save"]),
                     lora_precision=lora["precision"])
    steps, epochs = g["steps_per_epoch"], c["epochs"]
    constant = c["scheduler"] == "constant"
    return {
        "job": {"task": "vlm", "project": "cosmos3_reasoner", "group": ctx["family"], "name": req.experiment_id,
                "wandb_mode": "disabled", "experiment": experiment},
        "model": model,
        "optimizer": {"betas": [0.9, 0.999], "eps": c["optimizer_epsilon"], "fused": True, "lr": c["learning_rate"],
                      "weight_decay": c["weight_decay"],
                      "keys_to_select": (["lora_"] + lora["modules_to_save"]) if lora else []},
        "scheduler": {"cycle_lengths": [steps * epochs], "f_max": [1.0], "f_min": [1.0 if constant else 0.0],
                      "f_start": [0.0 if c["warmup"] else 1.0], "warm_up_steps": [g["warm_up_steps"]],
                      "verbosity_interval": 0},
        "trainer": {"distributed_parallelism": "fsdp", "grad_accum_iter": g["gradient_accumulation"], "logging_iter": 1,
                    "max_iter": steps * epochs, "num_epochs": epochs, "steps_per_epoch": steps,
                    "max_val_iter": g["val_steps"], "run_validation": True, "validation_iter": steps,
                    "validation_freq_in_epoch": 1, "run_validation_on_start": False,
                    "callbacks": {"grad_clip": {"clip_norm": c["gradient_clip"], "force_finite": False},
                                  "tao": {"enabled": True, "experiment_name": req.experiment_id, "logging_interval": 1,
                                          "validation_heartbeat_interval": 50},
                                  "compile_tokenizer": {"enabled": False, "compile_after_iterations": 3}}},
        "checkpoint": {"load_path": "???", "save_iter": steps, "save_freq_in_epoch": 1,
                       "dcp_async_mode_enabled": req.async_checkpoint,
                       "keys_to_skip_loading": ["optimizer", "scheduler"] if lora else []},
        "dataloader_train": {"max_samples_per_batch": g["per_forward_batch"],
                             "max_sequence_length": c["sequence_length"]},
    }


def rl_spec(ctx: dict) -> dict:
    req, c, rt, batch = ctx["req"], ctx["contract"], ctx["video_runtime"], ctx["rl_batch"]
    lora = c["lora"]
    constant = c["scheduler"] == "constant"
    workers = rt["dataloader_workers"]
    prewarm = req.rl_dataset_cache_mode == "prewarm" and req.run_mode == "full"
    train_policy = {"type": "sft", "mini_batch": batch["mini_batch"], "dataloader_num_workers": workers,
                    "conversation_column_name": "conversations", "enable_dataset_cache": prewarm,
                    "dataloader_shuffle": True, "dataloader_seed": c["seed"], "dataloader_drop_last": False}
    if workers > 0:
        train_policy["dataloader_prefetch_factor"] = rt["prefetch_factor"]
    if prewarm:
        train_policy.update(dataset_cache_dir=ctx["container"]["cache_dir"] + "/datasets",
                            dataset_cache_fingerprint=ctx["cache_keys"]["train"],
                            validation_dataset_cache_fingerprint=ctx["cache_keys"]["validation"],
                            require_complete_dataset_cache=True)
    validation = {"enable": True, "freq": req.rl_validation_freq_steps or 20, "freq_in_epoch": 1,
                  "batch_size": req.validation_batch_size, "dataloader_num_workers": workers}
    if workers > 0:
        validation["dataloader_prefetch_factor"] = rt["prefetch_factor"]
    vision = dict(c["vision"])
    vision["video_decoder"] = rt["video_decoder"]
    if prewarm:
        vision["cache_dir"] = ctx["container"]["cache_dir"] + "/vision"
    data = ctx["container_data"]
    policy = {"model_name_or_path": ctx["prepared_model_container_path"], "model_max_length": c["sequence_length"],
              "model_gradient_checkpointing": True,
              "parallelism": {"dp_shard_size": batch["dp_shard_size"], "dp_replicate_size": 1, "pp_size": 1, "tp_size": 1}}
    if lora:
        policy["lora"] = {"r": lora["rank"], "lora_alpha": lora["alpha"], "lora_dropout": lora["dropout"],
                          "target_modules": lora["target_modules"], "bias": lora["bias"], "use_rslora": lora["use_rslora"],
                          "modules_to_save": lora["modules_to_save"], "adapter_dtype": lora["precision"]}
    custom = {"train_dataset": {"annotation_path": data["train_annotation"], "media_path": data["train_media_root"],
                                "media_root": data["train_media_root"], "response_mode": c["train_response_mode"]},
              "val_dataset": {"annotation_path": data["validation_annotation"], "media_path": data["validation_media_root"],
                              "media_root": data["validation_media_root"], "response_mode": "answer"},
              "vision": vision, "video_decoder": rt["video_decoder"], "video_cache_size": rt["video_cache_size"],
              "video_decoder_cache_size": rt["decoder_cache_size"],
              "validation_shard_strategy": rt["validation_shard_strategy"],
              "validation_cache_frontload_batch_size": req.rl_validation_cache_frontload_batch_size,
              "validation_cache_frontload_unique_per_batch": req.rl_validation_cache_frontload_unique_per_batch,
              "system_prompt": c["system_prompt"]}
    if ctx["decoder_artifact"]["container_map"]:
        custom["video_override_map"] = ctx["decoder_artifact"]["container_map"]
    return {
        "train": {"resume": False, "epoch": c["epochs"], "compile": False,
                  "train_batch_per_replica": batch["train_batch_per_replica"],
                  "output_dir": ctx["container"]["checkpoint_dir"], "optm_lr": c["learning_rate"],
                  "optm_impl": "foreach" if lora else "fused", "optm_weight_decay": c["weight_decay"],
                  "optm_min_lr_factor": c["minimum_lr_factor"] if c["minimum_lr_factor"] is not None else (1.0 if constant else 0.0),
                  "epsilon": c["optimizer_epsilon"], "optm_warmup_epochs": rl_warmup_epochs(c["warmup"]),
                  "optm_decay_type": "none" if constant else c["scheduler"], "optm_grad_norm_clip": c["gradient_clip"],
                  "optm_loss_spike_rollback": req.loss_spike_rollback if req.loss_spike_rollback is not None else (10.0 if lora else 0.0),
                  "param_dtype": c["precision"], "seed": c["seed"], "deterministic": True,
                  "ckpt": {"enable_checkpoint": True, "save_freq_in_epoch": 1,
                           "save_mode": "async" if req.async_checkpoint else "sync", "max_keep": req.max_checkpoints},
                  "train_policy": train_policy},
        "validation": validation,
        "policy": policy,
        "logging": {"logger": ["console", "tao"], "experiment_name": req.experiment_id, "project_name": "cosmos-rl-tao"},
        "custom": custom,
    }
