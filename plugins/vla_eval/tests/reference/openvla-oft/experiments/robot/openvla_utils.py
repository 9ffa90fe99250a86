"""Stand-in for OFT's experiments/robot/openvla_utils.py (written for arena's tests): a model
that loads nothing but takes its inputs as OFT's does.

``get_vla_action`` collects the images as OFT's does (openvla_utils.py l.745-748:
``full_image``, then every key containing "wrist" when ``num_images_in_input > 1``), refuses
an image count other than ``num_images_in_input`` as the model's vision backbone does
(``torch.split(pixel_values, [6] * num_images_in_input)`` raises), reads
``norm_stats[unnorm_key]["proprio"]`` when ``use_proprio`` (l.773-777) and answers a list of
``NUM_ACTIONS_CHUNK`` actions of ``ACTION_DIM``: row i is ``[0.01 * call, 0.01 * i, 0, ..., 1.0]``.
"""

import numpy as np

from prismatic.vla.constants import ACTION_DIM, NUM_ACTIONS_CHUNK, PROPRIO_DIM

#: The norm_stats keys of OFT's LIBERO checkpoints (their datasets' names).
NORM_KEYS = (
    "libero_spatial_no_noops", "libero_object_no_noops", "libero_goal_no_noops", "libero_10_no_noops",
    "aloha1_put_X_into_pot_300_demos",
)


class _Vla:
    llm_dim = 4096

    def __init__(self):
        self.norm_stats = {
            key: {"proprio": {"q01": np.full(PROPRIO_DIM, -1.0), "q99": np.full(PROPRIO_DIM, 1.0)}} for key in NORM_KEYS
        }
        self.calls = 0


def get_vla(cfg):
    return _Vla()


def get_processor(cfg):
    return object()


def get_action_head(cfg, llm_dim):
    return object()


def get_proprio_projector(cfg, llm_dim, proprio_dim):
    return object()


def get_vla_action(cfg, vla, processor, obs, task_label, action_head=None, proprio_projector=None,
                   noisy_action_projector=None, use_film=False):
    images = [obs["full_image"]]
    if cfg.num_images_in_input > 1:
        images.extend([obs[k] for k in obs.keys() if "wrist" in k])
    for image in images:
        if not (isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.shape == (224, 224, 3)):
            raise ValueError(f"image: expected uint8 (224, 224, 3), got {getattr(image, 'shape', type(image))}")
    if len(images) != cfg.num_images_in_input:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {6 * len(images)} "
            f"(input tensor's size at dimension 1), but got split_sizes={[6] * cfg.num_images_in_input}"
        )
    if not isinstance(task_label, str):
        raise TypeError("instruction must be a str")
    if cfg.use_proprio:
        stats = vla.norm_stats[cfg.unnorm_key]["proprio"]
        state = np.asarray(obs["state"], dtype=np.float64)
        if state.shape != (PROPRIO_DIM,):
            raise ValueError(f"state: expected ({PROPRIO_DIM},), got {state.shape}")
        np.clip(2 * (state - stats["q01"]) / (stats["q99"] - stats["q01"] + 1e-8) - 1, -1, 1)
    vla.calls += 1
    actions = np.zeros((NUM_ACTIONS_CHUNK, ACTION_DIM))
    actions[:, 0] = 0.01 * vla.calls
    actions[:, 1] = 0.01 * np.arange(NUM_ACTIONS_CHUNK)
    actions[:, -1] = 1.0
    return [actions[i] for i in range(len(actions))]
