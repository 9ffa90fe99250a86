"""Placement on pools and platforms, refused mismatches, placeholders, and no silently ignored option."""

from __future__ import annotations

import pytest
from osmo_testkit import (
    PLATFORMS,
    experiment,
    node_spec_of,
    normalized_text,
    osmo_options,
    render,
    run,
    snapshot_of,
)

from arena.errors import ConfigError
from arena_osmo.options import OsmoOptions


def test_server_placed_where_its_gpu_is_missing_is_refused(fake_models):
    exp = experiment({"cosmos": run("fake_cosmos")}, ["launch.osmo.placement.cosmos.platform=ovx-l40s"])
    with pytest.raises(ConfigError) as info:
        render(exp)
    message = str(info.value)
    assert "refusing to place policy server 'cosmos-server' on gpu-pool/ovx-l40s" in message
    assert "needs H100 GPUs, the platform has L40S" in message
    assert "needs 80 GiB per GPU, the platform has 48" in message


def test_pool_override_is_checked_after_it_applies(fake_models):
    """An override that moves a server onto hardware it cannot use is refused (not silently placed)."""
    platforms = dict(PLATFORMS, **{"l40s-pool": {"ovx-l40s": PLATFORMS["gpu-pool"]["ovx-l40s"]}})
    exp = experiment({"cosmos": run("fake_cosmos")}, ["launch.osmo.pool=l40s-pool"], osmo=osmo_options(platforms=platforms))
    with pytest.raises(ConfigError, match="no platform of pool 'l40s-pool' can run policy server 'cosmos-server'"):
        render(exp)


def test_undescribed_pool_is_refused_with_how_to_describe_it(fake_models):
    exp = experiment({"pi": run("fake_openpi")}, ["launch.osmo.pool=mystery"])
    with pytest.raises(ConfigError, match=r"key launch.osmo.platforms.mystery: not set: what pool 'mystery' offers.*launch.osmo.platforms.mystery"):
        render(exp)


@pytest.mark.parametrize(
    ("runs", "overrides", "osmo", "refusal"),
    [
        ({"pi": "fake_openpi"}, [], {"pool": None}, "set launch.osmo.pool=POOL"),
        ({"zero": "zero_action"}, ["launch.osmo.runner.memory_gb=4096"], None,
         "no platform of pool 'gpu-pool' can run the runner"),
        ({"pi": "fake_openpi"}, ["launch.osmo.placement.typo.pool=h100-pool"], None,
         "placement key 'typo' names neither a run"),
        ({"zero": "zero_action"}, ["launch.osmo.placement.zero.platform=dgx-h100"], None, "run 'zero' has none"),
    ],
    ids=["missing pool", "runner too big for every platform", "placement key naming nothing",
         "server platform for a run without server"],
)
def test_impossible_placement_is_refused(fake_models, runs, overrides, osmo, refusal):
    exp = experiment({name: run(policy) for name, policy in runs.items()}, overrides,
                     osmo=osmo_options(**osmo) if osmo is not None else None)
    with pytest.raises(ConfigError, match=refusal):
        render(exp)


def test_runs_needing_different_pools_become_separate_workflows(fake_models):
    exp = experiment(
        {"pi": run("fake_openpi"), "co": run("fake_cosmos"), "zero": run("zero_action")},
        ["launch.osmo.placement.cosmos-server.pool=h100-pool"],
    )
    wfs = render(exp)
    assert [(wf.name, wf.pool, [t.run for t in wf.runs]) for wf in wfs] == [
        ("arena-exp-1", "gpu-pool", ["pi", "zero"]),
        ("arena-exp-2", "h100-pool", ["co"]),
    ]
    assert "--pool h100-pool" in wfs[1].header[-1]


def test_secret_without_credential_is_refused(fake_models):
    exp = experiment({"gr": run("fake_gr00t")}, osmo=osmo_options(credentials={}))
    with pytest.raises(ConfigError, match=r"\$HF_TOKEN is needed by policy server 'gr00t-server' \(run 'gr'\)"):
        render(exp)


def test_policy_api_key_needs_a_credential(fake_models):
    exp = experiment({"pi": run("fake_openpi", api_key_env="PI_KEY")})
    with pytest.raises(ConfigError, match=r"launch.osmo.credentials.PI_KEY"):
        render(exp)
    exp = experiment(
        {"pi": run("fake_openpi", api_key_env="PI_KEY")},
        osmo=osmo_options(credentials={"PI_KEY": {"credential": "pi", "key": "key"}}),
    )
    (wf,) = render(exp)
    runner = wf.spec["workflow"]["groups"][0]["tasks"][0]
    assert runner["credentials"] == {"pi": {"PI_KEY": "key"}}
    assert node_spec_of(runner)["server"]["api_key_env"] == "PI_KEY"  # the readiness probe presents it


def test_split_workflows_may_share_one_fixed_url_each_run_publishing_its_own_directory(fake_models):
    runs = {"a": run("fake_openpi"), "b": run("fake_openpi")}
    wfs = render(experiment(runs, ["launch.osmo.max_tasks_per_workflow=2", "launch.osmo.output_url=s3://bucket/fixed"]))
    assert len(wfs) == 2
    urls = [g["tasks"][0]["checkpoint"][0]["url"] for wf in wfs for g in wf.spec["workflow"]["groups"]]
    assert urls == ["s3://bucket/fixed/a", "s3://bucket/fixed/b"]


def test_dry_run_shows_placeholders_and_submission_refuses_them(fake_models):
    exp = experiment({"pi": run("fake_openpi")}, osmo=osmo_options(runner_image=None, output_url=None))
    (wf,) = render(exp, placeholders=True)
    text = wf.text()
    assert "image: '<unset: launch.osmo.runner_image>'" in text
    assert "url: '<unset: launch.osmo.output_url>/pi'" in text
    with pytest.raises(ConfigError, match="launch.osmo.runner_image: not set: the image the runners run arena in"):
        render(exp)


def test_external_server_on_localhost_is_refused(fake_models):
    exp = experiment({"pi": {**run("fake_openpi"), "server": {"external": True}}})
    with pytest.raises(ConfigError, match="inside an OSMO task is the task"):
        render(exp)


# Each option of launch.osmo and a value that must show in the rendered workflows or the submit
# command line. poll_interval_s only paces `arena run --wait` (test_osmo_cli_fake checks it).
_CHANGES = {
    "pool": "h100-pool",
    "platforms": {"gpu-pool": {"dgx-h100": PLATFORMS["gpu-pool"]["dgx-h100"], "ovx-l40s": PLATFORMS["gpu-pool"]["ovx-l40s"]}, "h100-pool": PLATFORMS["h100-pool"]},
    "placement": {"pi": {"platform": "dgx-h100"}},
    "runner_image": "registry.example/arena-runner:0.2",
    "output_url": "gs://other/{{workflow_id}}",
    "workflow_name": "my-eval",
    "priority": "HIGH",
    "labels": {"team": "robots"},
    "exec_timeout": "12h",
    "queue_timeout": "1h",
    "max_tasks_per_workflow": 3,
    "runner": {"cpu": 4},
    "server_storage_gb": 80,
    "publish_interval": "1m",
    "credentials": {"HF_TOKEN": {"credential": "huggingface", "key": "token"}},
}


def test_every_accepted_option_changes_the_output(fake_models):
    assert set(_CHANGES) | {"poll_interval_s"} == set(OsmoOptions.model_fields), "a new option needs a line in _CHANGES"
    runs = {"pi": run("fake_openpi"), "gr": run("fake_gr00t"), "zero": run("zero_action")}
    baseline = normalized_text(render(experiment(runs)))
    for name, value in _CHANGES.items():
        changed = normalized_text(render(experiment(runs, osmo=osmo_options(**{name: value}))))
        assert changed != baseline, f"launch.osmo.{name} was accepted but changed nothing"


def test_unknown_option_is_an_error(fake_models):
    with pytest.raises(ConfigError, match="platfrom"):
        experiment({"zero": run("zero_action")}, ["launch.osmo.platfrom=x"])


def test_too_many_labels_are_refused_as_a_configuration_error(fake_models):
    labels = {f"k{i}": "v" for i in range(17)}
    with pytest.raises(ConfigError, match="at most 16 labels"):
        render(experiment({"zero": run("zero_action")}, osmo=osmo_options(labels=labels)))


def test_external_server_run_has_the_runner_alone_and_keeps_its_endpoint(fake_models):
    exp = experiment({"pi": {**run("fake_openpi", remote_host="10.1.2.3", remote_port=9000), "server": {"external": True}}})
    (wf,) = render(exp)
    group = wf.spec["workflow"]["groups"][0]
    assert [t["name"] for t in group["tasks"]] == ["r0-pi-runner"]
    snapshot = snapshot_of(group["tasks"][0])
    assert "remote_host: 10.1.2.3" in snapshot and "remote_port: 9000" in snapshot
    assert node_spec_of(group["tasks"][0])["server"] is None  # nothing to wait for
