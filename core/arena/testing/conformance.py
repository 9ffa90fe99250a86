"""Adapter conformance for plugin authors: an expert's success must survive the adapter.

:func:`check_adapter_conformance` takes an environment with a scripted expert and an
embodiment adapter, and

1. runs the expert alone on the environment (:class:`Expert.act`, on arena's observation:
   no adapter involved), episode by episode, recording its actions and outcomes;
2. serves it from a policy server (an openpi-protocol double) whose reply is the expert's
   actions turned into the model's convention by the adapter's inverse,
   :meth:`~arena.policies.adapters.EmbodimentAdapter.pack_actions`: either the expert
   reading the adapter's own request (:attr:`Expert.from_request`, as ``metaworld-expert``
   does: a swapped state slice or quaternion order then fails too), or, for experts that need
   privileged state the request lacks, the actions of step 1 replayed;
3. runs the rollout ``arena run-one`` runs (:func:`arena.rollout.rollout.rollout`, the run's
   config validated as ``arena run`` validates it) of the remote policy holding this adapter
   against the server; the adapter converts the replies back with
   :meth:`~arena.policies.adapters.EmbodimentAdapter.unpack_actions`. The records go to
   ``output_dir/episodes.jsonl``;
4. raises :class:`ConformanceError` unless the adapter's run succeeds on every episode the
   expert alone succeeded on.

A flipped gripper sign, a swapped or mis-scaled action dimension (in either direction of the
adapter) makes the expert fail and the check fail loudly, naming the episodes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from arena.policies.adapters import EmbodimentAdapter


class ConformanceError(AssertionError):
    """The expert's success did not survive the adapter."""


@dataclass(frozen=True)
class Expert:
    """A scripted expert, as the check needs it.

    ``act(observation, env_id) -> (action_dim,)``: the expert on arena's batched observation
    (step 1). ``from_request(request) -> (action_dim,)``: the same expert reading the
    adapter's request, served behind the adapter (step 2); ``None``: replay step 1's actions.
    ``reset(seed)`` is called before each of step 1's episodes.
    """

    act: Callable[[dict[str, Any], int], np.ndarray]
    from_request: Callable[[dict[str, Any]], np.ndarray] | None = None
    reset: Callable[[int], None] = lambda seed: None


@dataclass
class ConformanceReport:
    """Outcomes of the expert alone and through the adapter, per seed."""

    seeds: list[int]
    expert_outcomes: list[str]
    adapter_outcomes: list[str]
    expert_steps: list[int] = field(default_factory=list)
    adapter_steps: list[int] = field(default_factory=list)

    @property
    def expert_successes(self) -> int:
        return self.expert_outcomes.count("success")

    @property
    def adapter_successes(self) -> int:
        return self.adapter_outcomes.count("success")


def _expert_alone(env: Any, expert: Expert, seeds: list[int], max_steps: int) -> tuple[list[str], list[int], list[np.ndarray]]:
    from arena.envs.base import read_success

    outcomes, steps, actions = [], [], []
    for seed in seeds:
        expert.reset(seed)
        obs = env.reset_envs([0], [seed])
        rows, outcome = [], "timeout"
        for _ in range(max_steps):
            action = np.asarray(expert.act(obs, 0), np.float64).reshape(1, -1)
            rows.append(action[0])
            obs, _, terminated, _, info = env.step(action)
            if bool(read_success(env, info, 1)[0]):
                outcome = "success"
                break
            if bool(terminated[0]):
                outcome = "failure"
                break
        outcomes.append(outcome)
        steps.append(len(rows))
        actions.append(np.stack(rows))
    return outcomes, steps, actions


class _ReplyModel:
    """Replies ``pack_actions`` of the expert's next chunk (``horizon`` rows per request)."""

    def __init__(self, adapter: EmbodimentAdapter, expert: Expert, key: str, horizon: int, rows: int,
                 recorded: list[np.ndarray], requests_per_episode: list[int]) -> None:
        self.adapter, self.expert, self.key, self.horizon, self.rows = adapter, expert, key, horizon, rows
        self.recorded, self.requests_per_episode = recorded, requests_per_episode
        self.count = 0

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        i, self.count = self.count, self.count + 1
        if self.expert.from_request is not None:
            chunk = np.asarray(self.expert.from_request(request), np.float64).reshape(1, -1)
        else:  # which recorded episode and row this request of the sequential run replays
            episode, j = 0, i
            while episode < len(self.recorded) - 1 and j >= self.requests_per_episode[episode]:
                j -= self.requests_per_episode[episode]
                episode += 1
            rows = self.recorded[episode]
            start = min(j * self.horizon, len(rows) - 1)
            chunk = rows[start : start + self.rows]  # the first `horizon` rows are replayed
            chunk = np.concatenate([chunk, np.repeat(chunk[-1:], self.rows - len(chunk), 0)])
        return self.adapter.pack_actions(chunk, self.key)


def check_adapter_conformance(
    adapter: EmbodimentAdapter,
    expert: Expert,
    *,
    environment: dict[str, Any],
    policy: dict[str, Any],
    seeds: list[int],
    max_episode_steps: int,
    output_dir: str | Path,
    actions_key: str = "actions",
    chunk_rows: int | None = None,
    metadata: dict[str, Any] | None = None,
    expert_environment: dict[str, Any] | None = None,
) -> ConformanceReport:
    """Run the check of the module docstring; return its report.

    ``environment``: the run's ``environment`` mapping (``type`` and fields); ``policy``: the
    remote policy's mapping without ``remote_host``/``remote_port`` (e.g. ``{"type":
    "pi0_remote", "policy_variant": "pi05", "openpi_embodiment_adapter": "libero"}``), its
    adapter the one given here; ``seeds``: consecutive episode seeds (``seeds[0] + i``);
    ``actions_key``: the reply key the remote policy reads (``"action"`` for Cosmos);
    ``chunk_rows``: rows of each replayed reply (the checkpoint's chunk length, which some
    policies insist on; default the open-loop horizon); ``expert_environment``: the mapping
    step 1 runs in, when it differs from ``environment`` only in what the replayed expert never
    reads (``{..., "cameras": False}`` for an expert on privileged state: a simulator that
    renders every step pays most of an episode for images nobody looks at); default
    ``environment``. Only for replayed experts (``from_request`` ``None``); step 3 still
    asserts the same outcome and, where the physics is the same, the same number of steps.

    Raises:
        ConformanceError: an episode the expert solved alone failed through the adapter, the
            rollout was aborted, or the expert solved none (nothing would be checked).
        ValueError: ``seeds`` are not consecutive.
    """
    from arena.config import load_experiment_dict
    from arena.envs.workers import build_environment
    from arena.rollout.rollout import rollout
    from arena.rollout.workitems import WorkItem
    from arena.testing.doubles import OpenPIDouble, RecordingModel

    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise ValueError(f"seeds must be consecutive (episode i runs seed seeds[0] + i), got {seeds}")
    if expert_environment is not None and expert.from_request is not None:
        raise ValueError("expert_environment needs a replayed expert (from_request None): this one reads the requests")

    def build(mapping: dict[str, Any]) -> Any:
        spec = load_experiment_dict(
            {"runs": {"expert": {"environment": mapping, "policy": {"type": "zero_action"}}}}, source="conformance"
        ).runs["expert"]
        return build_environment(spec.environment_cls, spec.environment, num_envs=1)

    if expert_environment is not None:
        alone = build(expert_environment)
        try:
            expert_outcomes, expert_steps, recorded = _expert_alone(alone, expert, seeds, max_episode_steps)
        finally:
            alone.close()
    env = build(environment)
    try:
        if expert_environment is None:
            expert_outcomes, expert_steps, recorded = _expert_alone(env, expert, seeds, max_episode_steps)
        if "success" not in expert_outcomes:
            raise ConformanceError(f"the expert alone solved none of seeds {seeds}: nothing to check")
        horizon = 1 if expert.from_request is not None else int(policy.get("open_loop_horizon") or 1)
        per_episode = [math.ceil(n / horizon) for n in expert_steps]
        rows = max(horizon, chunk_rows or horizon)
        reply = _ReplyModel(adapter, expert, actions_key, horizon, rows, recorded, per_episode)
        records: list[Any] = []
        with OpenPIDouble(RecordingModel(reply, metadata=metadata)) as server:
            run = load_experiment_dict(
                {
                    "runs": {
                        "conformance": {
                            "environment": environment,
                            "environment_builder": {"num_envs": 1, "seed": seeds[0]},
                            "rollout_limit": {"num_episodes": len(seeds), "max_episode_steps": max_episode_steps},
                            "policy": {**policy, "open_loop_horizon": horizon, "remote_host": server.host,
                                       "remote_port": server.port},
                            "server": {"external": True},
                        }
                    }
                },
                source="conformance",
            ).runs["conformance"]
            # The rollout `arena run-one` runs, with the remote policy holding this very adapter.
            remote = run.policy_cls(run.policy, adapter=adapter)
            try:
                summary = rollout(env, remote, [WorkItem("conformance", i, s) for i, s in enumerate(seeds)],
                                  run.rollout_limit, on_episode_end=records.append)
            finally:
                remote.close()
        if summary.aborted:
            raise ConformanceError(f"the adapter's rollout was aborted: {summary.error}")
    finally:
        env.close()
    records.sort(key=lambda r: r.episode_index)
    report = ConformanceReport(
        seeds=list(seeds),
        expert_outcomes=expert_outcomes,
        adapter_outcomes=[r.outcome for r in records],
        expert_steps=expert_steps,
        adapter_steps=[r.steps for r in records],
    )
    from arena.outputs.layout import EPISODES_FILE
    from arena.outputs.records import RecordWriter

    with RecordWriter(Path(output_dir) / EPISODES_FILE) as writer:
        for record in records:
            writer.write(record)
    lost = [s for s, a, b in zip(seeds, expert_outcomes, report.adapter_outcomes) if a == "success" and b != "success"]
    if lost:
        raise ConformanceError(
            f"{type(adapter).__name__}: the expert solved {report.expert_successes}/{len(seeds)} alone but "
            f"{report.adapter_successes}/{len(seeds)} through the adapter; lost seeds {lost} "
            "(check the action order, signs and scales of unpack_actions/pack_actions, and the request's state)"
        )
    return report
