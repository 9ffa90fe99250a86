"""A vla-eval model server with a dummy model: vla-eval's own serving code, no weights.

``python -m arena_vla_eval.dummy --address 127.0.0.1:8000 --args.chunk_size=4`` runs
:class:`DummyModelServer` through ``vla_eval.model_servers.serve.run_server``, exactly as
vla-eval's model-server scripts run (jsonargparse maps ``--args.KEY`` onto the constructor).
It needs ``pip install vla-eval`` (0.8.0); arena's tests and the CI example use it, and it is
a template for a model of your own.

The model is strict about what it reads (vla-eval's observation convention: ``images`` of HWC
uint8, ``states`` a flat float vector when present, ``task_description`` a str) and raises on
anything else, so a client that sends the wrong thing gets vla-eval's ERROR reply. Its
chunk's rows say where they came from, so tests can see the server's chunk buffer at work::

    row k of a chunk = [0.01 * step, 0.01 * k, 0.01 * batch, 0.01 * episode] (then zeros)

with ``step`` the session's observation count when the model ran, ``batch`` the size of the
``predict_batch`` call, ``episode`` the session's EPISODE_START count (values clipped to
[-1, 1]). ``fail_at_step`` makes ``predict`` raise when the episode's step reaches it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

try:
    from vla_eval.model_servers.predict import PredictModelServer
    from vla_eval.specs import DimSpec
except ImportError as exc:  # pragma: no cover - only without vla-eval
    raise ImportError("arena_vla_eval.dummy needs vla-eval: pip install 'vla-eval==0.8.0'") from exc

__all__ = ["DummyModelServer", "main"]


class DummyModelServer(PredictModelServer):
    """A ``PredictModelServer`` whose model returns marked chunks (see the module doc).

    Args:
        action_dim: columns of each action.
        chunk_size: rows of each chunk (the server buffers them: one action per reply).
        max_batch_size, max_wait_time: vla-eval's batching across sessions.
        delay_s: seconds each model call takes.
        fail_at_step: raise in ``predict`` when the episode's step equals it (``None``: never).
        send_state: what the server asks of the benchmark in HELLO ``observation_params``.
        require_images: camera names every observation must hold (``None``: any).
        state_dim: the length ``states`` must have (``None``: any, or none).
        checkpoint: the model a config names (recorded, never loaded).
    """

    def __init__(
        self,
        action_dim: int = 4,
        chunk_size: int = 4,
        max_batch_size: int = 1,
        max_wait_time: float = 0.01,
        delay_s: float = 0.0,
        fail_at_step: int | None = None,
        send_state: bool = True,
        require_images: list[str] | None = None,
        state_dim: int | None = None,
        checkpoint: str | None = None,
    ) -> None:
        super().__init__(chunk_size=chunk_size, max_batch_size=max_batch_size, max_wait_time=max_wait_time)
        self.action_dim = action_dim
        self.delay_s = delay_s
        self.fail_at_step = fail_at_step
        self.send_state = send_state
        self.require_images = list(require_images) if require_images is not None else None
        self.state_dim = state_dim
        self.checkpoint = checkpoint  # what a config names as the model; the dummy loads nothing
        self.batch_sizes: list[int] = []
        self.observations: list[dict[str, Any]] = []
        self.episodes: dict[str, int] = {}
        self.episode_ends: list[dict[str, Any]] = []
        self.episode_starts: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    # -- what the HELLO says ------------------------------------------------------------------
    def get_observation_params(self) -> dict[str, Any]:
        return {"send_state": self.send_state}

    def get_action_spec(self) -> dict[str, DimSpec]:
        return {"action": DimSpec("action", self.action_dim, "dummy")}

    def get_observation_spec(self) -> dict[str, DimSpec]:
        return {"image": DimSpec("image", 0, "rgb_hwc_uint8")}

    # -- episodes -----------------------------------------------------------------------------
    async def on_episode_start(self, config: dict[str, Any], ctx: Any) -> None:
        with self._lock:
            self.episodes[ctx.session_id] = self.episodes.get(ctx.session_id, 0) + 1
            self.episode_starts.append(dict(config))
        await super().on_episode_start(config, ctx)

    async def on_episode_end(self, result: dict[str, Any], ctx: Any) -> None:
        with self._lock:
            self.episode_ends.append(dict(result))
        await super().on_episode_end(result, ctx)

    # -- the model ----------------------------------------------------------------------------
    def _check(self, obs: dict[str, Any]) -> None:
        images = obs.get("images")
        if not isinstance(images, dict):
            raise ValueError(f"observation has no 'images' map (keys: {sorted(obs)})")
        for name, image in images.items():
            if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
                raise ValueError(f"images[{name!r}] must be uint8 (H, W, 3), got {getattr(image, 'dtype', type(image))}")
        if self.require_images is not None and sorted(images) != sorted(self.require_images):
            raise ValueError(f"images {sorted(images)}; this model takes {sorted(self.require_images)}")
        states = obs.get("states")
        if self.state_dim is not None and (not isinstance(states, np.ndarray) or states.shape != (self.state_dim,)):
            raise ValueError(f"'states' must be ({self.state_dim},), got {getattr(states, 'shape', states)}")
        if states is not None and (not isinstance(states, np.ndarray) or states.dtype.kind != "f" or states.ndim != 1):
            raise ValueError(f"'states' must be a flat float array, got {getattr(states, 'shape', type(states))}")
        if not isinstance(obs.get("task_description"), str):
            raise ValueError("'task_description' must be a str")

    def predict_batch(self, obs_batch: list[dict[str, Any]], ctx_batch: list[Any]) -> list[dict[str, Any]]:
        if self.delay_s:
            time.sleep(self.delay_s)
        with self._lock:
            self.batch_sizes.append(len(obs_batch))
            self.observations.extend(obs_batch)
        out = []
        for obs, ctx in zip(obs_batch, ctx_batch):
            if self.fail_at_step is not None and ctx.step == self.fail_at_step:
                raise RuntimeError(f"dummy model fails at step {ctx.step}, as asked")
            self._check(obs)
            chunk = np.zeros((self.chunk_size or 1, self.action_dim), np.float32)
            chunk[:, 0] = 0.01 * ctx.step
            chunk[:, 1] = 0.01 * np.arange(len(chunk))
            if self.action_dim > 2:
                chunk[:, 2] = 0.01 * len(obs_batch)
            if self.action_dim > 3:
                chunk[:, 3] = 0.01 * self.episodes.get(ctx.session_id, 0)
            out.append({"actions": np.clip(chunk, -1.0, 1.0)})
        return out

    def predict(self, obs: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return self.predict_batch([obs], [ctx])[0]


def main() -> None:
    """``python -m arena_vla_eval.dummy [--address HOST:PORT] [--args.KEY=VALUE ...]``."""
    from vla_eval.model_servers.serve import run_server

    run_server(DummyModelServer)


if __name__ == "__main__":
    main()
