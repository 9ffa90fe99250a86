"""A matrix's axes read back from its expanded runs (the snapshot keeps the runs, not the
``matrix`` section): labels from the run names, a checkpoint axis as steps, and groups that
are not a matrix (a suite's tasks, a run overridden by hand) left to the other sections."""

from __future__ import annotations

from arena.results.matrix import matrices


def _runs(snapshot: dict) -> dict:
    return {name: {"k": i, "n": 10, "success_rate": i / 10, "ci95": [0.0, 1.0], "counts": {"error": 0}, "state": "completed"}
            for i, name in enumerate(snapshot)}


def test_labels_with_dashes_come_back_from_the_run_names():
    policies = {"act-v2": {"type": "act_remote", "remote_port": 9000}, "diffusion-hi": {"type": "dp_remote", "remote_port": 9001}}
    snapshot = {f"eval.{p}-{t}": {"policy": body, "environment": {"type": "metaworld", "task": t}}
                for p, body in policies.items() for t in ("reach-v3", "pick-place-v3")}
    [m] = matrices(_runs(snapshot), snapshot)
    assert [(a["key"], a["labels"]) for a in m["axes"]] == [("policy", ["act-v2", "diffusion-hi"]),
                                                            ("environment.task", ["reach-v3", "pick-place-v3"])]
    assert m["series"] is None and all(a["steps"] is None for a in m["axes"])
    assert m["cells"]["diffusion-hi | pick-place-v3"]["run"] == "eval.diffusion-hi-pick-place-v3"


def test_a_checkpoint_axis_is_a_series_and_other_axes_are_not():
    snapshot = {f"eval.{c}-s{h}": {"server": {"checkpoint": f"/ckpt/{c}"}, "execution": {"execute_horizon": h}}
                for c in ("step_200", "step_100") for h in (4, 8)}
    [m] = matrices(_runs(snapshot), snapshot)
    checkpoint, horizon = m["axes"]
    assert checkpoint["steps"] == {"step_100": 100, "step_200": 200} and horizon["steps"] is None
    assert m["rows"] == ["step_100", "step_200"] and m["columns"] == ["s4", "s8"]  # steps down the rows, ascending
    assert list(m["series"]["lines"]) == ["s4", "s8"]
    assert [c["step"] for c in m["series"]["lines"]["s8"]] == [100, 200]


def test_a_suite_a_hand_overridden_run_and_skipped_runs_are_no_matrix():
    suite = {f"libero.{t}": {"environment": {"type": "libero", "task": t}} for t in ("a", "b", "c")}
    assert matrices(_runs(suite), suite) == []  # one axis, the task: By suite
    uneven = {"eval.x-a": {"p": 1, "t": "a"}, "eval.x-b": {"p": 1, "t": "b"}, "eval.y-a": {"p": 2, "t": "a"}}
    assert matrices(_runs(uneven), uneven) == []  # not one run per combination
    swept = {f"reach.d{d}": {"execution": {"delay": {"steps": d}}} for d in (0, 4)}
    assert matrices(_runs(swept), swept, skip=set(swept)) == []  # a delay sweep has its own section


def test_steps_are_read_from_step_like_names_only():
    from arena.results.matrix import _step_of

    assert [_step_of(t) for t in ("s1000", "step_2000", "ckpt-30", "005000", "/c/005000/pretrained_model", "/c/ckpt_7.npz")] == [
        1000, 2000, 30, 5000, 5000, 7]
    assert _step_of("pi05") is None and _step_of("/models/pi0_droid") is None and _step_of("last") is None


def test_values_stand_in_for_labels_the_names_do_not_give_without_local_paths():
    snapshot = {"eval.first": {"policy": {"path": "/home/me/ckpts/005000/pretrained_model"}},
                "eval.second": {"policy": {"path": "/home/me/ckpts/010000/pretrained_model"}},
                "eval.third": {"policy": {"path": "/home/me/ckpts/015000/pretrained_model"}}}
    [m] = matrices(_runs(snapshot), snapshot)  # one axis: its labels are the names' suffixes
    assert m["axes"][0]["labels"] == ["first", "second", "third"]
    assert m["axes"][0]["steps"] == {"first": 5000, "second": 10000, "third": 15000}  # from the paths
    from arena.results.matrix import _short

    assert _short('"/home/me/ckpts/005000/pretrained_model"') == "…/005000/pretrained_model"
