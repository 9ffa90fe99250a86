"""Property tests of deep merge and override application."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.config import load_experiment_dict
from arena.config.merge import deep_merge, get_path, leaves, set_path
from arena.config.overrides import apply_overrides, parse_override

keys = st.text(alphabet="abcdefgh_", min_size=1, max_size=4)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6)
values = st.recursive(scalars | st.lists(scalars, max_size=3), lambda inner: st.dictionaries(keys, inner, max_size=3), max_leaves=10)
trees = st.dictionaries(keys, values, max_size=4)
paths = st.lists(keys, min_size=1, max_size=4).map(tuple)


@given(trees, trees)
def test_merge_is_idempotent(base, top):
    merged = deep_merge(base, top)
    assert deep_merge(merged, top) == merged
    assert deep_merge(base, base) == base
    assert deep_merge(base, {}) == base


@given(trees, trees)
def test_every_leaf_of_the_top_wins(base, top):
    merged = deep_merge(base, top)
    for path, value in leaves(top):
        if value != {}:
            assert get_path(merged, path) == value


@given(trees, trees)
def test_keys_only_in_base_survive(base, top):
    merged = deep_merge(base, top)
    for key in base.keys() - top.keys():
        assert merged[key] == base[key]


@given(trees, trees)
def test_merge_does_not_modify_its_inputs(base, top):
    before = (repr(base), repr(top))
    merged = deep_merge(base, top)
    for path, _ in leaves(merged):
        parent = get_path(merged, path[:-1]) if len(path) > 1 else merged
        parent[path[-1]] = "changed"
    assert (repr(base), repr(top)) == before


@given(st.dictionaries(keys, st.dictionaries(keys, scalars, max_size=3), max_size=3), paths, values)
def test_set_path_then_get_path_reads_the_value(data, path, value):
    blocked = _runs_through_a_scalar(data, path)
    try:
        updated = set_path(data, path, value)
    except TypeError:
        assert blocked  # only a path through a non-mapping value is refused
        return
    assert not blocked
    assert get_path(updated, path) == value


def _runs_through_a_scalar(data, path):
    for i in range(1, len(path)):
        node = get_path(data, path[:i], default=None)
        if node is None:
            return False  # missing (or null): set_path creates the mappings
        if not isinstance(node, dict):
            return True
    return False


plain_values = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.lists(st.integers(), max_size=3)


def _dump(value):
    return yaml.safe_dump(value, default_flow_style=True).removesuffix("\n...\n").strip()


@given(paths, plain_values)
def test_override_reads_back_as_the_value(path, value):
    override = parse_override(f"shared.{'.'.join(path)}={_dump(value)}")
    assert override.scope == "shared" and override.path == path
    assert override.value == value
    assert get_path(apply_overrides({}, [override]), path) == override.value


RUN = {"environment": {"type": "fake_env", "task": "reach"}, "policy": {"type": "fake_policy"}}


@settings(max_examples=40, deadline=None)
@given(
    shared=st.none() | st.integers(1, 10**6),
    shared_override=st.none() | st.integers(1, 10**6),
    own=st.none() | st.integers(1, 10**6),
    run_override=st.none() | st.integers(1, 10**6),
)
def test_resolved_value_follows_precedence(manager, shared, shared_override, own, run_override):
    run = dict(RUN)
    data = {"runs": {"alpha": run}}
    if shared is not None:
        data["shared"] = {"rollout_limit": {"num_episodes": shared}}
    if own is not None:
        run["rollout_limit"] = {"num_episodes": own}
    overrides = []
    if shared_override is not None:
        overrides.append(f"shared.rollout_limit.num_episodes={shared_override}")
    if run_override is not None:
        overrides.append(f"runs.alpha.rollout_limit.num_episodes={run_override}")
    expected = next(v for v in (run_override, own, shared_override, shared, 10) if v is not None)
    assert load_experiment_dict(data, overrides, manager=manager).runs["alpha"].rollout_limit.num_episodes == expected


@settings(max_examples=40, deadline=None)
@given(
    shared_opts=st.dictionaries(keys, st.integers(), max_size=3),
    own_opts=st.dictionaries(keys, st.integers(), max_size=3),
    horizon=st.integers(1, 1000),
)
def test_run_values_always_win_over_shared(manager, shared_opts, own_opts, horizon):
    data = {
        "shared": {"environment": {"type": "fake_env", "task": "shared", "options": shared_opts, "horizon": 1}},
        "runs": {"alpha": {"environment": {"options": own_opts, "horizon": horizon}, "policy": {"type": "fake_policy"}}},
    }
    env = load_experiment_dict(data, manager=manager).runs["alpha"].environment
    assert env.horizon == horizon
    assert env.options == {**shared_opts, **own_opts}
    assert env.task == "shared"
