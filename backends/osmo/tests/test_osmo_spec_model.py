"""The pydantic model of OSMO's workflow spec catches what the service would refuse."""

from __future__ import annotations

import copy

import pytest
from osmo_testkit import experiment, render, run
from pydantic import ValidationError

from arena_osmo.spec import validate_workflow


def _minimal():
    return {
        "version": 2,
        "workflow": {
            "name": "wf",
            "resources": {"default": {"cpu": 1, "memory": "1Gi"}},
            "groups": [
                {
                    "name": "g",
                    "tasks": [
                        {"name": "lead", "lead": True, "image": "img", "command": ["sh"], "args": ["-c", "echo {{host:side}}"]},
                        {"name": "side", "image": "img", "command": ["sleep", "60"]},
                    ],
                },
                {"name": "after", "tasks": [{"name": "c", "lead": True, "image": "img", "command": ["ls", "{{input:lead}}", "{{input:0}}"], "inputs": [{"task": "lead"}], "outputs": [{"url": "s3://b/{{workflow_id}}"}]}]},
            ],
        },
    }


def _broken(mutate):
    data = _minimal()
    mutate(data)
    with pytest.raises(ValidationError) as info:
        validate_workflow(data)
    return str(info.value)


def test_minimal_workflow_validates():
    validate_workflow(_minimal())


def test_unknown_keys_are_rejected_at_every_level():
    assert "extra" in _broken(lambda d: d.update(extra=1))
    assert "Extra inputs" in _broken(lambda d: d["workflow"].update(servers=[]))
    assert "Extra inputs" in _broken(lambda d: d["workflow"]["groups"][0]["tasks"][0].update(leed=True))
    assert "Extra inputs" in _broken(lambda d: d["workflow"]["resources"]["default"].update(gpus=1))
    assert "Extra inputs" in _broken(lambda d: d["workflow"]["groups"][1]["tasks"][0]["inputs"][0].update(dataset="x"))


def test_a_group_needs_exactly_one_lead():
    assert "exactly one lead" in _broken(lambda d: d["workflow"]["groups"][0]["tasks"][1].update(lead=True))
    assert "exactly one lead" in _broken(lambda d: d["workflow"]["groups"][0]["tasks"][0].update(lead=False))


def test_host_token_must_name_a_task_of_the_same_group():
    def other_group(d):
        d["workflow"]["groups"][1]["tasks"][0]["args"] = ["{{host:side}}"]

    assert "names no task of its group" in _broken(other_group)


def test_task_input_must_come_from_an_earlier_group():
    def from_own_group(d):
        d["workflow"]["groups"][0]["tasks"][0]["inputs"] = [{"task": "side"}]

    assert "earlier group" in _broken(from_own_group)


def test_input_token_must_name_one_of_the_tasks_inputs():
    assert "names none of its inputs" in _broken(lambda d: d["workflow"]["groups"][1]["tasks"][0]["command"].append("{{input:1}}"))


def test_names_collide_ignoring_case_and_underscore():
    assert "used twice" in _broken(lambda d: d["workflow"]["groups"][1].update(name="G"))
    assert "used twice" in _broken(lambda d: d["workflow"]["groups"][0]["tasks"][1].update(name="LEAD"))


def test_undefined_resource_and_bad_quantities_are_rejected():
    assert "does not define" in _broken(lambda d: d["workflow"]["groups"][0]["tasks"][1].update(resource="gpu"))
    assert "pattern" in _broken(lambda d: d["workflow"]["resources"]["default"].update(memory="16 GB"))


def test_exit_actions_must_not_overlap_or_use_reserved_codes():
    assert "both" in _broken(
        lambda d: d["workflow"]["groups"][0]["tasks"][0].update(exitActions={"COMPLETE": "0-3", "FAIL": "3"})
    )
    assert "reserved" in _broken(lambda d: d["workflow"]["groups"][0]["tasks"][0].update(exitActions={"COMPLETE": "0,2010"}))


def test_template_variable_needs_a_default_value():
    def jinja(d):
        d["workflow"]["groups"][0]["tasks"][1]["command"] = ["sleep", "{{ seconds }}"]

    assert "default-values" in _broken(jinja)
    data = _minimal()
    jinja(data)
    data["default-values"] = {"seconds": 5}
    validate_workflow(data)


def test_every_rendered_workflow_validates(fake_models):
    runs = {"pi": run("fake_openpi"), "gr": run("fake_gr00t"), "co": run("fake_cosmos"), "zero": run("zero_action")}
    for overrides in ([], ["launch.osmo.max_tasks_per_workflow=3"], ["launch.osmo.placement.co.pool=h100-pool"]):
        for wf in render(experiment(runs, overrides)):
            validate_workflow(copy.deepcopy(wf.spec))
