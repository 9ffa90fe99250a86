"""OpenVLA / OpenVLA-OFT adapters (family ``"openvla"``), after the projects' own clients.

Sources (file @ commit, lines):

* OV = openvla/openvla @ c8f03f4, OFT = moojink/openvla-oft @ 213c5ff.
* Image preprocessing, both: rotate 180 degrees (``img[::-1, ::-1]``: OV
  ``experiments/robot/libero/libero_utils.py`` l.55-56, OFT ``experiments/robot/libero/
  libero_utils.py`` l.35 and l.42), then ``resize_image`` / ``resize_image_for_policy`` to
  224 x 224 (OFT ``experiments/robot/openvla_utils.py`` l.520-545, ``robot_utils.py``
  ``MODEL_IMAGE_SIZES`` l.32-35): TensorFlow JPEG encode, decode, ``tf.image.resize`` with
  ``lanczos3`` and antialiasing, round, clip. TensorFlow is not a dependency here: the same
  steps run in Pillow (JPEG quality 95, Lanczos), which is **not bit-identical** to
  TensorFlow's resampler (differences of a few intensity levels at edges).
* OpenVLA on LIBERO, client-side center crop (``center_crop``, default on as in OV
  ``run_libero_eval.py`` l.66 and l.94; OFT crops server-side, its ``deploy.py`` l.132): OV
  ``experiments/robot/openvla_utils.py`` ``get_vla_action`` l.135-155 and ``crop_and_resize``
  l.95-124: uint8 -> float32 ``x / 255``; a centered box of side ``sqrt(0.9)`` of each side
  (0.9 of the area) cropped and resized back to 224 x 224 by ``tf.image.crop_and_resize``
  (bilinear, float32); clipped to [0, 1]; back to uint8 as ``trunc(x * 255.5)``
  (``tf.image.convert_image_dtype(..., saturate=True)``). :func:`center_crop` does the same
  arithmetic in NumPy float32.
* ALOHA images are first resized to 256 x 256 with PIL bicubic, as the dataset was
  (OFT ``experiments/robot/aloha/aloha_utils.py`` l.39-47), then as above (``run_aloha_eval.py``
  ``prepare_observation`` l.119-138).
* State: LIBERO ``eef_pos (3) + quat2axisangle(eef_quat) (3) + gripper_qpos (2)`` (OFT
  ``run_libero_eval.py`` l.243-262, ``libero_utils.py`` ``quat2axisangle`` l.63-86, robosuite's
  formula); ALOHA ``qpos (14)`` (``run_aloha_eval.py`` l.135).
* Prompt: the task's language as ``instruction``; the server wraps it (``In: What action should
  the robot take to {instruction.lower()}?\\nOut:``, deploy.py l.42-43 / OV l.58-62).
* Actions, LIBERO: the gripper goes [0, 1] -> [-1, +1], binarized with ``sign``, then inverted
  (OV ``run_libero_eval.py`` l.219-225; OFT ``run_libero_eval.py`` ``process_action``
  l.265-277, ``robot_utils.py`` l.149-190). ALOHA: executed as returned (absolute joints,
  ``run_aloha_eval.py`` l.224).
"""

from __future__ import annotations

import io
from typing import Any, ClassVar

import numpy as np

from arena.images import to_uint8
from arena.policies.adapters import EmbodimentAdapter

# OFT's quat2axisangle (libero_utils.py l.63-86) is robosuite's formula, written once in core.
from arena.rotations import quat_to_axis_angle as quat2axisangle

__all__ = [
    "OpenVLAAdapter",
    "OpenVLALiberoAdapter",
    "OftAlohaAdapter",
    "OftLiberoAdapter",
    "center_crop",
    "quat2axisangle",
    "resize_for_policy",
]

#: Side of the images OpenVLA and OFT take (``MODEL_IMAGE_SIZES["openvla"]``).
IMAGE_SIZE = 224
ALOHA_PREPROCESS_SIZE = 256


def resize_for_policy(image: np.ndarray, size: int = IMAGE_SIZE) -> np.ndarray:
    """``uint8 (size, size, 3)``: JPEG round trip (quality 95), then Lanczos resize: the steps
    of OFT's ``resize_image_for_policy`` in Pillow (see the module doc for the difference)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(buf, format="JPEG", quality=95)
    pil = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    if pil.size != (size, size):
        pil = pil.resize((size, size), resample=Image.Resampling.LANCZOS)
    return np.asarray(pil, dtype=np.uint8)


#: OpenVLA's crop scale: the fraction of the image *area* kept (OV openvla_utils.py l.137).
CROP_SCALE = 0.9


def center_crop(image: np.ndarray, crop_scale: float = CROP_SCALE, size: int = IMAGE_SIZE) -> np.ndarray:
    """``uint8 (size, size, 3)``: OpenVLA's LIBERO center crop of ``image`` (``uint8 (H, W, C)``).

    The box keeps ``sqrt(crop_scale)`` of each side, centered (OV ``openvla_utils.py``
    l.101-117), and is resampled bilinearly to ``size`` x ``size`` with the sampling grid of
    ``tf.image.crop_and_resize`` (TensorFlow ``crop_and_resize_op.cc``: ``in_y = y1 * (H - 1) +
    y * (y2 - y1) * (H - 1) / (size - 1)``, corners at ``floor``/``ceil``), in float32 on values
    scaled to [0, 1]; then clipped and converted back as ``trunc(x * 255.5)`` (TensorFlow's
    ``convert_image_dtype`` float -> uint8).

    Raises:
        ValueError: ``image`` is not ``uint8 (H, W, C)`` or ``crop_scale`` is not in (0, 1].
    """
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3:
        raise ValueError(f"center_crop takes uint8 (H, W, C) images, got {image.dtype} {image.shape}")
    if not 0.0 < crop_scale <= 1.0:
        raise ValueError(f"crop_scale must be in (0, 1], got {crop_scale}")
    f32 = np.float32
    pixels = image.astype(f32) * f32(1.0 / 255.0)
    side = np.clip(np.sqrt(f32(crop_scale)), f32(0), f32(1))
    start = (f32(1) - side) / f32(2)
    end = start + side

    def grid(extent: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        scale = f32((end - start) * f32(extent - 1) / f32(size - 1))
        at = f32(start * f32(extent - 1)) + np.arange(size, dtype=f32) * scale
        low = np.floor(at)
        return low.astype(np.intp), np.ceil(at).astype(np.intp), (at - low).astype(f32)

    top, bottom, y_lerp = grid(image.shape[0])
    left, right, x_lerp = grid(image.shape[1])
    x_lerp = x_lerp[None, :, None]
    upper = pixels[top][:, left] + (pixels[top][:, right] - pixels[top][:, left]) * x_lerp
    lower = pixels[bottom][:, left] + (pixels[bottom][:, right] - pixels[bottom][:, left]) * x_lerp
    out = np.clip(upper + (lower - upper) * y_lerp[:, None, None], f32(0), f32(1))
    return (out * f32(255.5)).astype(np.uint8)


def _bicubic(image: np.ndarray, size: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(np.ascontiguousarray(image)).resize((size, size), resample=Image.BICUBIC))


def _camera(observation: dict[str, Any], key: str, env_id: int) -> np.ndarray:
    cams = observation.get("camera_obs") or {}
    if key not in cams:
        raise KeyError(f"observation has no camera_obs['{key}'] (turn on the environment's cameras)")
    return to_uint8(np.asarray(cams[key][env_id]), f"camera_obs['{key}']")


def _libero_gripper(chunk: np.ndarray) -> np.ndarray:
    out = chunk.copy()
    out[:, -1] = -np.sign(2.0 * out[:, -1] - 1.0)  # normalize [0,1]->[-1,1], binarize, invert
    return out


class OpenVLAAdapter(EmbodimentAdapter):
    """Base: which server it talks to, its chunk length and open-loop horizon."""

    #: ``openvla`` (one action) or ``oft`` (an action chunk).
    server: ClassVar[str] = "openvla"
    #: Rows of every reply (OFT's ``NUM_ACTIONS_CHUNK``; 1 for OpenVLA).
    chunk_length: ClassVar[int] = 1
    #: Rows replayed per request (the clients' ``num_open_loop_steps``).
    open_loop_horizon: ClassVar[int] = 1
    #: The deploy server's default port.
    default_port: ClassVar[int] = 8000
    #: OFT: the images each request carries, which its server must be started for
    #: (deploy.py ``--num_images_in_input``, default 3, l.129); 1 for OpenVLA.
    num_images_in_input: ClassVar[int] = 1
    #: OFT: the request carries ``state`` (deploy.py ``--use_proprio``, l.130).
    use_proprio: ClassVar[bool] = True
    #: LIBERO's gripper processing applies (see the module doc).
    _libero: ClassVar[bool] = False

    def postprocess(self, chunk: np.ndarray) -> np.ndarray:
        """The client's action processing before the simulator (default: none)."""
        return chunk

    def unpack_actions(self, response: dict[str, Any], key: str = "actions") -> np.ndarray:
        chunk = super().unpack_actions(response, key)
        return self.postprocess(chunk)

    def pack_actions(self, actions: np.ndarray, key: str = "actions") -> dict[str, Any]:
        """The server's reply for env actions (inverse of :meth:`postprocess` on the values it
        can produce: the LIBERO gripper at -1 / +1 comes from a model gripper of 1 / 0)."""
        chunk = np.asarray(actions, np.float64).copy()
        if self._libero:
            chunk[:, -1] = (1.0 - chunk[:, -1]) / 2.0
        return {key: chunk}


class OpenVLALiberoAdapter(OpenVLAAdapter):
    """OpenVLA (one 7-dim action) on LIBERO, as OV ``run_libero_eval.py`` queries it::

        image        uint8 (224, 224, 3)   agentview rotated 180 degrees, resized
        instruction  str                   the task's language
        unnorm_key   str                   the run's (e.g. libero_spatial); omitted when unset

    The image is center-cropped (:func:`center_crop`) unless ``center_crop`` is False, as OV's
    ``get_vla_action`` does with ``--center_crop True`` (its LIBERO default).

    Reply ``(7,)``: end-effector delta (6) and gripper, processed as the module doc says.
    """

    action_dim: ClassVar[int] = 7
    _libero: ClassVar[bool] = True

    def __init__(self, unnorm_key: str | None = None, center_crop: bool = True) -> None:
        self.unnorm_key = unnorm_key
        self.center_crop = center_crop

    def extract(self, observation: dict[str, Any], env_id: int) -> np.ndarray:
        return _camera(observation, "agentview_rgb", env_id)

    def pack_request(self, extracted: np.ndarray, instruction: str | None) -> dict[str, Any]:
        image = resize_for_policy(extracted[::-1, ::-1])
        if self.center_crop:
            image = center_crop(image)
        out: dict[str, Any] = {"image": image, "instruction": instruction or ""}
        if self.unnorm_key:
            out["unnorm_key"] = self.unnorm_key
        return out

    def postprocess(self, chunk: np.ndarray) -> np.ndarray:
        return _libero_gripper(chunk)


class OftLiberoAdapter(OpenVLAAdapter):
    """OpenVLA-OFT on LIBERO, as OFT ``run_libero_eval.py`` ``prepare_observation`` builds it::

        full_image   uint8 (224, 224, 3)   agentview rotated 180 degrees, resized
        wrist_image  uint8 (224, 224, 3)   eye-in-hand rotated 180 degrees, resized
        state        float64 (8,)          eef_pos, quat2axisangle(eef_quat), gripper_qpos
        instruction  str

    Reply: a chunk of 8 actions ``(7,)`` (``NUM_ACTIONS_CHUNK``), all replayed
    (``num_open_loop_steps = 8``), gripper processed as the module doc says.
    """

    server: ClassVar[str] = "oft"
    action_dim: ClassVar[int] = 7
    chunk_length: ClassVar[int] = 8
    open_loop_horizon: ClassVar[int] = 8
    default_port: ClassVar[int] = 8777
    #: deploy.py ``--num_images_in_input`` (OFT ``run_libero_eval.py`` l.96; README l.36).
    num_images_in_input: ClassVar[int] = 2
    _libero: ClassVar[bool] = True

    def extract(self, observation: dict[str, Any], env_id: int) -> dict[str, np.ndarray]:
        policy = observation.get("policy") or {}
        return {
            "agentview": _camera(observation, "agentview_rgb", env_id),
            "wrist": _camera(observation, "eye_in_hand_rgb", env_id),
            "state": np.concatenate(
                [
                    np.asarray(policy["eef_pos"][env_id], np.float64).reshape(3),
                    quat2axisangle(policy["eef_quat"][env_id]),
                    np.asarray(policy["gripper_qpos"][env_id], np.float64).reshape(2),
                ]
            ),
        }

    def pack_request(self, extracted: dict[str, np.ndarray], instruction: str | None) -> dict[str, Any]:
        return {
            "full_image": resize_for_policy(extracted["agentview"][::-1, ::-1]),
            "wrist_image": resize_for_policy(extracted["wrist"][::-1, ::-1]),
            "state": extracted["state"],
            "instruction": instruction or "",
        }

    def postprocess(self, chunk: np.ndarray) -> np.ndarray:
        return _libero_gripper(chunk)


class OftAlohaAdapter(OpenVLAAdapter):
    """OpenVLA-OFT on bimanual ALOHA, as OFT ``run_aloha_eval.py`` ``prepare_observation``::

        full_image         uint8 (224, 224, 3)   cam_high: bicubic to 256, then resized
        left_wrist_image   uint8 (224, 224, 3)   cam_left_wrist, the same
        right_wrist_image  uint8 (224, 224, 3)   cam_right_wrist, the same
        state              float64 (14,)         joint_pos (qpos), left arm then right
        instruction        str

    Reply: a chunk of 25 actions ``(14,)`` (absolute joint targets), all replayed open loop
    (``num_open_loop_steps = 25``). arena's ``aloha`` environment must render ``cam_high``,
    ``cam_left_wrist`` and ``cam_right_wrist``.
    """

    server: ClassVar[str] = "oft"
    action_dim: ClassVar[int] = 14
    chunk_length: ClassVar[int] = 25
    open_loop_horizon: ClassVar[int] = 25
    default_port: ClassVar[int] = 8777
    #: deploy.py ``--num_images_in_input`` (OFT ``ALOHA.md`` l.131; deploy.py's default).
    num_images_in_input: ClassVar[int] = 3
    cameras: ClassVar[dict[str, str]] = {
        "full_image": "cam_high_rgb",
        "left_wrist_image": "cam_left_wrist_rgb",
        "right_wrist_image": "cam_right_wrist_rgb",
    }

    def extract(self, observation: dict[str, Any], env_id: int) -> dict[str, np.ndarray]:
        out = {key: _camera(observation, cam, env_id) for key, cam in self.cameras.items()}
        policy = observation.get("policy") or {}
        out["state"] = np.asarray(policy["joint_pos"][env_id], np.float64).reshape(14)
        return out

    def pack_request(self, extracted: dict[str, np.ndarray], instruction: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {
            key: resize_for_policy(_bicubic(extracted[key], ALOHA_PREPROCESS_SIZE)) for key in self.cameras
        }
        out["state"] = extracted["state"]
        out["instruction"] = instruction or ""
        return out

