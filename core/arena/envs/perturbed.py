"""The generic perturbations (:data:`arena.envs.perturbations.GENERIC`) as a wrapper around any
vectorized :class:`~arena.envs.base.Environment`: it changes the observations the environment
returns and the actions it receives, never the simulator.

:func:`wrap` returns the environment itself when the run sets no perturbation, so an
unperturbed run is today's run. Otherwise :class:`PerturbedEnvironment`:

- images (every camera of ``camera_obs``, ``uint8 (N, H, W, 3)``), in this order: contrast
  around each image's mean, brightness (a factor), Gaussian blur (Pillow, radius = sigma in
  pixels), Gaussian noise (std on the 0-255 scale, rounded and clipped), JPEG encode/decode
  (Pillow, at the quality given);
- state: Gaussian noise of the given std added to every float array of ``policy`` (same dtype);
- actions: Gaussian noise added and clipped to the action space; then a fixed delay of ``d``
  control steps: the simulator applies the action the policy chose ``d`` steps earlier (the
  episode's first action until then) — a plain wrapper, unrelated to the live mode's delay;
- instruction: ``task_description`` (and every ``task`` entry of the observation equal to it)
  replaced by a paraphrase, or with a fraction of its words dropped / replaced. Policies take
  one instruction per run (``set_task_description``), so the variant is per run: its words are
  drawn from a Generator seeded by the text itself, the same in every episode.

Noise draws come from one Generator per env, perturbation and episode, seeded with the
episode seed (:func:`arena.envs.perturbations.episode_rng`): an episode sees the same noise
whatever ``num_envs`` or workers, and turning one perturbation on leaves another's draws alone.
Only the envs a ``reset_envs`` call resets get new perturbed rows; the others keep theirs.
Videos (``render``) show the simulator's frames, unperturbed; trajectories record what the
policy saw. Image perturbations of an environment whose observation has no ``camera_obs`` make
every reset fail with a ``ValueError`` saying so (the run's episodes end ``error``), rather than
leave a run that silently equals the nominal one. ``episode_info`` adds the active values, simulator ones included, to the
protocol fingerprint (``protocol.perturbations``).
"""

from __future__ import annotations

import io
from collections import deque
from typing import Any

import numpy as np

from arena.envs.perturbations import (
    GENERIC,
    IMAGE_PERTURBATIONS,
    INSTRUCTION_PERTURBATIONS,
    active_values,
    episode_rng,
    salt,
)
from arena.outputs.fingerprint import PROTOCOL_KEY

#: The record's protocol key holding the active perturbations.
PERTURBATIONS_KEY = "perturbations"

#: Words an ``instruction_replace`` perturbation puts in place of the instruction's own.
DISTRACTOR_WORDS = (
    "banana", "window", "quickly", "purple", "under", "spoon", "gently", "seven", "cloud", "drawer",
    "left", "table", "green", "bottle", "slowly", "above", "paper", "towel", "circle", "lamp",
)


def wrap(env: Any, env_cls: Any, config: Any) -> Any:
    """``env`` (built from ``env_cls`` and ``config``, in this process or in workers) wrapped by
    :class:`PerturbedEnvironment` when ``config.perturbations`` holds a non-nominal value, else
    ``env`` itself.

    Raises:
        ValueError: a perturbation the environment does not support, or a bad value.
    """
    values = active_values(env_cls, config)
    return PerturbedEnvironment(env, values) if values else env


def perturb_instruction(text: str, values: dict[str, Any]) -> str:
    """``text`` with the instruction perturbations of ``values`` applied (paraphrase first, then
    words dropped, then words replaced); word choices seeded by the text (CRC-32)."""
    if values.get("instruction") is not None:
        text = str(values["instruction"])
    words = text.split()
    rng = np.random.default_rng([salt(text), salt("instruction")])
    drop = float(values.get("instruction_drop", 0.0))
    if drop > 0 and words:
        k = int(round(drop * len(words)))
        gone = set(rng.choice(len(words), size=k, replace=False).tolist())
        words = [w for i, w in enumerate(words) if i not in gone]
    replace = float(values.get("instruction_replace", 0.0))
    if replace > 0 and words:
        k = int(round(replace * len(words)))
        for i in rng.choice(len(words), size=k, replace=False).tolist():
            words[i] = DISTRACTOR_WORDS[int(rng.integers(len(DISTRACTOR_WORDS)))]
    return " ".join(words)


def perturb_image(image: np.ndarray, values: dict[str, Any], rng: np.random.Generator | None) -> np.ndarray:
    """One ``uint8 (H, W, 3)`` frame with the image perturbations of ``values`` (module order);
    ``rng`` draws the noise. Returns a new array of the same shape and dtype."""
    out = image
    contrast, brightness = values.get("contrast"), values.get("brightness")
    if contrast is not None or brightness is not None:
        x = out.astype(np.float32)
        if contrast is not None:
            x = (x - x.mean()) * np.float32(contrast) + x.mean()
        if brightness is not None:
            x = x * np.float32(brightness)
        out = np.clip(np.rint(x), 0, 255).astype(np.uint8)
    if values.get("image_blur"):
        from PIL import Image, ImageFilter

        out = np.asarray(Image.fromarray(out).filter(ImageFilter.GaussianBlur(float(values["image_blur"]))))
    if values.get("image_noise"):
        noise = rng.normal(0.0, float(values["image_noise"]), out.shape) if rng is not None else 0.0
        out = np.clip(np.rint(out.astype(np.float64) + noise), 0, 255).astype(np.uint8)
    if values.get("jpeg_quality") is not None:
        from PIL import Image

        buffer = io.BytesIO()
        Image.fromarray(out).save(buffer, format="JPEG", quality=int(values["jpeg_quality"]))
        out = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
    return np.array(out, dtype=np.uint8, copy=True) if out is image else np.ascontiguousarray(out, dtype=np.uint8)


class PerturbedEnvironment:
    """``env`` with the generic perturbations ``values`` applied (see the module docstring).

    Everything not listed here (``action_space``, ``success_key``, ``render``, ``close``, …) is
    the wrapped environment's own.
    """

    def __init__(self, env: Any, values: dict[str, Any]) -> None:
        self.env = env
        #: The environment class the wrapped envs run (what class-level declarations are read from).
        self.env_cls = getattr(env, "env_cls", None) or type(env)
        self.values = dict(values)
        self.generic = {k: v for k, v in self.values.items() if k in GENERIC}
        self.num_envs = int(env.num_envs)
        self.images = {k: v for k, v in self.generic.items() if k in IMAGE_PERTURBATIONS}
        self.instruction = {k: v for k, v in self.generic.items() if k in INSTRUCTION_PERTURBATIONS}
        self.original_description = getattr(env, "task_description", "")
        self.task_description = (
            perturb_instruction(self.original_description, self.instruction) if self.instruction else self.original_description
        )
        self._rngs: dict[tuple[int, str], np.random.Generator] = {}
        self._history: list[deque] = [deque() for _ in range(self.num_envs)]
        self._obs: dict[str, Any] | None = None

    def __getattr__(self, name: str) -> Any:
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    # -- the Environment API ---------------------------------------------------------------
    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        """The wrapped ``reset_envs``; the reset envs get new Generators and a perturbed first
        observation, the others keep the rows they had."""
        from arena.errors import SimulatorError

        try:
            raw = self.env.reset_envs(env_ids, seeds)
            lost: set[int] = set()
        except SimulatorError as exc:
            if exc.observation is None:
                raise
            lost = set(exc.env_ids or ())
            exc.observation = self._after_reset(exc.observation, env_ids, seeds, lost)
            raise
        return self._after_reset(raw, env_ids, seeds, lost)

    def _after_reset(self, raw: dict[str, Any], env_ids: list[int], seeds: list[int], lost: set[int]) -> dict[str, Any]:
        if self.images and not (isinstance(raw, dict) and raw.get("camera_obs")):
            raise ValueError(
                f"image perturbations ({', '.join(self.images)}) need camera images, but the environment's "
                "observation has no camera_obs: turn its cameras on (e.g. Meta-World's environment.cameras: true), "
                "or the perturbed run would silently equal the nominal one"
            )
        reset = [int(e) for e in env_ids if int(e) not in lost]
        for e, seed in zip(env_ids, seeds):
            if int(e) in lost:
                continue
            self._history[int(e)].clear()
            for name in self.generic:
                self._rngs[(int(e), name)] = episode_rng(int(seed), name)
        fresh = self._perturb_obs(raw, reset)
        if self._obs is None:
            self._obs = fresh
        else:
            self._obs = _merge_rows(self._obs, fresh, reset, self.num_envs)
        return self._obs

    def step(self, actions: Any) -> tuple[dict[str, Any], Any, Any, Any, dict[str, Any]]:
        """The wrapped ``step`` on the perturbed (noisy, delayed) actions; observations perturbed."""
        applied = self._perturb_actions(actions)
        obs, reward, terminated, truncated, info = self.env.step(applied)
        self._obs = self._perturb_obs(obs, list(range(self.num_envs)))
        return self._obs, reward, terminated, truncated, info

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """The wrapped ``episode_info`` with ``protocol.perturbations``: every active value."""
        info = dict(self.env.episode_info(env_id) or {})
        protocol = info.get(PROTOCOL_KEY)
        info[PROTOCOL_KEY] = {**(protocol if isinstance(protocol, dict) else {}), PERTURBATIONS_KEY: dict(self.values)}
        return info

    # -- helpers ---------------------------------------------------------------------------
    def _rng(self, e: int, name: str) -> np.random.Generator:
        key = (e, name)
        if key not in self._rngs:  # an env stepped before any reset: seed 0
            self._rngs[key] = episode_rng(0, name)
        return self._rngs[key]

    def _perturb_obs(self, obs: Any, rows: list[int]) -> Any:
        if not isinstance(obs, dict):
            return obs
        out = dict(obs)
        if self.images and isinstance(obs.get("camera_obs"), dict):
            cams = {}
            for cam, frames in obs["camera_obs"].items():
                frames = np.asarray(frames)
                copy = frames.copy()
                for e in rows:
                    rng = self._rng(e, "image_noise") if "image_noise" in self.images else None
                    copy[e] = perturb_image(frames[e], self.images, rng)
                cams[cam] = copy
            out["camera_obs"] = cams
        std = self.generic.get("state_noise")
        if std and isinstance(obs.get("policy"), dict):
            state = {}
            for key, value in obs["policy"].items():
                array = np.asarray(value)
                if np.issubdtype(array.dtype, np.floating) and array.ndim >= 1 and array.shape[0] == self.num_envs:
                    array = array.copy()
                    for e in rows:
                        array[e] = array[e] + self._rng(e, "state_noise").normal(0.0, std, array[e].shape).astype(array.dtype)
                state[key] = array
            out["policy"] = state
        if self.instruction and isinstance(obs.get("task"), list):
            out["task"] = [self.task_description if t == self.original_description else t for t in obs["task"]]
        return out

    def _perturb_actions(self, actions: Any) -> Any:
        noise = self.generic.get("action_noise")
        delay = int(self.generic.get("action_delay", 0) or 0)
        if not noise and not delay:
            return actions
        array = np.array(actions, copy=True)
        if noise:
            for e in range(self.num_envs):
                array[e] = array[e] + self._rng(e, "action_noise").normal(0.0, noise, array[e].shape)
            space = getattr(self.env, "action_space", None)
            low, high = getattr(space, "low", None), getattr(space, "high", None)
            if low is not None and high is not None:
                array = np.clip(array, low, high).astype(array.dtype)
        if delay:
            for e in range(self.num_envs):
                history = self._history[e]
                history.append(array[e].copy())
                while len(history) > delay + 1:
                    history.popleft()
                array[e] = history[0]
        return array


def _merge_rows(previous: Any, fresh: Any, rows: list[int], num_envs: int) -> Any:
    """``fresh`` where the rows ``rows`` come from, ``previous`` for every other per-env row."""
    if isinstance(fresh, dict):
        if not isinstance(previous, dict):
            return fresh
        return {k: _merge_rows(previous.get(k), v, rows, num_envs) if k in previous else v for k, v in fresh.items()}
    if isinstance(fresh, np.ndarray) and isinstance(previous, np.ndarray) and fresh.shape == previous.shape \
            and fresh.ndim >= 1 and fresh.shape[0] == num_envs:
        out = previous.copy()
        out[rows] = fresh[rows]
        return out
    if isinstance(fresh, list) and isinstance(previous, list) and len(fresh) == len(previous) == num_envs:
        return [fresh[i] if i in rows else previous[i] for i in range(num_envs)]
    return fresh
