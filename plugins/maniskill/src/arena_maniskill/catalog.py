"""ManiSkill3 tasks arena knows by name: their step limits, instructions, metrics and assets.

Importable without ManiSkill (arena's own interpreter validates and dry-runs with it). The
``maniskill`` environment runs any registered ManiSkill3 gym id; for the ids listed here it
also knows, without importing ManiSkill:

- ``max_episode_steps``: the task's registered limit (``mani_skill.utils.registration``,
  ``REGISTERED_ENVS[id].max_episode_steps`` in mani-skill 3.0.1), the run's default step limit;
- ``instruction``: the language instruction sent to policies (ManiSkill has none; these say
  what the task's ``evaluate()`` checks);
- ``metrics``: the task's ``info`` extras recorded per episode as partial credit
  (``{info key: reduction}``, the episode-metrics contract), e.g. PickCube's ``is_grasped``;
- ``assets``: ManiSkill asset ids (``mani_skill.utils.assets.data.DATA_SOURCES``) the task
  downloads on first use; empty for the tasks whose assets ship in the wheel (the offline eight).

The offline eight make, reset, step and render here with the wheel's assets alone (verified
with mani-skill 3.0.1, ``reference/lerobot-maniskill.md``). The others need
``python -m mani_skill.utils.download_asset <id>`` first (network), into ``asset_dir``.
SimplerEnv's Fractal (Google Robot) scenes are not registered in mani-skill 3.0.1.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TaskSpec:
    """What arena knows of one ManiSkill3 task (see the module docstring)."""

    gym_id: str
    max_episode_steps: int
    instruction: str
    metrics: dict[str, str] = field(default_factory=dict)
    assets: tuple[str, ...] = ()
    group: str = "tabletop"

    @property
    def offline(self) -> bool:
        """True when the wheel's own assets suffice (nothing to download)."""
        return not self.assets


def _spec(gym_id: str, steps: int, instruction: str, *, metrics: dict[str, str] | None = None,
          assets: tuple[str, ...] = (), group: str = "tabletop") -> TaskSpec:
    return TaskSpec(gym_id, steps, instruction, dict(metrics or {}), assets, group)


#: gym id -> spec. Step limits as mani-skill 3.0.1 registers them.
TASKS: dict[str, TaskSpec] = {
    spec.gym_id: spec
    for spec in (
        # -- offline: assets in the wheel (panda, panda_wristcam, panda_stick, table scene) --
        _spec("PickCube-v1", 50, "pick up the red cube and move it to the green goal position",
              metrics={"is_grasped": "max", "is_obj_placed": "max"}),
        _spec("PushCube-v1", 50, "push the cube to the red and white target"),
        _spec("StackCube-v1", 50, "pick up the red cube and stack it on top of the green cube",
              metrics={"is_cubeA_grasped": "max", "is_cubeA_on_cubeB": "max"}),
        _spec("PegInsertionSide-v1", 100, "pick up the peg and insert its orange end into the hole of the box"),
        _spec("PullCube-v1", 50, "pull the cube back to the red and white target"),
        _spec("LiftPegUpright-v1", 50, "lift the peg lying on the table and stand it upright"),
        _spec("PushT-v1", 100, "push the T-shaped block onto the T-shaped target"),
        _spec("PlugCharger-v1", 200, "insert the charger into the receptacle on the wall",
              metrics={"obj_to_goal_dist": "min", "obj_to_goal_angle": "min"}),
        # -- SimplerEnv's Bridge scenes (WidowX, real-to-sim textures) --
        _spec("PutCarrotOnPlateInScene-v1", 60, "put carrot on plate", assets=("bridge_v2_real2sim",), group="simpler_bridge"),
        _spec("PutSpoonOnTableClothInScene-v1", 60, "put the spoon on the towel", assets=("bridge_v2_real2sim",), group="simpler_bridge"),
        _spec("StackGreenCubeOnYellowCubeBakedTexInScene-v1", 60, "stack the green block on the yellow block",
              assets=("bridge_v2_real2sim",), group="simpler_bridge"),
        _spec("PutEggplantInBasketScene-v1", 120, "put eggplant into yellow basket", assets=("bridge_v2_real2sim",), group="simpler_bridge"),
        # -- YCB objects --
        _spec("PickSingleYCB-v1", 50, "pick up the object and move it to the goal position",
              metrics={"is_grasped": "max"}, assets=("ycb",), group="ycb"),
        _spec("PickClutterYCB-v1", 100, "pick up the target object from the clutter and move it to the goal position",
              metrics={"is_grasped": "max"}, assets=("ycb", "pick_clutter_ycb_configs"), group="ycb"),
        # -- ReplicaCAD apartment scenes (Fetch) --
        _spec("ReplicaCAD_SceneManipulation-v1", 200, "explore the apartment", assets=("ReplicaCAD",), group="replicacad"),
    )
}

#: The offline eight, in the issue's order.
OFFLINE_TASKS: tuple[str, ...] = tuple(gym_id for gym_id, spec in TASKS.items() if spec.offline)

#: ManiSkill's own command that downloads an asset id (network; run once per machine).
DOWNLOAD_COMMAND = "python -m mani_skill.utils.download_asset {asset}"


def task_spec(gym_id: str) -> TaskSpec | None:
    """The catalog's spec of ``gym_id``, or ``None`` for a task arena does not list."""
    return TASKS.get(gym_id)


def check_task_id(task: str) -> str:
    """``task`` stripped, when it looks like a gym id (``Name-vN``); else ``ValueError`` naming
    the closest catalog tasks. Ids outside the catalog are accepted: whether ManiSkill registers
    them is known only where ManiSkill is installed (the env worker says so)."""
    value = task.strip()
    name, sep, version = value.rpartition("-v")
    if value in TASKS or (sep and name and version.isdigit()):
        return value
    close = difflib.get_close_matches(value, list(TASKS), n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(close)}?" if close else f"e.g. {', '.join(OFFLINE_TASKS)}"
    raise ValueError(f"{task!r} is not a ManiSkill3 gym id (Name-vN); {hint}")


def download_hint(assets: tuple[str, ...] | list[str], asset_dir: str | None) -> str:
    """The commands that download ``assets`` (into ``asset_dir`` when given)."""
    prefix = f"MS_ASSET_DIR={asset_dir} " if asset_dir else ""
    return " && ".join(prefix + DOWNLOAD_COMMAND.format(asset=a) for a in assets)
