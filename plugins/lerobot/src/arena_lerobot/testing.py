"""Randomly initialised LeRobot checkpoints for tests (needs the ``lerobot`` venv; no download).

Built from config the way LeRobot 0.6 allows without a download: the policy type's config
(``make_policy_config(type, ...)``) with explicit input/output features and without ImageNet
backbone weights (``pretrained_backbone_weights=None``: ACT, Diffusion and VQ-BeT would fetch
torchvision's), processors from ``make_pre_post_processors(config, dataset_stats=...)``, all saved
with ``save_pretrained`` into one ``pretrained_model`` directory, as ``lerobot-train`` writes it.
Types built so here: ``act``, ``diffusion``, ``vqbet``, ``tdmpc`` (plugins/lerobot/README.md,
the policy-type table, says which others need a download).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def feature_stats(shape: tuple[int, ...], rng: np.random.Generator, image: bool) -> dict[str, Any]:
    """Non-trivial mean/std/min/max for one feature (images: per channel, shaped ``(3, 1, 1)``)."""
    import torch

    size = (shape[0], 1, 1) if image else shape
    mean = rng.uniform(0.3, 0.6, size) if image else rng.normal(0.0, 0.5, size)
    std = rng.uniform(0.15, 0.3, size) if image else rng.uniform(0.5, 2.0, size)
    return {
        "mean": torch.tensor(mean, dtype=torch.float32),
        "std": torch.tensor(std, dtype=torch.float32),
        "min": torch.tensor(mean - 2 * std, dtype=torch.float32),
        "max": torch.tensor(mean + 2 * std, dtype=torch.float32),
    }


def _features(cameras: dict[str, tuple[int, int]], state_dim: int, action_dim: int, environment_state_dim: int | None):
    from lerobot.configs.types import FeatureType, PolicyFeature

    # a camera named with a full feature name ("observation.image", PushT's) keeps it
    inputs = {
        (cam if cam.startswith("observation.") else f"observation.images.{cam}"): PolicyFeature(FeatureType.VISUAL, (3, h, w))
        for cam, (h, w) in cameras.items()
    }
    inputs["observation.state"] = PolicyFeature(FeatureType.STATE, (state_dim,))
    if environment_state_dim:
        inputs["observation.environment_state"] = PolicyFeature(FeatureType.ENV, (environment_state_dim,))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (action_dim,))}
    return inputs, outputs


def save_checkpoint(policy: Any, directory: str | Path, seed: int = 0) -> Path:
    """Save ``policy`` with processors built from random dataset stats; return the directory."""
    from lerobot.policies.factory import make_pre_post_processors

    rng = np.random.default_rng(seed)
    config = policy.config
    features = {**config.input_features, **config.output_features}
    stats = {k: feature_stats(tuple(f.shape), rng, image=k.startswith("observation.image")) for k, f in features.items()}
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    directory = Path(directory)
    policy.save_pretrained(directory)
    pre.save_pretrained(directory)
    post.save_pretrained(directory)
    return directory


def make_policy_checkpoint(
    policy_type: str,
    directory: str | Path,
    *,
    cameras: dict[str, tuple[int, int]],
    state_dim: int,
    action_dim: int,
    environment_state_dim: int | None = None,
    seed: int = 0,
    **overrides: Any,
) -> Path:
    """A random checkpoint of LeRobot policy type ``policy_type`` (``act``, ``diffusion``,
    ``vqbet``, ``tdmpc``, ...) for ``cameras`` ``{name: (H, W)}``, built from its config with
    ``overrides`` (config fields) and no pretrained backbone; saved with processors made from
    random dataset stats. VQ-BeT's residual VQ is marked trained (``discretized``), as a trained
    checkpoint's is, so ``select_action`` runs its inference path.
    """
    import torch
    from lerobot.policies.factory import get_policy_class, make_policy_config

    torch.manual_seed(seed)
    inputs, outputs = _features(cameras, state_dim, action_dim, environment_state_dim)
    options: dict[str, Any] = {"device": "cpu", **overrides}
    if policy_type in ("act", "diffusion", "vqbet"):
        options.setdefault("pretrained_backbone_weights", None)
    config = make_policy_config(policy_type, input_features=inputs, output_features=outputs, **options)
    policy = get_policy_class(policy_type)(config)
    if policy_type == "vqbet":
        policy.vqbet.action_head.vqvae_model.discretized.fill_(True)
    return save_checkpoint(policy, directory, seed)


def make_act_checkpoint(directory: str | Path, **options: Any) -> Path:
    """A random ACT checkpoint: :func:`make_policy_checkpoint` of type ``act`` (so
    ``pretrained_backbone_weights=None``) with the same keywords: ``cameras`` ``{name: (H, W)}``
    (none: ``environment_state_dim`` must be given, ACT needs an image or an environment state),
    ``state_dim``, ``action_dim``, ``seed`` and further ``ACTConfig`` fields (e.g.
    ``chunk_size=20, n_action_steps=10``).
    """
    return make_policy_checkpoint("act", directory, **options)


def make_diffusion_checkpoint(
    directory: str | Path,
    *,
    cameras: dict[str, tuple[int, int]],
    state_dim: int,
    action_dim: int,
    seed: int = 0,
    **overrides: Any,
) -> Path:
    """A random Diffusion checkpoint, small by default: 10 DDIM denoising steps,
    ``down_dims=(256, 512, 1024)``, crop the size of the image (no random crop at inference).

    ``overrides``: further ``DiffusionConfig`` fields.
    """
    import torch
    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
    from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy

    torch.manual_seed(seed)
    inputs, outputs = _features(cameras, state_dim, action_dim, None)
    h, w = next(iter(cameras.values()))
    options: dict[str, Any] = {
        "num_inference_steps": 10,
        "noise_scheduler_type": "DDIM",
        "down_dims": (256, 512, 1024),
        "crop_shape": (h, w),
        **overrides,
    }
    config = DiffusionConfig(
        input_features=inputs, output_features=outputs, device="cpu", pretrained_backbone_weights=None, **options
    )
    return save_checkpoint(DiffusionPolicy(config), directory, seed)
