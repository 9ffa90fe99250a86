"""Run in the ``lerobot`` venv by ``test_rtc.py``: RTC inputs of live requests reaching a policy.

    python rtc_reference.py DIR

Builds a small ACT checkpoint in DIR, serves it with :class:`arena_lerobot.model.LeRobotModel`
and prints one JSON object: what LeRobot 0.4.4's own classes declare (pi0, pi0.5 and SmolVLA take
``inference_delay`` / ``prev_chunk_left_over``, ACT does not), the metadata and replies of the
plain ACT policy with and without RTC fields (ignored: the same chunks), and, with ACT's
``predict_action_chunk`` replaced by one that takes the RTC arguments (a stand-in for an
RTC-enabled flow policy, which needs a multi-GB backbone), the arguments each call received.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def main(directory: str) -> None:
    import torch

    from arena_lerobot.model import LeRobotModel
    from arena_lerobot.rtc import accepts_rtc
    from arena_lerobot.testing import make_act_checkpoint
    import importlib

    declares = {}
    for module, name in (("pi0.modeling_pi0", "PI0Policy"), ("pi05.modeling_pi05", "PI05Policy"),
                         ("smolvla.modeling_smolvla", "SmolVLAPolicy"), ("act.modeling_act", "ACTPolicy")):
        try:  # the flow policies import transformers, which the venv may lack
            declares[name] = accepts_rtc(getattr(importlib.import_module(f"lerobot.policies.{module}"), name))
        except ImportError as exc:
            declares[name] = f"not importable: {exc}"
    out: dict = {"declares": declares}
    make_act_checkpoint(directory, cameras={}, state_dim=4, action_dim=4, environment_state_dim=39, chunk_size=10,
                        n_action_steps=10, dim_model=64, n_heads=2, dim_feedforward=128, n_encoder_layers=1, n_decoder_layers=1)
    model = LeRobotModel(policy_path=directory, device="cpu")
    model.load()
    rng = np.random.default_rng(0)

    def request(env_id: int, new: bool, rtc: dict | None) -> dict:
        obs = {"observation.state": rng.standard_normal(4).astype(np.float32),
               "observation.environment_state": rng.standard_normal(39).astype(np.float32),
               "task": "reach", "session": "s", "env_id": env_id, "new_episode": new}
        return {**obs, **(rtc or {})}

    plain = [request(0, True, None), request(1, True, None)]
    with_fields = [{**r, "inference_delay": 2, "execute_horizon": 4,
                    "prev_chunk_left_over": np.zeros((6, 4), np.float32)} for r in plain]
    a = model.infer_batch(plain)
    b = model.infer_batch(with_fields)
    out["plain_metadata_rtc"] = model.metadata()["rtc"]
    out["plain_ignores_fields"] = all(np.array_equal(x["actions"], y["actions"]) for x, y in zip(a, b))

    calls = []
    original = model.policy.predict_action_chunk

    def rtc_chunk(batch, inference_delay=None, prev_chunk_left_over=None):
        chunk = original(batch)
        calls.append({"delay": inference_delay, "batch": int(chunk.shape[0]),
                      "leftover": None if prev_chunk_left_over is None else prev_chunk_left_over.tolist(),
                      "chunk": chunk[0].tolist()})
        return chunk

    model.policy.predict_action_chunk = rtc_chunk
    out["rtc_metadata"] = model.metadata()["rtc"]
    # env 0: a new episode, then two more requests after 4 executed rows; env 1 alongside, new
    model.infer_batch([{**request(0, True, None), "inference_delay": 0, "execute_horizon": 4},
                       {**request(1, True, None), "inference_delay": 0, "execute_horizon": 4}])
    model.infer_batch([{**request(0, False, None), "inference_delay": 2, "execute_horizon": 4}])
    model.infer_batch([{**request(0, False, None), "inference_delay": 3, "execute_horizon": 4},
                       {**request(1, True, None), "inference_delay": 1, "execute_horizon": 4}])
    out["calls"] = calls
    print(json.dumps(out))
    torch.set_num_threads(1)


if __name__ == "__main__":
    main(sys.argv[1])
