from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from rollout_fakes import CoinFlipConfig, CoinFlipPolicy, CounterConfig, CounterEnv, expected_outcome

from arena.rollout.rollout import rollout
from arena.rollout.workitems import WorkItem


def _items(n: int, base: int = 0) -> list[WorkItem]:
    return [WorkItem("r", i, base + i) for i in range(n)]


def _limit(max_steps=None, terminate_on_success=True):
    return SimpleNamespace(num_episodes=0, max_episode_steps=max_steps, terminate_on_success=terminate_on_success)


def _run(num_envs, items, limit=None, policy_config=None, env_config=None, **kw):
    env = CounterEnv(env_config or CounterConfig(), num_envs=num_envs)
    policy = CoinFlipPolicy(policy_config or CoinFlipConfig())
    records = []
    summary = rollout(env, policy, items, limit or _limit(), on_episode_end=records.append, **kw)
    return summary, records, env


def test_outcomes_depend_only_on_episode_seed_not_num_envs():
    items = _items(40)
    by_n = {}
    for n in (1, 4, 7):
        summary, records, _ = _run(n, items)
        assert not summary.aborted
        assert sorted(r.episode_index for r in records) == list(range(40))
        by_n[n] = {r.episode_index: (r.outcome, r.steps, r.return_) for r in records}
    assert by_n[1] == by_n[4] == by_n[7]
    assert {k: v[0] for k, v in by_n[1].items()} == {i: expected_outcome(i) for i in range(40)}
    assert {v[0] for v in by_n[1].values()} == {"success", "failure", "timeout"}


def test_vectorized_envs_share_one_queue_and_reset_with_episode_seeds():
    summary, records, env = _run(4, _items(10, base=100))
    assert summary.episodes == 10 and summary.counts["error"] == 0
    assert {r.env_id for r in records} == {0, 1, 2, 3}
    assert sorted(s for _, seeds in env.resets for s in seeds) == list(range(100, 110))
    assert env.resets[0] == ([0, 1, 2, 3], [100, 101, 102, 103])
    for r in records:
        assert r.seed == 100 + r.episode_index
        assert r.task == "count-to-target"
        assert r.policy == {"type": "coin_flip", "variant": "fair"}


def test_timeout_at_max_episode_steps_from_limit_or_env_default():
    # seed 4: target 6, never reached in 3 steps
    summary, records, _ = _run(1, [WorkItem("r", 0, 4)], limit=_limit(max_steps=3))
    assert records[0].outcome == "timeout" and records[0].steps == 3
    summary, records, _ = _run(1, [WorkItem("r", 0, 4)], env_config=CounterConfig(max_steps=2))
    assert records[0].outcome == "timeout" and records[0].steps == 2


def test_success_failure_and_records_carry_return_and_latency():
    _, records, _ = _run(2, _items(20))
    for r in records:
        assert r.outcome == expected_outcome(r.episode_index)
        if r.outcome == "success":
            assert r.return_ >= 2 + r.seed % 5
        assert r.latency["requests"] == r.steps
        assert r.duration_s >= 0 and r.error is None


def test_without_terminate_on_success_episode_runs_to_the_limit_and_counts_its_last_step():
    # seed 0: target 2, reached within 6 steps, and the counter never decreases
    _, records, _ = _run(1, [WorkItem("r", 0, 0)], limit=_limit(max_steps=6, terminate_on_success=False))
    assert records[0].outcome == "success" and records[0].steps == 6
    _, records, _ = _run(1, [WorkItem("r", 0, 0)], limit=_limit(max_steps=6))
    assert records[0].outcome == "success" and records[0].steps < 6


def test_policy_error_ends_only_the_named_envs_episodes_and_the_run_continues():
    items = _items(12)
    summary, records, _ = _run(4, items, policy_config=CoinFlipConfig(error_seeds=[2, 5]))
    assert not summary.aborted
    by_index = {r.episode_index: r for r in records}
    assert sorted(by_index) == list(range(12))
    for i, r in by_index.items():
        if i in (2, 5):
            assert r.outcome == "error" and "timed out" in r.error and r.steps == 0
        else:
            assert r.outcome == expected_outcome(i)  # unaffected, even the envs next to it
    assert summary.counts["error"] == 2


def test_consecutive_errors_abort_and_leave_remaining_items_unrecorded():
    summary, records, _ = _run(2, _items(10), policy_config=CoinFlipConfig(always_fail=True), max_consecutive_errors=3)
    assert summary.aborted and "3 consecutive error episodes" in summary.error
    assert [r.outcome for r in records] == ["error"] * 6  # three failed calls, each ending both envs
    recorded = {r.episode_index for r in records}
    assert {i.episode_index for i in summary.unfinished} == set(range(10)) - recorded


def test_one_failed_policy_call_counts_once_however_many_envs_it_ends():
    # The first call fails envs 0, 1 and 2 at once (one server fault): one count, not three.
    summary, records, _ = _run(4, _items(8), policy_config=CoinFlipConfig(error_seeds=[0, 1, 2]), max_consecutive_errors=2)
    assert not summary.aborted, summary.error
    assert summary.counts["error"] == 3 and summary.episodes == 8


def test_errors_separated_by_successful_requests_do_not_abort():
    summary, records, _ = _run(1, _items(9), policy_config=CoinFlipConfig(error_seeds=[0, 2, 4, 6, 8]))
    assert not summary.aborted
    assert summary.counts["error"] == 5 and summary.episodes == 9


def test_policy_start_failure_aborts_before_any_episode():
    class NoStart(CoinFlipPolicy):
        def start(self, env):
            raise ConnectionError("server unreachable")

    env = CounterEnv(CounterConfig(), num_envs=2)
    records = []
    summary = rollout(env, NoStart(CoinFlipConfig()), _items(3), _limit(), on_episode_end=records.append)
    assert summary.aborted and "server unreachable" in summary.error
    assert records == [] and len(summary.unfinished) == 3


def test_unexpected_policy_exception_ends_every_running_episode_as_error():
    class Crashy(CoinFlipPolicy):
        calls = 0

        def get_action(self, env, observation):
            Crashy.calls += 1
            if Crashy.calls == 2:
                raise RuntimeError("boom")
            return super().get_action(env, observation)

    env = CounterEnv(CounterConfig(), num_envs=2)
    records = []
    summary = rollout(env, Crashy(CoinFlipConfig()), _items(6), _limit(), on_episode_end=records.append)
    errors = [r for r in records if r.outcome == "error"]
    assert len(errors) == 2 and all("boom" in r.error for r in errors)
    assert not summary.aborted and len(records) == 6


def test_should_stop_cancels_and_leaves_items_for_resume():
    calls = {"n": 0}

    def stop():
        calls["n"] += 1
        return calls["n"] > 3

    summary, records, _ = _run(2, _items(8), should_stop=stop)
    assert summary.cancelled and summary.aborted
    assert len(records) + len(summary.unfinished) == 8


def test_idle_envs_are_stepped_but_ignored():
    summary, records, env = _run(4, _items(1))
    assert len(records) == 1 and records[0].env_id == 0
    assert np.all(env.counter[1:] == 0)


def _against_baseline(num_envs: int, episodes: int, env_config: CounterConfig):
    """Records by episode index of a run with ``env_config``, and of the same items without it."""
    items = _items(episodes)
    baseline = {r.episode_index: r for r in _run(num_envs, items)[1]}
    summary, records, _ = _run(num_envs, items, env_config=env_config)
    assert not summary.aborted
    by_index = {r.episode_index: r for r in records}
    assert sorted(by_index) == list(range(episodes))
    return baseline, by_index


def test_env_fault_ends_only_that_envs_episode_and_keeps_the_others_step():
    baseline, by_index = _against_baseline(4, 16, CounterConfig(fault_seeds=[1, 6]))
    for i, r in by_index.items():
        if i in (1, 6) and baseline[i].steps > 1:  # episodes that reach their second step
            assert r.outcome == "error" and r.error == f"worker of env {r.env_id} died (signal 9)"
            assert r.steps == 1
        else:
            assert (r.outcome, r.steps, r.return_) == (baseline[i].outcome, baseline[i].steps, baseline[i].return_)


def test_one_env_fault_counts_once_toward_consecutive_errors():
    # Seeds 0..3 all fault on their second step, together: one fault, four error episodes.
    summary, records, _ = _run(4, _items(8), env_config=CounterConfig(fault_seeds=[0, 1, 2, 3]),
                               max_consecutive_errors=2)
    assert not summary.aborted
    assert sum(r.outcome == "error" for r in records) == 4 and len(records) == 8


def test_reset_fault_ends_the_named_items_and_the_other_envs_start_their_episodes():
    baseline, by_index = _against_baseline(3, 10, CounterConfig(reset_fault_seeds=[1, 4]))
    for i, r in by_index.items():
        if i in (1, 4):
            assert r.outcome == "error" and r.steps == 0 and "reset failed" in r.error and "died" in r.error
        else:
            assert (r.outcome, r.steps) == (baseline[i].outcome, baseline[i].steps)


def test_environment_episode_info_lands_in_the_record():
    _, records, _ = _run(2, _items(4))
    for r in records:
        assert r.model_extra["env_extras"] == {"target": 2 + r.seed % 5}
        assert "env_extras" in r.to_json()
