"""Every benchmark environment declares what live mode needs: hold rules for its action space,
a null action where one holds still, and its control rate; a live run validates on each."""

from __future__ import annotations

import pytest

from arena.config import load_experiment_dict
from arena.errors import ConfigError

CASES = {
    # type: (environment fields, hold rules, control_hz)
    "metaworld": ({"task": "reach-v3"}, ("continue_chunk", "null_action"), 80.0),
    "pusht": ({}, ("continue_chunk", "repeat_last"), 10.0),
    "aloha": ({"task": "transfer_cube"}, ("continue_chunk", "repeat_last"), 50.0),
    "maniskill": ({"task": "PickCube-v1"}, ("continue_chunk", "repeat_last"), 20.0),
    "kinetix": ({"task": "grasp_easy"}, ("continue_chunk", "repeat_last", "null_action"), 10.0),
}


def run_of(env_type: str, fields: dict, execution: dict):
    exp = {"runs": {"r": {"environment": {"type": env_type, **fields}, "policy": {"type": "zero_action"},
                          "execution": {"mode": "live", **execution}}}}
    return load_experiment_dict(exp, source="live.yaml").runs["r"]


@pytest.mark.parametrize("env_type", sorted(CASES))
def test_live_runs_validate_with_the_declared_hold_rules(env_type):
    fields, holds, hz = CASES[env_type]
    run = run_of(env_type, fields, {"delay": {"ms": 100}})
    assert run.environment_cls.hold_rules_for(run.environment) == holds
    assert run.environment_cls.control_hz_for(run.environment) == hz
    assert run.execution.resolve_hold(run.environment_cls, run.environment) == holds[0]
    for hold in holds:
        run_of(env_type, fields, {"hold": hold})


def test_meta_world_null_action_keeps_the_gripper():
    run = run_of("metaworld", {"task": "reach-v3"}, {"hold": "null_action"})
    null = run.environment_cls.null_action_for(run.environment)
    assert null[:3].tolist() == [0.0, 0.0, 0.0] and null[3] != null[3]  # NaN: the last gripper command


def test_maniskill_delta_control_only_continues_the_chunk():
    with pytest.raises(ConfigError, match="execution.hold.*valid: continue_chunk"):
        run_of("maniskill", {"task": "PickCube-v1", "control_mode": "pd_ee_delta_pose"}, {"hold": "repeat_last"})


def test_live_keys_without_live_mode_are_a_warning_naming_them(tmp_path):
    """`execution: {delay: {steps: 3}}` without `mode: live` runs synchronously: `arena validate`
    says so instead of accepting the delay silently (a sync run scored as if it were delayed)."""
    import yaml
    from typer.testing import CliRunner

    from arena.cli import app

    run = {"environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "zero_action"}}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"runs": {"forgot": {**run, "execution": {"delay": {"steps": 3}, "execute_horizon": 4}},
                                             "sync": {**run, "execution": {"mode": "sync"}},
                                             "live": {**run, "execution": {"mode": "live", "delay": {"steps": 3}}}}}))
    result = CliRunner().invoke(app, ["validate", str(path)])
    output = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "run forgot: execution.delay, execution.execute_horizon ignored: execution.mode is sync" in output
    assert "run sync:" not in output and "run live:" not in output


@pytest.mark.parametrize(
    "policy, execution, message",
    [
        # the case: chunks of 4 rows cannot fill execute_horizon 8
        ({"chunk_size": 4}, {"delay": {"steps": 6}, "execute_horizon": 8},
         "the policy's chunks have 4 rows; this schedule executes 14 of each"),
        ({"chunk_size": 8}, {"delay": {"steps": 2}, "execute_horizon": 8, "hold": "continue_chunk"},
         "chunks have 8 rows; this schedule executes 10 of each (execute_horizon 8 + the largest delay 2"),
        ({"chunk_size": 4}, {"delay": {"steps": 1}, "execute_horizon": 8, "hold": "repeat_last"},
         "chunks have 4 rows; this schedule executes 8 of each (execute_horizon 8)"),
    ],
)
def test_a_schedule_the_policys_chunks_cannot_fill_is_refused_naming_run_and_values(policy, execution, message):
    exp = {"runs": {"r": {"environment": {"type": "kinetix", "task": "grasp_easy"},
                          "policy": {"type": "kinetix_hill_climb", **policy}, "execution": {"mode": "live", **execution}}}}
    with pytest.raises(ConfigError) as info:
        load_experiment_dict(exp, source="live.yaml")
    text = str(info.value)
    assert message in text and "run 'r'" in text and "execution.execute_horizon" in text and "live.yaml" in text, text
    exp["runs"]["r"]["execution"]["execute_horizon"] = 2  # 2 + 2 <= 4: fits
    exp["runs"]["r"]["execution"]["delay"] = {"steps": 2}
    exp["runs"]["r"]["policy"]["chunk_size"] = 4
    load_experiment_dict(exp, source="live.yaml")
