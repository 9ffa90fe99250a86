"""Simulator perturbations of a MuJoCo scene (:data:`arena.envs.perturbations.MUJOCO`), shared by
the MuJoCo environments (Meta-World, Franka Kitchen; plugins may reuse it).

:class:`MujocoPerturber` keeps the nominal values of every model array it edits, so applying is
idempotent: each call restores them and applies the run's values. Model edits (cameras, lights,
table colour, objects' mass and friction) are the same for every episode of the run; the object
offset moves each free joint's initial ``x, y`` by ``object_offset`` metres in a direction drawn
from the episode seed (:func:`arena.envs.perturbations.episode_rng`), then ``mj_forward``.

- ``camera_shift`` / ``camera_height``: the camera's position moves along its own x (image right)
  / y (image up) axis, in its body's frame; ``camera_rotate``: its orientation turns about its
  own y axis (a pan). Only the named observation cameras.
- ``light_intensity``: every light's diffuse colour and the headlight's diffuse and ambient are
  scaled. ``light_direction``: every light's direction and position turn about the vertical
  (z) axis of its body's frame.
- ``table_color``: the named table materials' RGB multiplied by ``[r, g, b]`` (a texture, if
  any, is multiplied by the material colour when MuJoCo renders).
- ``object_mass`` / ``object_friction``: the bodies carrying a free joint (the movable objects):
  mass and inertia scaled / their geoms' sliding friction scaled.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from arena.envs.perturbations import MUJOCO, episode_rng

#: MuJoCo's joint type of a free joint (``mjJNT_FREE``).
_FREE = 0


def _quat_about(axis: tuple[float, float, float], degrees: float) -> np.ndarray:
    half = math.radians(degrees) / 2
    return np.array([math.cos(half), *(math.sin(half) * np.asarray(axis, float))])


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    ])


def _rotate(quat: np.ndarray, vector: np.ndarray) -> np.ndarray:
    q = np.asarray(quat, float) / np.linalg.norm(quat)
    conj = q * np.array([1, -1, -1, -1])
    return _quat_mul(_quat_mul(q, np.array([0.0, *vector])), conj)[1:]


def supported(names: Iterable[str]) -> tuple[Any, ...]:
    """The :data:`MUJOCO` declarations of ``names``, for an environment's ``perturbations``."""
    return tuple(MUJOCO[n] for n in names)


def _material(model: Any, name: str) -> int | None:
    try:
        return int(model.material(name).id)
    except KeyError:
        return None


class MujocoPerturber:
    """Applies ``values`` (active simulator perturbations) to one ``mujoco.MjModel``.

    ``cameras``: names of the observation cameras to move (``KeyError`` for one the model does
    not have); ``table_materials``: names of the materials to tint (those the model lacks are
    skipped: a task's scene may not have them all).
    """

    def __init__(self, model: Any, values: Mapping[str, Any], *, cameras: Iterable[str] = (),
                 table_materials: Iterable[str] = ()) -> None:
        self.model = model
        self.values = dict(values)
        self.cameras = [model.camera(name).id for name in cameras]
        self.materials = [_material(model, name) for name in table_materials]
        self.materials = [m for m in self.materials if m is not None]
        self.free_joints = [j for j in range(model.njnt) if model.jnt_type[j] == _FREE]
        self.free_bodies = sorted({int(model.jnt_bodyid[j]) for j in self.free_joints})
        self.free_geoms = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in self.free_bodies]
        self._nominal = {
            "cam_pos": model.cam_pos.copy(), "cam_quat": model.cam_quat.copy(),
            "light_diffuse": model.light_diffuse.copy(), "light_dir": model.light_dir.copy(),
            "light_pos": model.light_pos.copy(), "mat_rgba": model.mat_rgba.copy(),
            "body_mass": model.body_mass.copy(), "body_inertia": model.body_inertia.copy(),
            "geom_friction": model.geom_friction.copy(),
            "headlight_diffuse": np.array(model.vis.headlight.diffuse), "headlight_ambient": np.array(model.vis.headlight.ambient),
        }

    @property
    def active(self) -> bool:
        return bool(self.values)

    def apply_model(self) -> None:
        """Restore the edited arrays to nominal, then apply the run's model edits."""
        m, n, v = self.model, self._nominal, self.values
        if not v:
            return
        for name in ("cam_pos", "cam_quat", "light_diffuse", "light_dir", "light_pos", "mat_rgba", "body_mass",
                     "body_inertia", "geom_friction"):
            getattr(m, name)[:] = n[name]
        m.vis.headlight.diffuse[:] = n["headlight_diffuse"]
        m.vis.headlight.ambient[:] = n["headlight_ambient"]
        for c in self.cameras:
            offset = np.array([v.get("camera_shift", 0.0), v.get("camera_height", 0.0), 0.0])
            if offset.any():
                m.cam_pos[c] = n["cam_pos"][c] + _rotate(n["cam_quat"][c], offset)
            if v.get("camera_rotate"):
                m.cam_quat[c] = _quat_mul(n["cam_quat"][c], _quat_about((0.0, 1.0, 0.0), v["camera_rotate"]))
        if "light_intensity" in v:
            s = float(v["light_intensity"])
            m.light_diffuse[:] = n["light_diffuse"] * s
            m.vis.headlight.diffuse[:] = n["headlight_diffuse"] * s
            m.vis.headlight.ambient[:] = n["headlight_ambient"] * s
        if v.get("light_direction"):
            turn = _quat_about((0.0, 0.0, 1.0), v["light_direction"])
            for i in range(m.nlight):
                m.light_dir[i] = _rotate(turn, n["light_dir"][i])
                m.light_pos[i] = _rotate(turn, n["light_pos"][i])
        if "table_color" in v:
            for mat in self.materials:
                m.mat_rgba[mat, :3] = n["mat_rgba"][mat, :3] * np.asarray(v["table_color"], float)
        if "object_mass" in v:
            for b in self.free_bodies:
                m.body_mass[b] = n["body_mass"][b] * v["object_mass"]
                m.body_inertia[b] = n["body_inertia"][b] * v["object_mass"]
        if "object_friction" in v:
            for g in self.free_geoms:
                m.geom_friction[g, 0] = n["geom_friction"][g, 0] * v["object_friction"]

    def apply_data(self, data: Any, seed: int) -> bool:
        """Move the free joints' initial ``x, y`` (``object_offset``) for the episode of ``seed``;
        returns whether anything moved (then ``mj_forward`` has run)."""
        offset = float(self.values.get("object_offset", 0.0) or 0.0)
        if not offset or not self.free_joints:
            return False
        import mujoco

        angle = episode_rng(seed, "object_offset").uniform(0.0, 2 * math.pi)
        for j in self.free_joints:
            adr = int(self.model.jnt_qposadr[j])
            data.qpos[adr] += offset * math.cos(angle)
            data.qpos[adr + 1] += offset * math.sin(angle)
        mujoco.mj_forward(self.model, data)
        return True
