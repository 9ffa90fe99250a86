"""Perturbations: what an environment option may change, and the catalogue every environment gets.

A run perturbs its episodes with ``environment.perturbations: {NAME: value}`` (e.g.
``{image_noise: 20, camera_shift: 0.05}``). Each name is a :class:`Perturbation`: its unit,
the range its value may take and the *nominal* value, the one that changes nothing. Two
kinds:

- **generic** (:data:`GENERIC`): any environment gets them from core, applied to what the
  environment returns and to the actions it receives by :mod:`arena.envs.perturbed` (a wrapper
  around the vectorized environment; the simulator is untouched): image noise, blur, JPEG
  quality, brightness and contrast; state noise; action noise and a fixed action delay in
  control steps; instruction variants (a paraphrase, words dropped or replaced).
- **simulator** ones an environment class declares itself (``Environment.perturbations`` /
  ``perturbations_for(config)``) and applies after ``reset(seed)`` (``Environment.
  perturb_after_reset``): camera pose, lights, table colour, objects' initial pose, mass and
  friction (:data:`MUJOCO`, the declarations the MuJoCo benchmarks share, applied by
  :mod:`arena.envs.mujoco_perturb`).

A name an environment supports neither way is a configuration error naming the environment and
the names it supports (:func:`check_values`). Values at their nominal are dropped
(:func:`active_values`), so a run that sets every perturbation to nominal is the unperturbed run
(same observations, byte for byte, same fingerprint). The active values are the records'
``protocol.perturbations`` (:mod:`arena.outputs.fingerprint`): ``arena compare`` refuses to
compare a perturbed run with a nominal one unless told to.

Randomness is seeded from the episode seed only (``numpy`` Generators on ``[seed, salt of the
perturbation]``), so an episode's perturbation does not depend on ``num_envs``, workers, or
which other perturbations are on.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Kind = Literal["number", "integer", "rgb", "text"]


class PerturbationError(ValueError):
    """A perturbation an environment does not support, or a bad value; ``name`` names it."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


@dataclass(frozen=True)
class Perturbation:
    """One perturbation an environment accepts.

    ``kind``: ``"number"`` (a float in ``[low, high]``), ``"integer"``, ``"rgb"`` (three floats,
    each in ``[low, high]``) or ``"text"`` (a string; ``nominal`` ``None``). ``where``:
    ``"generic"`` (core's wrapper) or ``"simulator"`` (the environment applies it).
    """

    name: str
    unit: str
    low: float | None
    high: float | None
    nominal: Any
    description: str
    kind: Kind = "number"
    where: Literal["generic", "simulator"] = "generic"

    def check(self, value: Any) -> Any:
        """``value`` normalized (float, int, ``[r, g, b]`` or str).

        Raises:
            ValueError: wrong type or out of ``[low, high]`` (the message names the range and unit).
        """
        if value is None and self.nominal is None:
            return None
        if self.kind == "text":
            if value is None or isinstance(value, str):
                return value
            raise ValueError(f"{self.name}: expected a text ({self.description}), got {value!r}")
        if self.kind == "rgb":
            if not isinstance(value, (list, tuple)) or len(value) != 3:
                raise ValueError(f"{self.name}: expected [r, g, b] ({self.unit}), got {value!r}")
            return [self._number(v) for v in value]
        if self.kind == "integer":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
                raise ValueError(f"{self.name}: expected a whole number of {self.unit}, got {value!r}")
            return int(self._number(value))
        return self._number(value)

    def _number(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{self.name}: expected a number in {self.unit}, got {value!r}")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ValueError(f"{self.name}: {value} is outside [{self.low}, {self.high}] {self.unit}")
        return float(value)

    def is_nominal(self, value: Any) -> bool:
        """Whether ``value`` (checked) changes nothing."""
        return value is None or value == self.nominal

    def describe(self) -> dict[str, Any]:
        """JSON-able declaration: name, unit, range, nominal, kind, where, description."""
        return {"name": self.name, "unit": self.unit, "range": [self.low, self.high], "nominal": self.nominal,
                "kind": self.kind, "where": self.where, "description": self.description}


def _generic(name: str, unit: str, low: float | None, high: float | None, nominal: Any, description: str,
             kind: Kind = "number") -> Perturbation:
    return Perturbation(name, unit, low, high, nominal, description, kind, "generic")


#: Perturbations core applies to any environment (:mod:`arena.envs.perturbed`), in the order
#: the wrapper applies them to an image: contrast, brightness, blur, noise, JPEG.
GENERIC: dict[str, Perturbation] = {p.name: p for p in (
    _generic("contrast", "factor", 0.0, 4.0, 1.0, "camera images' contrast around each image's mean (1: unchanged)"),
    _generic("brightness", "factor", 0.0, 4.0, 1.0, "camera images' pixel values multiplied (1: unchanged)"),
    _generic("image_blur", "pixels (Gaussian sigma)", 0.0, 20.0, 0.0, "camera images blurred (Pillow GaussianBlur radius)"),
    _generic("image_noise", "pixel values (std, 0-255 scale)", 0.0, 128.0, 0.0,
             "Gaussian noise added to camera images, a new draw every step"),
    _generic("jpeg_quality", "JPEG quality (1-100)", 1, 100, None,
             "camera images JPEG-encoded at this quality and decoded (null: not encoded)", "integer"),
    _generic("state_noise", "state units (std)", 0.0, None, 0.0,
             "Gaussian noise added to every float vector of the observation's `policy` (proprioception)"),
    _generic("action_noise", "action units (std)", 0.0, None, 0.0,
             "Gaussian noise added to every action, then clipped to the action space"),
    _generic("action_delay", "control steps", 0, 100, 0,
             "each action is applied this many control steps late (the first action is held until then)", "integer"),
    _generic("instruction", "text", None, None, None,
             "the instruction replaced by this text (a paraphrase)", "text"),
    _generic("instruction_drop", "fraction of words", 0.0, 1.0, 0.0, "this fraction of the instruction's words dropped"),
    _generic("instruction_replace", "fraction of words", 0.0, 1.0, 0.0,
             "this fraction of the instruction's words replaced by unrelated words"),
)}

IMAGE_PERTURBATIONS = ("contrast", "brightness", "image_blur", "image_noise", "jpeg_quality")
INSTRUCTION_PERTURBATIONS = ("instruction", "instruction_drop", "instruction_replace")


def _sim(name: str, unit: str, low: float | None, high: float | None, nominal: Any, description: str,
         kind: Kind = "number") -> Perturbation:
    return Perturbation(name, unit, low, high, nominal, description, kind, "simulator")


#: Simulator perturbations of a MuJoCo scene (:mod:`arena.envs.mujoco_perturb` applies them):
#: each MuJoCo environment declares the subset its scene supports.
MUJOCO: dict[str, Perturbation] = {p.name: p for p in (
    _sim("camera_shift", "m", -0.5, 0.5, 0.0, "observation cameras moved sideways along their image's right axis"),
    _sim("camera_height", "m", -0.5, 0.5, 0.0, "observation cameras moved along their image's up axis"),
    _sim("camera_rotate", "degrees", -45.0, 45.0, 0.0, "observation cameras panned about their image's up axis"),
    _sim("light_intensity", "factor", 0.0, 5.0, 1.0, "every light's and the headlight's diffuse intensity scaled"),
    _sim("light_direction", "degrees", -180.0, 180.0, 0.0, "every light turned about the world's vertical axis"),
    _sim("table_color", "rgb factors (0-1)", 0.0, 1.0, [1.0, 1.0, 1.0],
         "the table's material colour multiplied by [r, g, b]", "rgb"),
    _sim("object_offset", "m", 0.0, 0.2, 0.0,
         "free objects' initial position moved this far on the table, in a direction drawn from the episode seed"),
    _sim("object_mass", "factor", 0.05, 20.0, 1.0, "free objects' mass and inertia scaled"),
    _sim("object_friction", "factor", 0.05, 20.0, 1.0, "free objects' sliding friction scaled"),
)}


def declared(env_cls: Any, config: Any) -> dict[str, Perturbation]:
    """Every perturbation a run of ``env_cls`` with ``config`` accepts: :data:`GENERIC` plus
    the class's ``perturbations_for(config)`` (simulator ones), by name."""
    found = dict(GENERIC)
    hook = getattr(env_cls, "perturbations_for", None)
    own = hook(config) if callable(hook) else getattr(env_cls, "perturbations", ())
    for p in own or ():
        found[p.name] = p
    return found


def check_values(env_cls: Any, config: Any, values: Mapping[str, Any] | None) -> dict[str, Any]:
    """``values`` (``environment.perturbations``) checked against what the environment supports;
    returns them normalized.

    Raises:
        PerturbationError: an unknown name (the message names the environment and the
            supported list) or a bad value (its range and unit); ``name`` is the offending name.
    """
    supported = declared(env_cls, config)
    out: dict[str, Any] = {}
    for name, value in (values or {}).items():
        if name not in supported:
            env = getattr(env_cls, "name", "") or getattr(env_cls, "__name__", "?")
            sim = sorted(n for n, p in supported.items() if p.where == "simulator")
            raise PerturbationError(
                f"environment '{env}' does not support perturbation '{name}'; it supports {', '.join(sim) or 'no simulator perturbation'} "
                f"(simulator) and {', '.join(GENERIC)} (generic)",
                name,
            )
        try:
            out[name] = supported[name].check(value)
        except ValueError as exc:
            raise PerturbationError(str(exc), name) from None
    return out


def active_values(env_cls: Any, config: Any) -> dict[str, Any]:
    """The run's perturbations that change something (nominal values dropped), sorted by name."""
    values = check_values(env_cls, config, getattr(config, "perturbations", None))
    supported = declared(env_cls, config)
    return {k: values[k] for k in sorted(values) if not supported[k].is_nominal(values[k])}


def simulator_values(env: Any) -> dict[str, Any]:
    """The active simulator perturbations of an environment instance (its ``config``)."""
    config = getattr(env, "config", None)
    values = active_values(type(env), config)
    return {k: v for k, v in values.items() if k not in GENERIC}


def salt(name: str) -> int:
    """A stable integer per perturbation name (CRC-32), mixed into its Generator's seed."""
    return zlib.crc32(name.encode())


def episode_rng(seed: int, name: str) -> np.random.Generator:
    """The Generator of perturbation ``name`` in the episode of ``seed``."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFFFFFFFFFF, salt(name)])


def describe_all(declarations: Iterable[Perturbation]) -> list[dict[str, Any]]:
    """:meth:`Perturbation.describe` of each, in order."""
    return [p.describe() for p in declarations]


def declared_by_class(env_cls: Any) -> tuple[Perturbation, ...]:
    """The simulator perturbations a class declares without a config (its ``perturbations``
    attribute; ``perturbations_for`` may add others per config)."""
    return tuple(getattr(env_cls, "perturbations", ()) or ())


def listing(env_name: str, env_cls: Any, config: Any = None) -> list[str]:
    """Lines for ``arena validate --list-overrides`` and ``arena plugins``: every perturbation a
    run of ``env_cls`` accepts, one a line: ``name: unit, range [low, high], nominal V (where)``."""
    found = declared(env_cls, config) if config is not None else {**GENERIC, **{p.name: p for p in declared_by_class(env_cls)}}
    lines = []
    for p in sorted(found.values(), key=lambda p: (p.where != "simulator", p.name)):
        bounds = f", range [{p.low}, {p.high}]" if p.kind != "text" else ""
        lines.append(f"{p.name}: {p.unit}{bounds}, nominal {p.nominal} ({p.where}) — {p.description}")
    return lines
