"""``droid_cube_stand_in``: a DROID-layout environment in the stand-in's registry.

Stands in for IsaacLab-Arena's ``pick_and_place_maple_table`` (``embodiment``,
``pick_up_object``, ``destination_location``, ``episode_length_s`` options) with what runs
offline: a 7+1-joint arm, a cube on the ground, three cameras (two exterior ones over the
robot's shoulders; the "wrist" one looks down on the workspace from a fixed pose, which is all a
layout test needs).
Success: the hand within 5 cm of the cube (zero actions never get there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

import isaaclab.envs.mdp as mdp
import isaaclab.sim as sim_utils
import isaaclab.utils.math as math_utils
from isaaclab.actuators import ImplicitActuatorCfg
from isaaclab.assets import ArticulationCfg, AssetBaseCfg, RigidObjectCfg
from isaaclab.envs import ManagerBasedRLEnvCfg
from isaaclab.managers import EventTermCfg as EventTerm
from isaaclab.managers import ObservationGroupCfg as ObsGroup
from isaaclab.managers import ObservationTermCfg as ObsTerm
from isaaclab.managers import SceneEntityCfg
from isaaclab.managers import TerminationTermCfg as DoneTerm
from isaaclab.sensors import CameraCfg
from isaaclab.utils import configclass
from isaaclab.utils import assets as isaac_assets
from isaaclab_newton.physics import MJWarpSolverCfg, NewtonCfg
from isaaclab_newton.renderers import NewtonWarpRendererCfg

from arena_isaaclab.sim import assets
from arena_isaaclab.sim.tasks.reach_cube import look_at
from isaaclab_arena.assets.register import register_environment
from isaaclab_arena.environments.arena_environment_factory import ArenaEnvironmentCfg, ArenaEnvironmentFactory
from isaaclab_arena.environments.isaaclab_arena_environment import IsaacLabArenaEnvironment

ARM_JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
HAND = "finger_joint_link"
IMAGE_H, IMAGE_W = 36, 64  # 16:9 like IsaacLab-Arena's 720 x 1280, small for the CPU


def _root() -> str:
    return isaac_assets.NUCLEUS_ASSET_ROOT_DIR


def eef_pose(env, robot: str = "robot") -> torch.Tensor:
    art = env.scene[robot]
    body = art.body_names.index(HAND)
    return torch.cat([art.data.body_pos_w.torch[:, body] - env.scene.env_origins, art.data.body_quat_w.torch[:, body]], -1)


def eef_pos(env):
    return eef_pose(env)[:, :3]


def eef_quat(env):
    return eef_pose(env)[:, 3:]


def arm_joint_pos(env):
    art = env.scene["robot"]
    return art.data.joint_pos.torch[:, [art.joint_names.index(j) for j in ARM_JOINTS]]


def gripper_pos(env):
    art = env.scene["robot"]
    return art.data.joint_pos.torch[:, [art.joint_names.index("finger_joint")]]


def hand_at_cube(env, radius: float = 0.05):
    cube = env.scene["cube"].data.root_pos_w.torch - env.scene.env_origins
    return torch.linalg.norm(eef_pos(env) - cube, dim=-1) < radius


def _camera(prim: str, eye, target) -> CameraCfg:
    return CameraCfg(
        prim_path=prim,
        offset=CameraCfg.OffsetCfg(pos=eye, rot=look_at(eye, target), convention="world"),
        spawn=sim_utils.PinholeCameraCfg(focal_length=14.0, clipping_range=(0.02, 10.0)),
        data_types=["rgb"],
        width=IMAGE_W,
        height=IMAGE_H,
        renderer_cfg=NewtonWarpRendererCfg(),
    )


def _rgb(camera: str) -> ObsTerm:
    return ObsTerm(func=mdp.image_rgb, params={"sensor_cfg": SceneEntityCfg(camera), "data_type": "rgb", "normalize": False})


class DroidStandInEmbodiment:
    """The DROID embodiment's layout: 7 arm joints + gripper, two exterior cameras, a wrist camera."""

    name = "droid_abs_joint_pos"

    def get_scene_cfg(self):
        @configclass
        class S:
            robot = ArticulationCfg(
                prim_path="{ENV_REGEX_NS}/Robot",
                spawn=sim_utils.UsdFileCfg(usd_path=f"{_root()}/{assets.DROID_ARM}"),
                actuators={"all": ImplicitActuatorCfg(joint_names_expr=[".*"], stiffness=60.0, damping=6.0)},
            )
            external_camera = _camera("{ENV_REGEX_NS}/ExternalCamera", (0.9, -0.6, 0.7), (0.2, 0.0, 0.3))
            external_camera_2 = _camera("{ENV_REGEX_NS}/ExternalCamera2", (0.9, 0.6, 0.7), (0.2, 0.0, 0.3))
            wrist_camera = _camera("{ENV_REGEX_NS}/WristCamera", (0.3, 0.0, 1.2), (0.35, 0.0, 0.0))

        return S()

    def get_observation_cfg(self):
        @configclass
        class Obs:
            @configclass
            class Policy(ObsGroup):
                actions = ObsTerm(func=mdp.last_action)
                robot_joint_pos = ObsTerm(func=mdp.joint_pos)
                joint_pos = ObsTerm(func=arm_joint_pos)
                gripper_pos = ObsTerm(func=gripper_pos)
                eef_pos = ObsTerm(func=eef_pos)
                eef_quat = ObsTerm(func=eef_quat)

                def __post_init__(self):
                    self.enable_corruption = False
                    self.concatenate_terms = False

            @configclass
            class Cameras(ObsGroup):
                external_camera_rgb = _rgb("external_camera")
                external_camera_2_rgb = _rgb("external_camera_2")
                wrist_camera_rgb = _rgb("wrist_camera")

                def __post_init__(self):
                    self.enable_corruption = False
                    self.concatenate_terms = False

            policy: ObsGroup = Policy()
            camera_obs: ObsGroup = Cameras()

        return Obs()

    def get_action_cfg(self):
        @configclass
        class Act:
            arm = mdp.JointPositionActionCfg(asset_name="robot", joint_names=ARM_JOINTS, scale=1.0, use_default_offset=False)
            gripper = mdp.JointPositionActionCfg(asset_name="robot", joint_names=["finger_joint"], scale=1.0, use_default_offset=False)

        return Act()

    def get_events_cfg(self):
        @configclass
        class Ev:
            reset_robot = EventTerm(func=mdp.reset_scene_to_default, mode="reset", params={"reset_joint_targets": True})

        return Ev()


class CubeScene:
    def __init__(self, pick_up_object: str):
        self.pick_up_object = pick_up_object

    def get_scene_cfg(self):
        @configclass
        class S:
            ground = AssetBaseCfg(prim_path="/World/ground", spawn=sim_utils.GroundPlaneCfg())
            light = AssetBaseCfg(prim_path="/World/light", spawn=sim_utils.DomeLightCfg(intensity=2000.0))
            cube = RigidObjectCfg(
                prim_path="{ENV_REGEX_NS}/Cube",
                spawn=sim_utils.UsdFileCfg(usd_path=f"{_root()}/{assets.CUBE}"),
                init_state=RigidObjectCfg.InitialStateCfg(pos=(0.4, 0.0, assets.CUBE_SIZE / 2)),
            )

        return S()


class PickCubeTask:
    def __init__(self, description: str, episode_length_s: float):
        self.description = description
        self.episode_length_s = episode_length_s

    def get_scene_cfg(self):
        return None

    def get_events_cfg(self):
        return None

    def get_termination_cfg(self):
        @configclass
        class T:
            success = DoneTerm(func=hand_at_cube)
            time_out = DoneTerm(func=mdp.time_out, time_out=True)

        return T()

    def env_cfg_type(self):
        episode_length_s = self.episode_length_s

        @configclass
        class StandInEnvCfg(ManagerBasedRLEnvCfg):
            task_description: str = ""

            def __post_init__(self):
                self.decimation = 2
                self.episode_length_s = episode_length_s
                self.sim.dt = 0.02
                self.sim.render_interval = self.decimation
                self.sim.physics = NewtonCfg(
                    solver_cfg=MJWarpSolverCfg(njmax=40, nconmax=20, integrator="implicitfast"), use_cuda_graph=True
                )

        return StandInEnvCfg


@dataclass
class DroidCubeStandInCfg(ArenaEnvironmentCfg):
    embodiment: str = "droid_abs_joint_pos"
    pick_up_object: str = "cube"
    destination_location: str = "none"
    episode_length_s: float = 4.0


@register_environment
class DroidCubeStandIn(ArenaEnvironmentFactory[DroidCubeStandInCfg]):
    name = "droid_cube_stand_in"

    def build(self, cfg: DroidCubeStandInCfg) -> IsaacLabArenaEnvironment:
        if cfg.embodiment != DroidStandInEmbodiment.name:
            raise ValueError(f"the stand-in has one embodiment, {DroidStandInEmbodiment.name}; got {cfg.embodiment}")
        return IsaacLabArenaEnvironment(
            name=self.name,
            scene=CubeScene(cfg.pick_up_object),
            embodiment=DroidStandInEmbodiment(),
            task=PickCubeTask("pick up the cube", cfg.episode_length_s),
        )
