"""Every malformed experiment raises ConfigError naming the file, the run and the key path."""

from __future__ import annotations

import pytest

from arena.config import load_experiment
from arena.errors import ConfigError

ENV = "environment: {type: fake_env, task: reach}"

# (id, file text, overrides, run or None, key or None, substrings the message must contain)
CASES = [
    (
        "yaml_syntax_error",
        "runs:\n  alpha:\n    policy: {type: fake_policy\n",
        [],
        None,
        None,
        ["invalid YAML at line", "column"],
    ),
    (
        "duplicate_run",
        f"runs:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        [],
        None,
        None,
        ["'alpha' is given twice", "line 3"],
    ),
    (
        "unknown_top_level_key",
        f"runz:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        [],
        None,
        "runz",
        ["unknown top-level key 'runz'", "requires, launch, shared, runs"],
    ),
    ("empty_runs", "runs: {}\n", [], None, "runs", ["at least one run"]),
    ("missing_runs", "shared: {}\n", [], None, "runs", ["missing or empty 'runs'"]),
    (
        "bad_run_name",
        f"runs:\n  9lives: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        [],
        None,
        "runs.9lives",
        ["invalid run name '9lives'", "[A-Za-z_][A-Za-z0-9_-]*"],
    ),
    (
        "unknown_run_key",
        f"runs:\n  alpha:\n    {ENV}\n    polcy: {{type: fake_policy}}\n",
        [],
        "alpha",
        "polcy",
        ["unknown key 'polcy'", "environment, policy, environment_builder"],
    ),
    (
        "unknown_policy_type",
        f"runs:\n  alpha: {{{ENV}, policy: {{type: nope}}}}\n",
        [],
        "alpha",
        "policy.type",
        ["unknown policy type 'nope'", "registered: fake_policy, fake_remote"],
    ),
    (
        "unknown_environment_type",
        "runs:\n  alpha: {environment: {type: mujoco_world}, policy: {type: fake_policy}}\n",
        [],
        "alpha",
        "environment.type",
        ["unknown environment type 'mujoco_world'", "registered: fake_env, other_env"],
    ),
    (
        "class_path_not_allowed",
        f"runs:\n  alpha: {{{ENV}, policy: {{type: 'no_such_pkg.mod:Policy'}}}}\n",
        [],
        "alpha",
        "policy.type",
        ["'no_such_pkg.mod:Policy' is not a registered policy", "--allow-import no_such_pkg"],
    ),
    (
        "missing_policy_type",
        f"runs:\n  alpha: {{{ENV}, policy: {{scale: 2}}}}\n",
        [],
        "alpha",
        "policy.type",
        ["missing 'policy.type'", "fake_policy"],
    ),
    (
        "unknown_policy_field",
        f"runs:\n  beta: {{{ENV}, policy: {{type: fake_remote, open_loop_horizn: 4}}}}\n",
        [],
        "beta",
        "policy.open_loop_horizn",
        ["unknown key 'open_loop_horizn'", "expected one of", "open_loop_horizon"],
    ),
    (
        "wrong_type",
        f"runs:\n  alpha:\n    {ENV}\n    policy: {{type: fake_policy}}\n    environment_builder: {{num_envs: four}}\n",
        [],
        "alpha",
        "environment_builder.num_envs",
        ["valid integer", "'four'"],
    ),
    (
        "out_of_range",
        f"runs:\n  alpha:\n    {ENV}\n    policy: {{type: fake_policy}}\n    rollout_limit: {{num_episodes: 0}}\n",
        [],
        "alpha",
        "rollout_limit.num_episodes",
        ["greater than or equal to 1", "got 0"],
    ),
    (
        "missing_required_environment_field",
        "runs:\n  alpha: {environment: {type: fake_env}, policy: {type: fake_policy}}\n",
        [],
        "alpha",
        "environment.task",
        ["missing required field 'task'", "str: task name"],
    ),
    (
        "unknown_server_key",
        f"runs:\n  beta: {{{ENV}, policy: {{type: fake_remote}}, server: {{externl: true}}}}\n",
        [],
        "beta",
        "server.externl",
        ["unknown key 'externl'", "external"],
    ),
    (
        "section_not_a_mapping",
        f"runs:\n  alpha: {{{ENV}, policy: fake_policy}}\n",
        [],
        "alpha",
        "policy",
        ["expected a mapping of policy fields"],
    ),
    (
        "error_in_shared_value_names_shared",
        f"shared:\n  environment_builder: {{num_envs: 0}}\nruns:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        [],
        "alpha",
        "environment_builder.num_envs",
        ["greater than or equal to 1", "(value from shared)"],
    ),
    (
        "unknown_shared_key",
        f"shared:\n  polcy: {{type: fake_policy}}\nruns:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        [],
        None,
        "shared.polcy",
        ["unknown key 'polcy'"],
    ),
    (
        "unknown_override_run",
        f"runs:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        ["runs.gamma.policy.scale=2"],
        None,
        None,
        ["runs.gamma.policy.scale=2", "run 'gamma'", "cannot add runs"],
    ),
    (
        "malformed_override_token",
        f"runs:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        ["shared.rollout_limit.num_episodes"],
        None,
        None,
        ["malformed override 'shared.rollout_limit.num_episodes'", "KEY=VALUE"],
    ),
    (
        "override_with_empty_segment",
        f"runs:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        ["shared..num_episodes=3"],
        None,
        None,
        ["malformed override 'shared..num_episodes=3'"],
    ),
    (
        "override_unknown_prefix",
        f"runs:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        ["share.rollout_limit.num_episodes=3"],
        None,
        None,
        ["'share.rollout_limit.num_episodes=3'", "unknown prefix 'share'"],
    ),
    (
        "override_value_not_yaml",
        f"runs:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        ["runs.alpha.policy.scale=[1,"],
        None,
        None,
        ["'runs.alpha.policy.scale=[1,'", "not valid YAML"],
    ),
    (
        "override_into_a_scalar",
        f"runs:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        ["runs.alpha.policy.type.name=x"],
        "alpha",
        None,
        ["'runs.alpha.policy.type.name=x'", "'policy.type' holds str"],
    ),
    (
        "override_value_invalid",
        f"runs:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        ["runs.alpha.rollout_limit.num_episodes=-3"],
        "alpha",
        "rollout_limit.num_episodes",
        ["greater than or equal to 1", "(from override 'runs.alpha.rollout_limit.num_episodes=-3')"],
    ),
    (
        "invalid_shared_override_value",
        f"runs:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        ["shared.environment_builder.num_envs=many"],
        "alpha",
        "environment_builder.num_envs",
        ["valid integer", "(from override 'shared.environment_builder.num_envs=many')"],
    ),
    (
        "unknown_launch_backend",
        f"launch: {{backend: kubernetes}}\nruns:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        [],
        None,
        "launch.backend",
        ["unknown launch backend 'kubernetes'", "registered: local, slurm"],
    ),
    (
        "unknown_launch_backend_options_key",
        f"launch: {{k8s: {{replicas: 2}}}}\nruns:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        [],
        None,
        "launch.k8s",
        ["unknown key 'k8s'", "registered: local, slurm"],
    ),
    (
        "invalid_launch_backend_option",
        f"launch: {{local: {{jobz: 2}}}}\nruns:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        [],
        None,
        "launch.local.jobz",
        ["unknown key 'jobz'", "expected one of: jobs"],
    ),
    (
        "invalid_watchdog",
        f"launch: {{watchdog: {{stall_s: 0}}}}\nruns:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        [],
        None,
        "launch.watchdog.stall_s",
        ["greater than 0"],
    ),
    (
        "invalid_backend_via_override",
        f"runs:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        ["launch.backend=osmo"],
        None,
        "launch.backend",
        ["unknown launch backend 'osmo'"],
    ),
    (
        "missing_requires_distribution",
        f"requires: {{arena-plugin-surely-absent: '>=0.1'}}\nruns:\n  alpha: {{{ENV}, policy: {{type: openpi_remote}}}}\n",
        [],
        None,
        "requires.arena-plugin-surely-absent",
        [
            "requires arena-plugin-surely-absent>=0.1, which is not installed",
            "pip install 'arena-plugin-surely-absent>=0.1'",
        ],
    ),
    (
        "requires_version_mismatch",
        f"requires: {{pydantic: '<1'}}\nruns:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        [],
        None,
        "requires.pydantic",
        ["requires pydantic<1, but pydantic 2.", "is installed"],
    ),
    (
        "requires_invalid_specifier",
        f"requires: {{pydantic: 'at least 2'}}\nruns:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n",
        [],
        None,
        "requires.pydantic",
        ["invalid version specifier 'at least 2'"],
    ),
    (
        "cross_section_constraint",
        f"runs:\n  beta:\n    {ENV}\n    policy: {{type: fake_remote, single_env_only: true}}\n"
        "    environment_builder: {num_envs: 4}\n",
        [],
        "beta",
        "policy",
        ["serves one env only"],
    ),
]


@pytest.mark.parametrize(
    ("text", "overrides", "run", "key", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_malformed_experiment_names_file_run_and_key(write, manager, text, overrides, run, key, expected):
    path = write(text, name="broken_experiment.yaml")
    with pytest.raises(ConfigError) as info:
        load_experiment(path, overrides, manager=manager)
    err = info.value
    message = str(err)
    assert err.file == str(path)
    assert "broken_experiment.yaml" in message
    assert err.run == run
    if run is not None:
        assert f"run '{run}'" in message
    assert err.key == key
    if key is not None:
        assert f"key {key}" in message
    for fragment in expected:
        assert fragment in message


def test_requires_is_checked_before_runs_are_resolved(write, manager):
    # The run's policy type is unknown because its plugin is missing: the plugin is named.
    path = write(
        f"requires: {{arena-plugin-surely-absent: ''}}\nruns:\n  alpha: {{{ENV}, policy: {{type: openpi_remote}}}}\n"
    )
    with pytest.raises(ConfigError, match="arena-plugin-surely-absent, which is not installed"):
        load_experiment(path, manager=manager)


def test_requires_check_can_be_skipped(write, manager):
    path = write(f"requires: {{arena-plugin-surely-absent: ''}}\nruns:\n  alpha: {{{ENV}, policy: {{type: fake_policy}}}}\n")
    experiment = load_experiment(path, manager=manager, check_requires=False)
    assert experiment.requires == {"arena-plugin-surely-absent": ""}


def test_several_errors_in_one_section_are_all_listed(write, manager):
    path = write(
        f"runs:\n  beta: {{{ENV}, policy: {{type: fake_remote, open_loop_horizon: 0, remote_port: 70000}}}}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_experiment(path, manager=manager)
    message = str(info.value)
    assert info.value.key == "policy.remote_port"
    assert "and 1 more" in message and "key policy.open_loop_horizon" in message


def test_missing_file_is_a_config_error(tmp_path, manager):
    with pytest.raises(ConfigError, match="cannot read the experiment file"):
        load_experiment(tmp_path / "absent.yaml", manager=manager)


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "runs: [alpha]\n", "runs:\n  alpha: 3\n"])
def test_wrongly_shaped_file_is_a_config_error(write, manager, text):
    with pytest.raises(ConfigError, match="exp.yaml"):
        load_experiment(write(text), manager=manager)


def test_class_that_is_not_a_policy_is_refused(write, manager):
    path = write(f"runs:\n  alpha: {{{ENV}, policy: {{type: 'collections:OrderedDict'}}}}\n")
    with pytest.raises(ConfigError, match="not a PolicyBase subclass") as info:
        load_experiment(path, manager=manager, allow_imports=["collections"])
    assert info.value.key == "policy.type"
