"""`arena validate` and `arena run` on malformed experiment files: exit 2, and the message
names the file, the run and the key — as a user sees it on the command line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from arena.cli import app

ENV = "environment: {type: metaworld, task: reach-v3}"
POLICY = "policy: {type: zero_action}"

# (id, file text, extra CLI args, substrings the error must contain)
CASES = [
    ("yaml_syntax", "runs:\n  a:\n    policy: {type: zero_action\n", [], ["invalid YAML at line"]),
    ("unknown_top_level_key", f"runz:\n  a: {{{ENV}, {POLICY}}}\n", [], ["runz"]),
    ("empty_runs", "runs: {}\n", [], ["runs"]),
    ("bad_run_name", f"runs:\n  9lives: {{{ENV}, {POLICY}}}\n", [], ["9lives"]),
    ("unknown_run_key", f"runs:\n  a:\n    {ENV}\n    polcy: {{type: zero_action}}\n", [], ["run 'a'", "polcy"]),
    ("unknown_policy_type", f"runs:\n  a: {{{ENV}, policy: {{type: pi_zero}}}}\n", [], ["run 'a'", "policy.type", "pi_zero"]),
    ("unknown_policy_field", f"runs:\n  a: {{{ENV}, policy: {{type: random_action, sed: 3}}}}\n", [], ["run 'a'", "policy.sed"]),
    ("unknown_task", f"runs:\n  a: {{environment: {{type: metaworld, task: reach-v2}}, {POLICY}}}\n", [], ["run 'a'", "environment.task", "reach-v3"]),
    ("wrong_type", f"shared:\n  environment_builder: {{num_envs: four}}\nruns:\n  a: {{{ENV}, {POLICY}}}\n", [], ["run 'a'", "environment_builder.num_envs"]),
    ("out_of_range", f"runs:\n  a:\n    {ENV}\n    {POLICY}\n    rollout_limit: {{num_episodes: 0}}\n", [], ["run 'a'", "rollout_limit.num_episodes"]),
    ("bad_override_value", f"runs:\n  a: {{{ENV}, {POLICY}}}\n", ["shared.rollout_limit.num_episodes=abc"], ["rollout_limit.num_episodes"]),
    ("override_unknown_run", f"runs:\n  a: {{{ENV}, {POLICY}}}\n", ["runs.b.policy.seed=1"], ["runs.b.policy.seed=1"]),
    ("malformed_override", f"runs:\n  a: {{{ENV}, {POLICY}}}\n", ["shared.rollout_limit"], ["shared.rollout_limit"]),
    ("unknown_backend", f"launch: {{backend: kubernetes}}\nruns:\n  a: {{{ENV}, {POLICY}}}\n", [], ["launch.backend", "kubernetes"]),
    ("missing_plugin", f"requires: {{arena-plugin-nonexistent: '>=1'}}\nruns:\n  a: {{{ENV}, {POLICY}}}\n", [], ["arena-plugin-nonexistent", "not installed"]),
    ("image_only_server_task", f"runs:\n  a:\n    {ENV}\n    policy: {{type: metaworld_expert_remote}}\n    server: {{image: x, local_command: []}}\n", [], ["run 'a'", "server"]),
]


@pytest.mark.parametrize(("text", "args", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_malformed_experiment_exits_2_naming_file_run_and_key(tmp_path, command, text, args, needles):
    path = tmp_path / "broken_experiment.yaml"
    path.write_text(text)
    argv = [command, str(path), *args]
    if command == "run":
        argv += ["--output-dir", str(tmp_path / "out")]
    result = CliRunner().invoke(app, argv)
    message = " ".join(result.output.split())
    assert result.exit_code == 2, message
    assert "broken_experiment.yaml" in message
    for needle in needles:
        assert needle in message, (needle, message)
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
