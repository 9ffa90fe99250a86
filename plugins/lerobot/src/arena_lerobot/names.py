"""The names lerobot-eval reports a run's figures under, mapped to arena's figures.

lerobot-eval 0.6.1 (``lerobot/scripts/lerobot_eval.py``, ``eval_policy``, its ``aggregated``
block, l.672-674) reports ``avg_sum_reward`` (the mean over episodes of the summed step
rewards: arena's episode ``return``), ``avg_max_reward`` (the mean of each episode's best step
reward: arena's episode metric ``max_reward``) and ``pc_success`` (the success rate in percent).
Environments that run LeRobot's benchmarks declare them (``Environment.reported_as``), so the
results, the report and the trackers give each figure under both names, with arena's interval.
lerobot-eval has no error outcome: its figures equal these where a run has no error episode.
"""

#: ``{lerobot-eval's name: arena's figure}`` (:attr:`arena.envs.base.Environment.reported_as`).
LEROBOT_EVAL_NAMES: dict[str, str] = {
    "pc_success": "success_rate_pct",
    "avg_sum_reward": "return",
    "avg_max_reward": "metrics.max_reward",
}
