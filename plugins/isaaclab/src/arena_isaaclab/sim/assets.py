"""Small USD assets authored with ``pxr``, so the plugin's test task never downloads anything.

:func:`write_asset_root` lays out a folder the way Isaac Lab expects its asset root
(``ISAACSIM_ASSET_ROOT``), holding:

- ``Isaac/IsaacLab/Environments/Grid/default_ground_plane_checker_v1/default_ground_plane.usda``:
  a ground plane at the path of Isaac Lab's default one (``GroundPlaneCfg()``), a collision
  ``Plane`` and a grey visual quad;
- ``Arena/reach_arm.usda``: a fixed-base arm of ``1 + len(joints)`` rigid bodies joined by
  revolute joints with angular drives (the reach task's 3-joint arm, see :data:`ARM`);
- ``Arena/droid_arm.usda``: a 7-joint arm with a one-joint gripper, for the DROID-layout
  stand-in of IsaacLab-Arena (see :data:`DROID_ARM`);
- ``Arena/cube.usda``: a 5 cm rigid cube (collision box, 50 g).

Units: metres, kilograms, degrees for USD joint limits (the USD physics schema's unit).
The files are a few kilobytes and take milliseconds to write; writing is idempotent.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

#: Where each asset lives under the asset root.
GROUND_PLANE = "Isaac/IsaacLab/Environments/Grid/default_ground_plane_checker_v1/default_ground_plane.usda"
REACH_ARM = "Arena/reach_arm.usda"
DROID_ARM = "Arena/droid_arm.usda"
CUBE = "Arena/cube.usda"


@dataclass(frozen=True)
class Joint:
    """One revolute joint and the link it moves.

    ``axis``: ``"X"``, ``"Y"`` or ``"Z"`` in the parent link's frame; ``offset``: the joint's
    position in the parent link's frame (m); ``length``: the child link's length along its
    own +z (m); ``limits``: rad.
    """

    name: str
    axis: str
    offset: tuple[float, float, float]
    length: float
    limits: tuple[float, float]
    mass: float = 0.2


@dataclass(frozen=True)
class ArmSpec:
    """A serial arm standing on a fixed base; every link points up (+z) at zero joint angles."""

    joints: tuple[Joint, ...]
    base_height: float = 0.1
    radius: float = 0.025


#: The reach task's arm: yaw at the base, then shoulder and elbow pitch. At zero angles it
#: points straight up; its tip (``ee``) is 0.85 m above the ground.
ARM = ArmSpec(
    joints=(
        Joint("yaw", "Z", (0.0, 0.0, 0.1), 0.2, (-math.pi, math.pi), mass=0.3),
        Joint("shoulder", "Y", (0.0, 0.0, 0.2), 0.3, (-2.0, 2.0)),
        Joint("elbow", "Y", (0.0, 0.0, 0.3), 0.25, (-2.6, 2.6), mass=0.15),
    )
)
#: Length of the reach arm's last link: its tip is ``ee``.
ARM_TIP = ARM.joints[-1].length

#: A DROID-shaped arm (7 joints like a Franka Panda) plus one gripper joint (0 open ... 1 closed,
#: in rad of a small finger hinge). Not a Panda's kinematics: the stand-in needs its layout only.
DROID_ARM_SPEC = ArmSpec(
    joints=(
        Joint("panda_joint1", "Z", (0.0, 0.0, 0.1), 0.2, (-2.9, 2.9)),
        Joint("panda_joint2", "Y", (0.0, 0.0, 0.2), 0.1, (-1.8, 1.8)),
        Joint("panda_joint3", "Z", (0.0, 0.0, 0.1), 0.2, (-2.9, 2.9)),
        Joint("panda_joint4", "Y", (0.0, 0.0, 0.2), 0.1, (-3.0, 0.0)),
        Joint("panda_joint5", "Z", (0.0, 0.0, 0.1), 0.15, (-2.9, 2.9)),
        Joint("panda_joint6", "Y", (0.0, 0.0, 0.15), 0.05, (-0.1, 3.7)),
        Joint("panda_joint7", "Z", (0.0, 0.0, 0.05), 0.05, (-2.9, 2.9), mass=0.1),
        Joint("finger_joint", "X", (0.0, 0.0, 0.05), 0.04, (0.0, 1.0), mass=0.05),
    ),
    radius=0.02,
)

CUBE_SIZE = 0.05


def write_asset_root(root: str | os.PathLike[str]) -> Path:
    """Write every asset under ``root`` (created if missing); return ``root`` as a ``Path``.

    Raises:
        ImportError: ``pxr`` (``usd-exchange`` / ``usd-core``) is not installed.
    """
    root = Path(root)
    write_ground_plane(root / GROUND_PLANE)
    write_arm(root / REACH_ARM, ARM)
    write_arm(root / DROID_ARM, DROID_ARM_SPEC)
    write_cube(root / CUBE)
    return root


def _new_stage(path: Path):
    from pxr import Usd, UsdGeom, UsdPhysics

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    return stage


def _color(gprim, rgb: tuple[float, float, float]) -> None:
    from pxr import Gf

    gprim.CreateDisplayColorAttr([Gf.Vec3f(*rgb)])


def write_ground_plane(path: Path, half_size: float = 50.0) -> None:
    """A collision plane (``Plane``, z up) and a grey visual quad of ``2 * half_size`` m."""
    from pxr import Gf, Sdf, UsdGeom, UsdPhysics, Vt

    stage = _new_stage(path)
    root = UsdGeom.Xform.Define(stage, "/GroundPlane")
    stage.SetDefaultPrim(root.GetPrim())
    plane = UsdGeom.Plane.Define(stage, "/GroundPlane/CollisionPlane")
    plane.CreateAxisAttr("Z")
    plane.CreateWidthAttr(2 * half_size)
    plane.CreateLengthAttr(2 * half_size)
    plane.CreatePurposeAttr(UsdGeom.Tokens.guide)
    UsdPhysics.CollisionAPI.Apply(plane.GetPrim())
    UsdGeom.Xform.Define(stage, "/GroundPlane/Environment")
    UsdGeom.Xformable(stage.GetPrimAtPath("/GroundPlane/Environment")).AddScaleOp().Set(Gf.Vec3f(1, 1, 1))
    mesh = UsdGeom.Mesh.Define(stage, "/GroundPlane/Environment/Geometry")
    h = half_size
    mesh.CreatePointsAttr(Vt.Vec3fArray([Gf.Vec3f(-h, -h, 0), Gf.Vec3f(h, -h, 0), Gf.Vec3f(h, h, 0), Gf.Vec3f(-h, h, 0)]))
    mesh.CreateFaceVertexCountsAttr([4])
    mesh.CreateFaceVertexIndicesAttr([0, 1, 2, 3])
    mesh.CreateNormalsAttr(Vt.Vec3fArray([Gf.Vec3f(0, 0, 1)] * 4))
    # Isaac Lab's ground spawner rescales the texture coordinates of its default plane
    st = UsdGeom.PrimvarsAPI(mesh).CreatePrimvar("st", Sdf.ValueTypeNames.TexCoord2fArray, UsdGeom.Tokens.vertex)
    st.Set(Vt.Vec2fArray([Gf.Vec2f(0, 0), Gf.Vec2f(1, 0), Gf.Vec2f(1, 1), Gf.Vec2f(0, 1)]))
    _color(mesh, (0.55, 0.57, 0.6))
    stage.GetRootLayer().Save()


def _rigid_link(stage, path: str, mass: float, length: float, radius: float, rgb) -> None:
    """A rigid body whose frame is at its joint; a capsule-like visual along +z of ``length``."""
    from pxr import Gf, UsdGeom, UsdPhysics

    link = UsdGeom.Xform.Define(stage, path)
    UsdPhysics.RigidBodyAPI.Apply(link.GetPrim())
    mass_api = UsdPhysics.MassAPI.Apply(link.GetPrim())
    mass_api.CreateMassAttr(mass)
    mass_api.CreateCenterOfMassAttr(Gf.Vec3f(0, 0, length / 2))
    # a rod of this mass: I = m L^2 / 12 about the transverse axes
    transverse = max(mass * length * length / 12.0, 1e-5)
    mass_api.CreateDiagonalInertiaAttr(Gf.Vec3f(transverse, transverse, max(mass * radius * radius / 2, 1e-6)))
    visual = UsdGeom.Cylinder.Define(stage, f"{path}/visual")
    visual.CreateAxisAttr("Z")
    visual.CreateRadiusAttr(radius)
    visual.CreateHeightAttr(length)
    visual.AddTranslateOp().Set(Gf.Vec3d(0, 0, length / 2))
    _color(visual, rgb)


def write_arm(path: Path, spec: ArmSpec) -> None:
    """A fixed-base articulation: ``base`` plus one link per joint of ``spec``.

    Bodies: ``base``, then each joint's name with ``_link`` appended. Links carry no collision
    shapes (the arm reaches through objects rather than pushing them), so the arm's motion
    depends on its drives and gravity only.
    """
    from pxr import Gf, Sdf, UsdGeom, UsdPhysics

    stage = _new_stage(path)
    root = UsdGeom.Xform.Define(stage, "/Arm")
    stage.SetDefaultPrim(root.GetPrim())
    UsdPhysics.ArticulationRootAPI.Apply(root.GetPrim())
    _rigid_link(stage, "/Arm/base", 1.0, spec.base_height, spec.radius * 2, (0.2, 0.2, 0.25))
    fixed = UsdPhysics.FixedJoint.Define(stage, "/Arm/joints/fixed_base")
    fixed.CreateBody1Rel().SetTargets([Sdf.Path("/Arm/base")])

    palette = [(0.85, 0.45, 0.1), (0.2, 0.5, 0.85), (0.9, 0.85, 0.2), (0.3, 0.75, 0.35)]
    parent, z = "/Arm/base", 0.0
    for i, joint in enumerate(spec.joints):
        z += joint.offset[2]
        link = f"/Arm/{joint.name}_link"
        _rigid_link(stage, link, joint.mass, joint.length, spec.radius, palette[i % len(palette)])
        # bodies are placed in their zero-angle pose; every link points up
        UsdGeom.Xformable(stage.GetPrimAtPath(link)).AddTranslateOp().Set(Gf.Vec3d(0, 0, z))
        rev = UsdPhysics.RevoluteJoint.Define(stage, f"/Arm/joints/{joint.name}")
        rev.CreateBody0Rel().SetTargets([Sdf.Path(parent)])
        rev.CreateBody1Rel().SetTargets([Sdf.Path(link)])
        rev.CreateAxisAttr(joint.axis)
        rev.CreateLocalPos0Attr(Gf.Vec3f(*joint.offset))
        rev.CreateLocalPos1Attr(Gf.Vec3f(0, 0, 0))
        rev.CreateLocalRot0Attr(Gf.Quatf(1, 0, 0, 0))
        rev.CreateLocalRot1Attr(Gf.Quatf(1, 0, 0, 0))
        rev.CreateLowerLimitAttr(math.degrees(joint.limits[0]))
        rev.CreateUpperLimitAttr(math.degrees(joint.limits[1]))
        drive = UsdPhysics.DriveAPI.Apply(rev.GetPrim(), "angular")
        drive.CreateTypeAttr("force")
        drive.CreateStiffnessAttr(100.0)
        drive.CreateDampingAttr(10.0)
        drive.CreateTargetPositionAttr(0.0)
        parent = link
    stage.GetRootLayer().Save()


def write_cube(path: Path, size: float = CUBE_SIZE, mass: float = 0.05) -> None:
    """A rigid cube of edge ``size`` (m) and ``mass`` (kg), red, with a box collider."""
    from pxr import UsdGeom, UsdPhysics

    stage = _new_stage(path)
    root = UsdGeom.Xform.Define(stage, "/Cube")
    stage.SetDefaultPrim(root.GetPrim())
    UsdPhysics.RigidBodyAPI.Apply(root.GetPrim())
    UsdPhysics.MassAPI.Apply(root.GetPrim()).CreateMassAttr(mass)
    geom = UsdGeom.Cube.Define(stage, "/Cube/geometry")
    geom.CreateSizeAttr(size)
    UsdPhysics.CollisionAPI.Apply(geom.GetPrim())
    _color(geom, (0.85, 0.15, 0.15))
    stage.GetRootLayer().Save()


if __name__ == "__main__":  # python -m arena_isaaclab.sim.assets DIR
    import sys

    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m arena_isaaclab.sim.assets DIR")
    print(write_asset_root(sys.argv[1]))
