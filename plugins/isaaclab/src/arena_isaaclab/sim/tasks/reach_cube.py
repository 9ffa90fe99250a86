"""``Arena-Reach-Cube-v0``: the plugin's own Isaac Lab task, runnable offline on a CPU.

A 3-joint arm (:data:`arena_isaaclab.sim.assets.ARM`: base yaw, shoulder and elbow pitch)
stands at each env's origin; a 5 cm cube lies on the ground in front of it, placed at reset at
a random distance (0.30-0.45 m) and bearing (+-60 degrees). The arm must hold its tip within
:data:`SUCCESS_RADIUS` of the point :data:`HOVER` above the cube's centre.

- Actions: ``float32 (N, 3)`` absolute joint-position targets (rad) of yaw, shoulder, elbow.
- Observations (Arena layout)::

      policy/joint_pos   float32 (N, 3)  rad
      policy/joint_vel   float32 (N, 3)  rad/s
      policy/ee_pos      float32 (N, 3)  m, arm tip, env frame
      policy/target_pos  float32 (N, 3)  m, the point to reach, env frame
      camera_obs/scene_camera_rgb  uint8 (N, H, W, 3)  (when cameras are on)

- Terminations: ``success`` (tip within 3 cm of the target), ``tip_on_ground`` (a failure:
  the tip below 2 cm), ``time_out`` (5 s = 125 steps).
- Physics: Newton / MuJoCo-Warp (``implicitfast``: PD-driven arms diverge with ``euler``),
  step 0.02 s x 2 substeps = 0.04 s per env step.

Assets are read from ``{asset root}/Arena/`` (:func:`arena_isaaclab.sim.assets.write_asset_root`).
"""

from __future__ import annotations

import math

import torch
from isaaclab_newton.physics import MJWarpSolverCfg, NewtonCfg
from isaaclab_newton.renderers import NewtonWarpRendererCfg
from isaaclab_ov.physics import OvPhysxCfg
from isaaclab_physx.physics import PhysxCfg

import isaaclab.envs.mdp as mdp
import isaaclab.sim as sim_utils
import isaaclab.utils.math as math_utils
from isaaclab.actuators import ImplicitActuatorCfg
from isaaclab.assets import ArticulationCfg, AssetBaseCfg, RigidObjectCfg
from isaaclab.envs import ManagerBasedRLEnv, ManagerBasedRLEnvCfg
from isaaclab.managers import EventTermCfg as EventTerm
from isaaclab.managers import ObservationGroupCfg as ObsGroup
from isaaclab.managers import ObservationTermCfg as ObsTerm
from isaaclab.managers import RewardTermCfg as RewTerm
from isaaclab.managers import SceneEntityCfg
from isaaclab.managers import TerminationTermCfg as DoneTerm
from isaaclab.physics import PhysxAutoCfg
from isaaclab.scene import InteractiveSceneCfg
from isaaclab.sensors import CameraCfg
from isaaclab.utils import configclass

from isaaclab_tasks.utils import PresetCfg

from arena_isaaclab.sim import assets

#: Metres above the cube's centre that the arm's tip must reach.
HOVER = 0.10
#: Metres: the tip within this distance of the target is a success.
SUCCESS_RADIUS = 0.03
#: Cube placement at reset: distance from the arm's base (m) and bearing (rad).
CUBE_DISTANCE = (0.30, 0.45)
CUBE_BEARING = (-math.pi / 3, math.pi / 3)


#: Scene camera: where it stands and the point it looks at (m, env frame).
CAMERA_EYE = (0.8, -0.65, 0.65)
CAMERA_TARGET = (0.22, 0.0, 0.25)


def look_at(eye: tuple[float, float, float], target: tuple[float, float, float]) -> tuple[float, ...]:
    """Quaternion ``(x, y, z, w)`` turning a camera of Isaac Lab's ``world`` convention (looking
    along +x, z up) at ``eye`` towards ``target``: a yaw about z, then a pitch about y."""
    dx, dy, dz = (t - e for t, e in zip(target, eye))
    yaw = math.atan2(dy, dx)
    pitch = math.atan2(-dz, math.hypot(dx, dy))
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    return (-sy * sp, cy * sp, sy * cp, cy * cp)


def _asset(relative: str) -> str:
    from isaaclab.utils import assets as isaac_assets

    return f"{isaac_assets.NUCLEUS_ASSET_ROOT_DIR}/{relative}"


# -- MDP terms ------------------------------------------------------------------------------


def ee_pos(env: ManagerBasedRLEnv, robot_name: str = "robot", link: str = "elbow_link") -> torch.Tensor:
    """The arm's tip in the env frame, ``(N, 3)`` m: the last link's frame plus its length along its z."""
    robot = env.scene[robot_name]
    body = robot.body_names.index(link)
    pos = robot.data.body_pos_w.torch[:, body]
    quat = robot.data.body_quat_w.torch[:, body]
    tip = torch.tensor([0.0, 0.0, assets.ARM_TIP], device=pos.device).expand_as(pos)
    return pos + math_utils.quat_apply(quat, tip) - env.scene.env_origins


def target_pos(env: ManagerBasedRLEnv, asset_cfg: SceneEntityCfg = SceneEntityCfg("cube")):
    """The point to reach, ``(N, 3)`` m in the env frame: :data:`HOVER` above the cube's centre."""
    cube = env.scene[asset_cfg.name]
    pos = cube.data.root_pos_w.torch - env.scene.env_origins
    return pos + torch.tensor([0.0, 0.0, HOVER], device=pos.device)


def tip_distance(env: ManagerBasedRLEnv) -> torch.Tensor:
    """``(N,)`` m between the arm's tip and the target."""
    return torch.linalg.norm(ee_pos(env) - target_pos(env), dim=-1)


def reached(env: ManagerBasedRLEnv, radius: float = SUCCESS_RADIUS) -> torch.Tensor:
    """Success: the tip within ``radius`` m of the target, ``(N,)`` bool."""
    return tip_distance(env) < radius


def tip_on_ground(env: ManagerBasedRLEnv, height: float = 0.02) -> torch.Tensor:
    """Failure: the tip below ``height`` m, ``(N,)`` bool."""
    return ee_pos(env)[:, 2] < height


def place_cube(
    env: ManagerBasedRLEnv,
    env_ids: torch.Tensor,
    distance: tuple[float, float] = CUBE_DISTANCE,
    bearing: tuple[float, float] = CUBE_BEARING,
    asset_cfg: SceneEntityCfg = SceneEntityCfg("cube"),
) -> None:
    """Reset event: put the cube on the ground at a uniform random distance and bearing.

    Draws from torch's global generator (Isaac Lab seeds it on ``reset(seed=...)``), two numbers
    per env in ``env_ids`` order.
    """
    cube = env.scene[asset_cfg.name]
    if isinstance(env_ids, slice):
        env_ids = torch.arange(env.num_envs, device=env.device)[env_ids]
    n = len(env_ids)
    draws = torch.rand((n, 2), device=env.device)
    r = distance[0] + (distance[1] - distance[0]) * draws[:, 0]
    a = bearing[0] + (bearing[1] - bearing[0]) * draws[:, 1]
    pose = torch.zeros((n, 7), device=env.device)
    pose[:, 0] = r * torch.cos(a)
    pose[:, 1] = r * torch.sin(a)
    pose[:, 2] = assets.CUBE_SIZE / 2
    pose[:, :3] += env.scene.env_origins[env_ids]
    pose[:, 6] = 1.0  # identity quaternion, (x, y, z, w)
    cube.write_root_pose_to_sim(pose, env_ids=env_ids)
    cube.write_root_velocity_to_sim(torch.zeros((n, 6), device=env.device), env_ids=env_ids)


# -- configuration ----------------------------------------------------------------------------


@configclass
class ReachCubePhysicsCfg(PresetCfg):
    """Physics presets: Newton / MuJoCo-Warp (default, kit-less) or PhysX (needs Isaac Sim)."""

    isaacsim_physx: PhysxCfg = PhysxCfg()
    ovphysx: OvPhysxCfg = OvPhysxCfg()
    physx: PhysxAutoCfg = PhysxAutoCfg(isaacsim_physx=isaacsim_physx, ovphysx=ovphysx)
    newton_mjwarp: NewtonCfg = NewtonCfg(
        # PD-driven arms need implicitfast: MuJoCo-Warp's default euler integrator diverges
        solver_cfg=MJWarpSolverCfg(njmax=40, nconmax=20, integrator="implicitfast", cone="pyramidal"),
        num_substeps=1,
        use_cuda_graph=True,
    )
    default: NewtonCfg = newton_mjwarp


@configclass
class ReachCubeSceneCfg(InteractiveSceneCfg):
    """Ground, light, the arm, the cube and a camera looking at them."""

    ground = AssetBaseCfg(prim_path="/World/ground", spawn=sim_utils.GroundPlaneCfg())
    light = AssetBaseCfg(
        prim_path="/World/light", spawn=sim_utils.DomeLightCfg(color=(0.9, 0.9, 0.9), intensity=2000.0)
    )
    robot = ArticulationCfg(
        prim_path="{ENV_REGEX_NS}/Robot",
        spawn=sim_utils.UsdFileCfg(usd_path="{ASSET_ROOT}/" + assets.REACH_ARM),
        init_state=ArticulationCfg.InitialStateCfg(joint_pos={".*": 0.0}),
        actuators={
            "arm": ImplicitActuatorCfg(joint_names_expr=[".*"], stiffness=60.0, damping=6.0, effort_limit_sim=50.0)
        },
    )
    cube = RigidObjectCfg(
        prim_path="{ENV_REGEX_NS}/Cube",
        spawn=sim_utils.UsdFileCfg(usd_path="{ASSET_ROOT}/" + assets.CUBE),
        init_state=RigidObjectCfg.InitialStateCfg(pos=(0.35, 0.0, assets.CUBE_SIZE / 2)),
    )
    scene_camera = CameraCfg(
        prim_path="{ENV_REGEX_NS}/SceneCamera",
        offset=CameraCfg.OffsetCfg(pos=CAMERA_EYE, rot=look_at(CAMERA_EYE, CAMERA_TARGET), convention="world"),
        spawn=sim_utils.PinholeCameraCfg(focal_length=14.0, clipping_range=(0.05, 10.0)),
        data_types=["rgb"],
        width=96,
        height=96,
        renderer_cfg=NewtonWarpRendererCfg(),
    )


@configclass
class ObservationsCfg:
    @configclass
    class PolicyCfg(ObsGroup):
        joint_pos = ObsTerm(func=mdp.joint_pos)
        joint_vel = ObsTerm(func=mdp.joint_vel)
        ee_pos = ObsTerm(func=ee_pos)
        target_pos = ObsTerm(func=target_pos)

        def __post_init__(self):
            self.enable_corruption = False
            self.concatenate_terms = False

    @configclass
    class CameraObsCfg(ObsGroup):
        scene_camera_rgb = ObsTerm(
            func=mdp.image_rgb,
            params={"sensor_cfg": SceneEntityCfg("scene_camera"), "data_type": "rgb", "normalize": False},
        )

        def __post_init__(self):
            self.enable_corruption = False
            self.concatenate_terms = False

    policy: PolicyCfg = PolicyCfg()
    camera_obs: CameraObsCfg = CameraObsCfg()


@configclass
class ActionsCfg:
    arm = mdp.JointPositionActionCfg(asset_name="robot", joint_names=[".*"], scale=1.0, use_default_offset=False)


@configclass
class EventsCfg:
    reset_robot = EventTerm(func=mdp.reset_scene_to_default, mode="reset", params={"reset_joint_targets": True})
    place_cube = EventTerm(func=place_cube, mode="reset")


@configclass
class RewardsCfg:
    distance = RewTerm(func=tip_distance, weight=-1.0)


@configclass
class TerminationsCfg:
    success = DoneTerm(func=reached)
    tip_on_ground = DoneTerm(func=tip_on_ground)
    time_out = DoneTerm(func=mdp.time_out, time_out=True)


@configclass
class ReachCubeEnvCfg(ManagerBasedRLEnvCfg):
    """``Arena-Reach-Cube-v0``. ``task_description`` is the instruction arena sends to policies."""

    scene: ReachCubeSceneCfg = ReachCubeSceneCfg(num_envs=2, env_spacing=2.5)
    observations: ObservationsCfg = ObservationsCfg()
    actions: ActionsCfg = ActionsCfg()
    events: EventsCfg = EventsCfg()
    rewards: RewardsCfg = RewardsCfg()
    terminations: TerminationsCfg = TerminationsCfg()
    task_description: str = "hold the arm's tip just above the red cube"
    #: Bounds of one action (rad): the arm's joint limits (arena's action_space).
    action_bounds: tuple = (
        tuple(j.limits[0] for j in assets.ARM.joints),
        tuple(j.limits[1] for j in assets.ARM.joints),
    )

    def __post_init__(self):
        self.decimation = 2
        self.episode_length_s = 5.0
        self.sim.dt = 0.02
        self.sim.render_interval = self.decimation
        self.sim.physics = ReachCubePhysicsCfg()
        root = None
        for name in ("robot", "cube"):
            spawn = getattr(self.scene, name).spawn
            if "{ASSET_ROOT}" in spawn.usd_path:
                root = root or _asset("").rstrip("/")
                spawn.usd_path = spawn.usd_path.replace("{ASSET_ROOT}", root)
