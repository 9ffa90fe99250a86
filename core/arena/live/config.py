"""``execution``: how a run's simulator and policy share time (a run key, like ``rollout_limit``).

::

    execution:
      mode: live                 # sync (default: the simulator waits for every chunk) | live
      hold: continue_chunk       # continue_chunk | repeat_last | null_action (null: the env's first)
      delay: {steps: 2}          # {steps: d} | {ms: x} | {steps: [0, 1, 2], p: [...], seed: 0}
      execute_horizon: 8         # s: steps per chunk before the next request (s >= every d; s + d <= chunk rows)
      clock: simulated           # simulated (delay above) | measured (wall clock at control_hz)
      rtc: false                 # requests carry inference_delay and prev_chunk_left_over

Hold rules (what the simulator executes while a request is in flight), declared valid per
action space by the environment (:meth:`arena.envs.base.Environment.hold_rules_for`):
``continue_chunk`` executes the previous chunk's not-yet-executed rows (RTC's protocol; a
chunk must hold ``s + d`` rows on a simulated delay, else the episode is an error; on a
measured clock, whose delay is not known in advance, a hold past the chunk's end repeats its
last row, counted in ``hold_past_chunk``); ``repeat_last`` the last executed action
again (absolute position control); ``null_action`` the environment's null action
(:meth:`~arena.envs.base.Environment.null_action_for`, delta or velocity control).

A delay in milliseconds becomes ``ceil(ms * control_hz / 1000)`` control steps (100 ms at
10 Hz is one step: vla-eval's sweep drops sharply there).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

HOLD_RULES = ("continue_chunk", "repeat_last", "null_action")
HoldRule = Literal["continue_chunk", "repeat_last", "null_action"]


class DelayConfig(BaseModel):
    """``execution.delay``: the simulated delay of each request, in control steps or milliseconds.

    Exactly one of ``steps`` and ``ms``; each a number (fixed) or a list of values drawn per
    request, uniformly or with probabilities ``p``, from a generator seeded by ``(seed,
    episode seed)``: an episode's delays depend only on its seed.
    """

    model_config = ConfigDict(extra="forbid")

    steps: int | list[int] | None = Field(None, description="delay in control steps (a list: drawn per request)")
    ms: float | list[float] | None = Field(None, description="delay in milliseconds, converted with the env's control_hz")
    p: list[float] | None = Field(None, description="probabilities of the listed values (default: uniform)")
    seed: int = Field(0, description="seed of the draws, combined with each episode's seed")

    @model_validator(mode="after")
    def _one_source(self) -> DelayConfig:
        if self.steps is not None and self.ms is not None:
            raise ValueError("give delay.steps or delay.ms, not both")
        values = self.values()
        if not values:
            raise ValueError("delay lists need at least one value")
        if any(v < 0 for v in values):
            raise ValueError(f"delays must be >= 0; got {values}")
        if self.p is not None:
            if not isinstance(self.steps if self.steps is not None else self.ms, list):
                raise ValueError("delay.p needs a list of delays")
            if len(self.p) != len(values) or any(q < 0 for q in self.p) or not math.isclose(sum(self.p), 1.0, abs_tol=1e-6):
                raise ValueError(f"delay.p must be {len(values)} probabilities summing to 1; got {self.p}")
        return self

    def values(self) -> list[float]:
        """The listed (or the one fixed) delay values, in their unit."""
        raw: Any = self.steps if self.steps is not None else (self.ms if self.ms is not None else 0)
        return [float(v) for v in (raw if isinstance(raw, list) else [raw])]

    def step_values(self, control_hz: float | None) -> list[int]:
        """The delay values in control steps.

        Raises:
            ValueError: a delay in ``ms`` without a control rate.
        """
        if self.ms is None:
            return [int(v) for v in self.values()]
        if not control_hz:
            raise ValueError("a delay in ms needs the environment's control_hz, which it does not declare")
        return [ms_to_steps(v, control_hz) for v in self.values()]


def ms_to_steps(ms: float, control_hz: float) -> int:
    """Control steps a delay of ``ms`` milliseconds spans at ``control_hz``: ``ceil(ms * hz / 1000)``."""
    return int(math.ceil(ms * control_hz / 1000.0 - 1e-9))


class ExecutionConfig(BaseModel):
    """``execution``: synchronous (the default) or live execution of a run (module docstring)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["sync", "live"] = Field("sync", description="sync: the simulator waits for each chunk; live: it keeps stepping")
    hold: HoldRule | None = Field(None, description="what runs while a request is in flight; null: the environment's first declared rule")
    delay: DelayConfig = Field(default_factory=DelayConfig, description="simulated delay per request")
    execute_horizon: int = Field(8, ge=1, description="steps executed per chunk (hold included) before the next request")
    clock: Literal["simulated", "measured"] = Field(
        "simulated", description="simulated: delay as configured; measured: the wall clock at control_hz, each request's real delay"
    )
    rtc: bool = Field(False, description="requests carry inference_delay and prev_chunk_left_over (Real-Time Chunking)")

    @property
    def live(self) -> bool:
        return self.mode == "live"

    def ignored_keys(self) -> list[str]:
        """The keys set in this section that sync mode ignores (every key but ``mode``): a run
        that gives ``delay`` or ``execute_horizon`` without ``mode: live`` runs synchronously."""
        if self.live:
            return []
        return sorted(k for k in self.model_fields_set if k != "mode")

    def resolve_hold(self, env_cls: type, env_config: Any) -> HoldRule:
        """The hold rule of this run on ``env_cls`` (the configured one, else the environment's first).

        Raises:
            ValueError: the environment declares no hold rule, or not this one.
        """
        valid = tuple(env_cls.hold_rules_for(env_config))
        name = getattr(env_cls, "name", "") or env_cls.__name__
        if not valid:
            raise ValueError(
                f"environment '{name}' declares no hold rule (Environment.hold_rules), so it cannot run in live mode"
            )
        if self.hold is None:
            return valid[0]  # type: ignore[return-value]
        if self.hold not in valid:
            raise ValueError(f"hold '{self.hold}' is not valid for environment '{name}' here; valid: {', '.join(valid)}")
        return self.hold

    def check(self, env_cls: type, env_config: Any, chunk_rows: int | None = None) -> list[tuple[str, str]]:
        """Problems of this section on ``env_cls``, as ``(key under execution, message)``; none in
        sync mode. ``chunk_rows``: the rows of the policy's chunks when its config fixes them
        (:meth:`arena.policies.base.PolicyConfig.live_chunk_rows`): a schedule they cannot fill
        is refused (``execute_horizon`` > rows; with ``continue_chunk`` and a simulated delay,
        ``execute_horizon`` > rows - the largest delay)."""
        if not self.live:
            return []
        problems: list[tuple[str, str]] = []
        try:
            self.resolve_hold(env_cls, env_config)
        except ValueError as exc:
            problems.append(("hold", str(exc)))
        hz = env_cls.control_hz_for(env_config)
        if self.clock == "measured":
            if not hz:
                problems.append(("clock", "measured delay paces the simulator at its control_hz, which this environment does not declare"))
            if self.delay.values() != [0.0]:
                problems.append(("delay", "a measured clock takes each request's real delay: leave delay unset"))
            return problems
        try:
            steps = self.delay.step_values(hz)
        except ValueError as exc:
            return [*problems, ("delay.ms", str(exc))]
        if max(steps) > self.execute_horizon:
            problems.append((
                "execute_horizon",
                f"execute_horizon {self.execute_horizon} is below the largest delay, {max(steps)} steps "
                "(RTC's protocol needs s >= d)",
            ))
        if chunk_rows is not None:
            hold = None
            try:
                hold = self.resolve_hold(env_cls, env_config)
            except ValueError:
                pass
            held = max(steps) if hold == "continue_chunk" else 0
            if self.execute_horizon + held > chunk_rows:
                why = (f"execute_horizon {self.execute_horizon} + the largest delay {held} (rows continue_chunk "
                       "holds while the next request is in flight)") if held else f"execute_horizon {self.execute_horizon}"
                problems.append((
                    "execute_horizon",
                    f"the policy's chunks have {chunk_rows} rows; this schedule executes {self.execute_horizon + held} of "
                    f"each ({why}): lower execute_horizon or the delay",
                ))
        return problems
