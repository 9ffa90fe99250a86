"""Run in the ``lerobot`` venv by the tests: build random checkpoints, and LeRobot's own loop.

    python serving_reference.py build KIND DIR [KIND DIR ...]
    python serving_reference.py reference DIR OBS.npz OUT.npz [DIR OBS.npz OUT.npz ...] [--seed S]
    python serving_reference.py prepare ROOT KIND... [--seed S]

``build`` and ``reference`` take several argument groups, done in order in one process (one
torch and LeRobot import for a test module's checkpoints or references; every checkpoint is
seeded, so each gives what it gives alone).
``prepare`` does both for each KIND in one process (torch imports once): ROOT/KIND/pretrained_model
from ROOT/KIND/obs.npz to ROOT/KIND/ref.npz.

KIND: ``act-aloha`` (``observation.images.top`` 96x128 + 14-dim state, 14-dim action),
``diffusion-pusht`` / ``vqbet-pusht`` (``observation.images.image`` 96x96 + 2-dim ``agent_pos``
state), ``tdmpc-state`` (4-dim state + 39-dim environment state), or
``act-metaworld-state`` (4-dim state + 39-dim environment state, 4-dim action, no camera) and
``act-ensemble-state`` (the same with temporal ensembling: step-served, one env at a time).

``reference`` is ``lerobot-eval``'s inner loop (``lerobot/scripts/lerobot_eval.py``) one env at a
time: ``policy.reset()`` at each episode start, then per step ``preprocessor`` ->
``policy.select_action`` -> ``postprocessor``, loading as the server does. With ``--seed`` a
Diffusion policy's initial noise of each fresh chunk comes from a generator seeded with S at the
episode start (what ``arena serve lerobot -o seed=S`` does per env). OBS.npz holds per env
``e{E}/{feature}`` arrays ``(T, ...)`` and ``e{E}/starts`` (bool ``(T,)``: a new episode begins);
OUT.npz gets ``e{E}`` float32 ``(T, action_dim)``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

KINDS = {
    "act-aloha": dict(
        cameras={"top": (96, 128)}, state_dim=14, action_dim=14,
        chunk_size=20, n_action_steps=10, dim_model=128, n_heads=4, dim_feedforward=256,
        n_encoder_layers=2, n_decoder_layers=1,
    ),
    # LeRobot 0.6's Diffusion defaults (horizon 64, a separate RGB encoder per camera, batch
    # norm instead of group norm), smaller: a narrower U-Net, 10 DDIM steps, 8 actions per chunk
    "diffusion-pusht": dict(
        cameras={"image": (96, 96)}, state_dim=2, action_dim=2, n_action_steps=8, down_dims=(64, 128, 256),
    ),
    # VQ-BeT for a PushT-like input, small; a near-zero softmax temperature makes its code
    # sampling (torch.multinomial on the global generator) pick the most likely code
    "vqbet-pusht": dict(
        cameras={"image": (96, 96)}, state_dim=2, action_dim=2, n_obs_steps=3, action_chunk_size=4,
        n_action_pred_token=2, crop_shape=(84, 84), vqvae_n_embed=8, vqvae_embedding_dim=32,
        vqvae_enc_hidden_dim=32, gpt_block_size=64, gpt_input_dim=64, gpt_output_dim=64, gpt_n_layer=2,
        gpt_n_head=2, gpt_hidden_dim=64, spatial_softmax_num_keypoints=16, bet_softmax_temperature=1e-6,
    ),
    # TD-MPC from state, its policy head alone (use_mpc false: MPC's CEM samples from the
    # global generator), 2 repeats of each action
    "tdmpc-state": dict(
        cameras={}, state_dim=4, action_dim=4, environment_state_dim=39, use_mpc=False, latent_dim=16,
        mlp_dim=64, state_encoder_hidden_dim=64, q_ensemble_size=2,
    ),
    "act-ensemble-state": dict(
        cameras={}, state_dim=4, action_dim=4, environment_state_dim=39,
        chunk_size=10, n_action_steps=1, temporal_ensemble_coeff=0.01, dim_model=64, n_heads=2,
        dim_feedforward=128, n_encoder_layers=1, n_decoder_layers=1,
    ),
    "act-metaworld-state": dict(
        cameras={}, state_dim=4, action_dim=4, environment_state_dim=39,
        chunk_size=10, n_action_steps=5, dim_model=64, n_heads=2, dim_feedforward=128,
        n_encoder_layers=1, n_decoder_layers=1,
    ),
}


def build(kind: str, directory: str) -> None:
    from arena_lerobot.testing import make_act_checkpoint, make_diffusion_checkpoint, make_policy_checkpoint

    options = dict(KINDS[kind])
    if kind.startswith("act"):
        make_act_checkpoint(directory, **options)
    elif kind.startswith("diffusion"):
        make_diffusion_checkpoint(directory, **options)
    else:
        make_policy_checkpoint(kind.split("-")[0], directory, **options)
    print(directory)


def reference(directory: str, obs_path: str, out_path: str, seed: int | None) -> None:
    import torch

    from arena_lerobot.features import to_policy_batch
    from arena_lerobot.model import LeRobotModel

    model = LeRobotModel(policy_path=directory, device="cpu")
    model.load()  # the same from_pretrained + make_pre_post_processors the server runs
    policy, pre, post = model.policy, model.preprocessor, model.postprocessor
    data = np.load(obs_path)
    envs = sorted({k.split("/")[0] for k in data.files})
    out = {}
    for env in envs:
        keys = [k.split("/", 1)[1] for k in data.files if k.startswith(env + "/") and not k.endswith("/starts")]
        starts = data[f"{env}/starts"]
        actions = []
        generator = None
        for t in range(len(starts)):
            if starts[t]:
                policy.reset()
                generator = torch.Generator().manual_seed(seed) if seed is not None else None
            request = {k: data[f"{env}/{k}"][t] for k in keys}
            request["task"] = ""
            with torch.inference_mode():
                batch = pre(to_policy_batch([request]))
                kwargs = {}
                if generator is not None and policy.config.type == "diffusion" and len(policy._queues["action"]) == 0:
                    shape = (1, policy.config.horizon, policy.config.action_feature.shape[0])
                    kwargs["noise"] = torch.randn(shape, generator=generator)
                action = post(policy.select_action(batch, **kwargs))
            actions.append(action.numpy()[0])
        out[env] = np.stack(actions).astype(np.float32)
    np.savez(out_path, **out)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("pairs", nargs="+", metavar="KIND DIR")
    r = sub.add_parser("reference")
    r.add_argument("triples", nargs="+", metavar="DIR OBS OUT")
    r.add_argument("--seed", type=int)
    p = sub.add_parser("prepare")
    p.add_argument("root")
    p.add_argument("kinds", nargs="+", choices=sorted(KINDS))
    p.add_argument("--seed", type=int)
    args = parser.parse_args(argv)
    if args.command == "build":
        if len(args.pairs) % 2 or any(kind not in KINDS for kind in args.pairs[::2]):
            parser.error(f"build takes KIND DIR pairs, KIND one of {sorted(KINDS)}: {args.pairs}")
        for kind, directory in zip(args.pairs[::2], args.pairs[1::2]):
            build(kind, directory)
    elif args.command == "reference":
        if len(args.triples) % 3:
            parser.error(f"reference takes DIR OBS OUT triples: {args.triples}")
        for start in range(0, len(args.triples), 3):
            reference(*args.triples[start : start + 3], args.seed)
    else:
        for kind in args.kinds:
            where = f"{args.root}/{kind}"
            build(kind, f"{where}/pretrained_model")
            reference(f"{where}/pretrained_model", f"{where}/obs.npz", f"{where}/ref.npz", args.seed)


if __name__ == "__main__":
    main(sys.argv[1:])
