"""A minimal LeRobot-style adapter for the export tests only: every camera the environment
produces becomes ``observation.images.<camera>`` (uint8 (H, W, 3), as recorded), the ``policy``
state vectors are concatenated (sorted by name) into ``observation.state`` float32 (D,).
Stands in for the plugin's own embodiment adapters (``lerobot/<embodiment>``), whose
equivalence with LeRobot's processing their own tests prove; the export reads any adapter
through the same two calls."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from arena.policies.adapters import EmbodimentAdapter


class StandInAdapter(EmbodimentAdapter):
    action_dim: ClassVar[int] = 4  # Meta-World's Sawyer: xyz delta and gripper

    def extract(self, observation: dict[str, Any], env_id: int) -> Any:
        cameras = {name: np.asarray(frames[env_id]) for name, frames in (observation.get("camera_obs") or {}).items()}
        state = np.concatenate([np.asarray(observation["policy"][k][env_id], np.float64).reshape(-1)
                                for k in sorted(observation["policy"])])
        return cameras, state

    def pack_request(self, extracted: Any, instruction: str | None) -> dict[str, Any]:
        cameras, state = extracted
        request: dict[str, Any] = {f"observation.images.{name}": frame for name, frame in cameras.items()}
        request["observation.state"] = state.astype(np.float32)
        request["task"] = instruction or ""
        return request


class FourteenDimAdapter(StandInAdapter):
    """An adapter for another robot (ALOHA's 14 joints): Meta-World's recordings do not fit it."""

    action_dim: ClassVar[int] = 14


class CrashingAdapter(StandInAdapter):
    """The stand-in, except that inside the export's LeRobot process (``python -m
    arena_lerobot.export``) it kills that process natively (SIGFPE, as a crashing video encoder
    does) on its 7th request, the first of the second episode: the export process checks the
    first episode (3 requests of the SMALL run), then reads and writes it (3 more), so a
    partial dataset exists by then."""

    calls = 0

    def pack_request(self, extracted: Any, instruction: str | None) -> dict[str, Any]:
        import os
        import signal
        import sys

        main = getattr(sys.modules.get("__main__"), "__spec__", None)
        if main is not None and main.name == "arena_lerobot.export":
            CrashingAdapter.calls += 1
            if CrashingAdapter.calls == 7:
                os.kill(os.getpid(), signal.SIGFPE)
        return super().pack_request(extracted, instruction)
