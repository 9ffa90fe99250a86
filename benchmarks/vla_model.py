"""A stand-in for pi0.5-DROID with plain torch: same requests, same reply, compute of that order.

``VlaModel`` is a :class:`arena.models.model.Model` (``metadata``, ``load``, ``infer``,
``infer_batch``) with random weights (nothing is downloaded):

* a ViT-L/16-sized transformer (``size="vit-l"``: patch 16, width 1024, 24 layers, 16 heads,
  MLP 4096) over **both** DROID images of a request, 224x224 uint8 each (196 tokens per image);
* a flow-matching head integrated in 10 Euler steps, conditioned on the pooled image features
  and the 8-d proprioceptive state, giving an action chunk ``actions: float32 (15, 8)``.

``size="smoke"`` is the same architecture at toy size (patch 32, width 64, 2 layers) for a
CPU smoke test; on the CPU torch runs one intra-op thread per call (several threads on a busy
machine spin instead of computing).
It is thread-safe (``concurrent_batches = 2``: the server may stack and copy the next batch
while the current one computes). Served with ``arena serve benchmarks.vla_model:VlaModel -o
size=vit-l -o device=cuda`` (the repository root on ``PYTHONPATH``), or wrapped for openpi's
own server by :mod:`benchmarks.openpi_host`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

IMAGE_KEYS = ("observation/exterior_image_1_left", "observation/wrist_image_left")


@dataclass(frozen=True)
class VlaSize:
    width: int
    depth: int
    heads: int
    mlp: int
    flow_width: int
    patch: int


SIZES = {
    "vit-l": VlaSize(width=1024, depth=24, heads=16, mlp=4096, flow_width=1024, patch=16),
    "smoke": VlaSize(width=64, depth=2, heads=4, mlp=128, flow_width=128, patch=32),
}
HORIZON, ACTION_DIM, STATE_DIM, FLOW_STEPS, IMAGE = 15, 8, 8, 10, 224


def _build(size: VlaSize) -> Any:
    import torch
    from torch import nn

    tokens = (IMAGE // size.patch) ** 2

    class Vla(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patch = nn.Conv2d(3, size.width, kernel_size=size.patch, stride=size.patch)
            self.position = nn.Parameter(torch.randn(1, tokens, size.width) * 0.02)
            self.camera = nn.Parameter(torch.randn(2, 1, size.width) * 0.02)
            layer = nn.TransformerEncoderLayer(
                size.width, size.heads, size.mlp, dropout=0.0, activation="gelu",
                batch_first=True, norm_first=True,
            )
            self.encoder = nn.TransformerEncoder(layer, size.depth, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(size.width)
            cond = 2 * size.width + STATE_DIM
            self.flow = nn.Sequential(
                nn.Linear(HORIZON * ACTION_DIM + cond + 1, size.flow_width), nn.GELU(),
                nn.Linear(size.flow_width, size.flow_width), nn.GELU(),
                nn.Linear(size.flow_width, HORIZON * ACTION_DIM),
            )

        def forward(self, images: torch.Tensor, state: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
            # images: uint8 (B, 2, H, W, 3); state (B, 8); noise (B, 15 * 8)
            batch = images.shape[0]
            x = images.flatten(0, 1).permute(0, 3, 1, 2).to(self.position.dtype) / 127.5 - 1.0
            x = self.patch(x).flatten(2).transpose(1, 2) + self.position  # (2B, 196, width)
            x = x.view(batch, 2, tokens, -1) + self.camera.unsqueeze(0)
            x = self.encoder(x.flatten(1, 2))  # (B, 392, width): both images attend to each other
            features = self.norm(x).view(batch, 2, tokens, -1).mean(dim=2).flatten(1)
            cond = torch.cat([features, state.to(features.dtype)], dim=1)
            actions = noise.to(features.dtype)
            dt = 1.0 / FLOW_STEPS
            for step in range(FLOW_STEPS):  # Euler steps of the flow from noise to actions
                t = torch.full((batch, 1), step * dt, dtype=features.dtype, device=features.device)
                actions = actions + dt * self.flow(torch.cat([actions, cond, t], dim=1))
            return actions.view(batch, HORIZON, ACTION_DIM)

    return Vla()


class VlaModel:
    """The benchmark's policy model (see the module docstring).

    Args:
        size: ``"vit-l"`` (pi0.5-DROID-sized compute) or ``"smoke"`` (toy, for CPUs).
        device: ``"cuda"``, ``"cpu"``; ``None`` picks CUDA when available.
        dtype: ``"bfloat16"`` (default on CUDA) or ``"float32"`` (default on the CPU).
        seed: weights and flow noise are drawn from it.
    """

    concurrent_batches = 2

    def __init__(self, size: str = "vit-l", device: str | None = None, dtype: str | None = None, seed: int = 0) -> None:
        if size not in SIZES:
            raise ValueError(f"size must be one of {sorted(SIZES)}, got {size!r}")
        self.size = size
        self.device = device
        self.dtype = dtype
        self.seed = seed
        self._net: Any = None

    def metadata(self) -> dict[str, Any]:
        return {"model": "arena-benchmark-vla", "size": self.size, "action_horizon": HORIZON}

    def load(self) -> None:
        import torch

        torch.manual_seed(self.seed)
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = getattr(torch, self.dtype or ("bfloat16" if device.startswith("cuda") else "float32"))
        self._device = torch.device(device)
        if self._device.type == "cpu":
            torch.set_num_threads(1)
        self._net = _build(SIZES[self.size]).to(self._device, dtype).eval()
        self._generator = torch.Generator(device="cpu").manual_seed(self.seed)
        for batch in (1, 2):  # first calls allocate and pick kernels: not part of any measurement
            self.infer_batch([_blank_request()] * batch)

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        return self.infer_batch([obs])[0]

    def infer_batch(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Replies ``{"actions": float32 (15, 8)}`` to DROID requests (two uint8 (224, 224, 3)
        images, ``joint_position`` (7,) and ``gripper_position`` (1,))."""
        import torch

        images = np.stack([np.stack([obs[key] for key in IMAGE_KEYS]) for obs in batch])
        state = np.stack([
            np.concatenate([np.ravel(obs["observation/joint_position"]), np.ravel(obs["observation/gripper_position"])])
            for obs in batch
        ]).astype(np.float32)
        noise = torch.randn(len(batch), HORIZON * ACTION_DIM, generator=self._generator)
        with torch.inference_mode():
            actions = self._net(
                torch.from_numpy(images).to(self._device, non_blocking=True),
                torch.from_numpy(state).to(self._device, non_blocking=True),
                noise.to(self._device, non_blocking=True),
            )
            chunk = actions.float().cpu().numpy()
        return [{"actions": chunk[i]} for i in range(len(batch))]


def _blank_request() -> dict[str, Any]:
    image = np.zeros((IMAGE, IMAGE, 3), np.uint8)
    return {
        IMAGE_KEYS[0]: image, IMAGE_KEYS[1]: image,
        "observation/joint_position": np.zeros(7), "observation/gripper_position": np.zeros(1), "prompt": "",
    }
