"""``environment: {type: kinetix, ...}``: which Kinetix level, observation and action noise.

The levels Real-Time Chunking evaluates (Black et al. 2025, arXiv 2506.07339; its
``eval_flow.py``), "large" size: eight ship in kinetix-env 3.0.2's ``kinetix/levels/l/``; the
other four (catapult, cartpole_thrust, catcher_v3, trampoline) exist only in RTC's repository
(``worlds/l/``): give their directory as ``level_dir``. ``suite: rtc`` runs all twelve (the four
need ``level_dir``), ``suite: rtc_shipped`` the eight.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from arena.envs.base import EnvironmentConfig

#: RTC's twelve levels, in its order.
RTC_LEVELS = (
    "grasp_easy", "catapult", "cartpole_thrust", "hard_lunar_lander", "mjc_half_cheetah", "mjc_swimmer",
    "mjc_walker", "h17_unicycle", "chain_lander", "catcher_v3", "trampoline", "car_launch",
)
#: Those of them kinetix-env 3.0.2 ships (``kinetix/levels/l/<name>.json``).
SHIPPED = frozenset({
    "grasp_easy", "hard_lunar_lander", "mjc_half_cheetah", "mjc_swimmer", "mjc_walker", "h17_unicycle",
    "chain_lander", "car_launch",
})
#: Those only RTC's repository has (``Physical-Intelligence/real-time-chunking-kinetix``, ``worlds/l/``).
RTC_ONLY = tuple(name for name in RTC_LEVELS if name not in SHIPPED)
SUITES = {"rtc": RTC_LEVELS, "rtc_shipped": tuple(n for n in RTC_LEVELS if n in SHIPPED)}


class KinetixConfig(EnvironmentConfig):
    """One Kinetix level (RTC's evaluation set-up by default)."""

    task: str | None = Field(
        None,
        description="level: a name of RTC's twelve (grasp_easy, ...), a shipped level as s/NAME, m/NAME or "
        "l/NAME, or a path to a level .json",
    )
    suite: Literal["rtc", "rtc_shipped"] | None = Field(
        None, description="run every level of a suite (one run per level) when task is unset"
    )
    level_dir: str | None = Field(
        None, description="directory of level files (<name>.json) for levels kinetix-env does not ship (RTC's worlds/l)"
    )
    obs_type: Literal["symbolic", "pixels"] = Field(
        "symbolic", description="symbolic: float32 (679,) policy state; pixels: a 125x125 upright camera"
    )
    action_noise: float = Field(0.1, ge=0, description="std of Gaussian noise added to every action (RTC: 0.1)")
    frame_skip: int = Field(2, ge=1, description="physics steps per control step (RTC: 2)")

    @model_validator(mode="after")
    def _level(self) -> KinetixConfig:
        if self.task is None and self.suite is None:
            raise ValueError(f"set task (a level, e.g. grasp_easy) or suite ({', '.join(SUITES)})")
        if self.task is not None:
            self.level_path()  # a missing level is named now, not in the worker
        return self

    def expand(self) -> dict[str, dict[str, object]] | None:
        if self.task is not None or self.suite is None:
            return None
        return {name: {"task": name, "suite": None} for name in SUITES[self.suite]}

    def level_path(self) -> str:
        """Where the worker loads the level from: a path, or ``l/NAME`` inside kinetix-env.

        Raises:
            ValueError: an RTC-only level without a ``level_dir`` holding it (the message names
                the missing file and where it comes from), or a path that does not exist.
        """
        task = str(self.task)
        if self.level_dir is not None:
            candidate = Path(self.level_dir).expanduser() / f"{Path(task).name.removesuffix('.json')}.json"
            if candidate.is_file():
                return str(candidate.resolve())
        if task.endswith(".json") or "/" in task and not task.split("/", 1)[0] in ("s", "m", "l"):
            path = Path(task).expanduser()
            if not path.is_file():
                raise ValueError(f"level file {task} does not exist")
            return str(path.resolve())
        if task.split("/", 1)[0] in ("s", "m", "l"):
            return task
        if task in SHIPPED:
            return f"l/{task}"
        where = f"{self.level_dir} has no {task}.json" if self.level_dir else "set level_dir to a directory holding it"
        if task in RTC_ONLY:
            raise ValueError(
                f"level {task} is not shipped with kinetix-env 3.0.2 (only in Real-Time Chunking's repository, "
                f"worlds/l/{task}.json): {where}"
            )
        raise ValueError(f"unknown level {task}: RTC's are {', '.join(RTC_LEVELS)}; or l/NAME, or a .json path ({where})")
