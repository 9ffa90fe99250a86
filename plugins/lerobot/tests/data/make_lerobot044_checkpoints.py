"""Made the committed checkpoints of ``lerobot044/`` with LeRobot 0.4.4 (run once, in a venv with
``lerobot==0.4.4``; kept so that the data can be made again and checked):

    python make_lerobot044_checkpoints.py OUT_DIR

Writes ``OUT_DIR/act`` (chunk-served: 5 of 10 rows) and ``OUT_DIR/diffusion`` (step-served,
DDIM, 2 observation steps), both state-only and tiny (a 4-dim ``observation.state``, a 6-dim
``observation.environment_state``, a 3-dim action), saved with their processors as
``lerobot-train`` saves a ``pretrained_model``; and ``OUT_DIR/episodes.npz``: observations of two
envs with episode resets (``e{E}/<feature>`` ``(T, D)``, ``e{E}/starts`` bool ``(T,)``) and the
actions LeRobot 0.4.4's own loop gave for them (``act/e{E}``, ``diffusion/e{E}``, float32
``(T, 3)``): ``policy.reset()`` at each episode start, then preprocessor -> ``select_action``
-> postprocessor per step, Diffusion's initial noise of each fresh chunk drawn from a generator
seeded with ``SEED`` at the episode start (what ``arena serve lerobot -o seed=SEED`` does).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

SEED = 7
STEPS = 14
RESETS = [[6], [3, 10]]


def stats(shape, rng):
    mean = rng.normal(0.0, 0.5, shape)
    std = rng.uniform(0.5, 2.0, shape)
    t = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731
    return {"mean": t(mean), "std": t(std), "min": t(mean - 2 * std), "max": t(mean + 2 * std)}


def build(kind: str, out: Path) -> None:
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.factory import make_pre_post_processors

    torch.manual_seed(0)
    inputs = {
        "observation.state": PolicyFeature(FeatureType.STATE, (4,)),
        "observation.environment_state": PolicyFeature(FeatureType.ENV, (6,)),
    }
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (3,))}
    if kind == "act":
        from lerobot.policies.act.configuration_act import ACTConfig
        from lerobot.policies.act.modeling_act import ACTPolicy

        config = ACTConfig(
            input_features=inputs, output_features=outputs, device="cpu", pretrained_backbone_weights=None,
            chunk_size=10, n_action_steps=5, dim_model=32, n_heads=2, dim_feedforward=64,
            n_encoder_layers=1, n_decoder_layers=1, use_vae=False,
        )
        policy = ACTPolicy(config)
    else:
        from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
        from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy

        config = DiffusionConfig(
            input_features=inputs, output_features=outputs, device="cpu", pretrained_backbone_weights=None,
            n_obs_steps=2, horizon=8, n_action_steps=4, down_dims=(16, 32), kernel_size=3, n_groups=4,
            diffusion_step_embed_dim=16, num_inference_steps=4, noise_scheduler_type="DDIM",
        )
        policy = DiffusionPolicy(config)
    rng = np.random.default_rng(1)
    features = {**config.input_features, **config.output_features}
    pre, post = make_pre_post_processors(config, dataset_stats={k: stats(tuple(f.shape), rng) for k, f in features.items()})
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)


def loop(directory: Path, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    config = PreTrainedConfig.from_pretrained(directory)
    config.device = "cpu"
    policy = get_policy_class(config.type).from_pretrained(directory, config=config)
    policy.eval()
    pre, post = make_pre_post_processors(policy.config, pretrained_path=str(directory),
                                         preprocessor_overrides={"device_processor": {"device": "cpu"}})
    out = {}
    for env in range(len(RESETS)):
        generator, actions = None, []
        for t in range(STEPS):
            if data[f"e{env}/starts"][t]:
                policy.reset()
                generator = torch.Generator().manual_seed(SEED)
            batch = {k: torch.from_numpy(data[f"e{env}/{k}"][t : t + 1]).float() for k in ("observation.state", "observation.environment_state")}
            batch["task"] = [""]
            with torch.inference_mode():
                kwargs = {}
                if config.type == "diffusion" and len(policy._queues["action"]) == 0:
                    kwargs["noise"] = torch.randn((1, config.horizon, 3), generator=generator)
                actions.append(post(policy.select_action(pre(batch), **kwargs)).numpy()[0])
        out[f"e{env}"] = np.stack(actions).astype(np.float32)
    return out


def main(root: Path) -> None:
    rng = np.random.default_rng(2)
    data: dict[str, np.ndarray] = {}
    for env, later in enumerate(RESETS):
        data[f"e{env}/observation.state"] = rng.normal(size=(STEPS, 4)).astype(np.float32)
        data[f"e{env}/observation.environment_state"] = rng.normal(size=(STEPS, 6)).astype(np.float32)
        starts = np.zeros(STEPS, bool)
        starts[[0, *later]] = True
        data[f"e{env}/starts"] = starts
    for kind in ("act", "diffusion"):
        build(kind, root / kind)
        for env, actions in loop(root / kind, data).items():
            data[f"{kind}/{env}"] = actions
    np.savez(root / "episodes.npz", **data)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
