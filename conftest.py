import os
import resource
import signal
from pathlib import Path

import pytest

# Headless MuJoCo for every test process and the subprocesses they start.
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
# Benchmark venvs (arena.venvs): the ones `scripts/setup-env.sh test` creates in this checkout,
# for the tests and for the env workers of the `arena run` they start.
os.environ.setdefault("ARENA_VENVS", str(Path(__file__).resolve().parent / ".venvs"))
# Tests that press Ctrl-C (SIGINT) on an `arena` they started need it to arrive. A suite started
# in the background of a non-interactive shell (`make test &`, some CI runners) inherits SIGINT
# ignored, and every child would inherit that too; an interpreter that starts with it ignored
# never raises KeyboardInterrupt. Handled here, children start with the default again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is a test extra
    pass
else:
    # CI machines are shared and slow: speed is measured in benchmarks/, not by Hypothesis.
    settings.register_profile(
        "arena", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "arena"))

ROOT = Path(__file__).resolve().parent

#: Fixtures that stand for one real system a whole session shares: every test that uses one
#: runs on the same pytest-xdist worker (``make test`` runs ``--dist loadgroup``), so the system
#: starts once, not once per worker.
SHARED_SYSTEMS = {"slurm_cluster": "slurm-cluster"}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the marker into the nodeid's @group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the tests for ``pytest -n N --dist loadgroup`` (what ``make test`` runs).

    A test module is one group: its module-scoped fixtures (a LeRobot server, a built LIBERO
    scene, a trained checkpoint) are paid once, by the worker that runs the module. Tests of a
    shared real system (:data:`SHARED_SYSTEMS`) form one group across modules. Without xdist
    the marker is inert.
    """
    for item in items:
        group = next((name for fixture, name in SHARED_SYSTEMS.items() if fixture in item.fixturenames), None)
        if group is None:
            group = Path(str(item.path)).resolve().relative_to(ROOT).as_posix() if item.path else item.nodeid
        item.add_marker(pytest.mark.xdist_group(group))


# The suite's profile (scripts/test_profile.py reads it from the JUnit XML): CPU seconds of each
# test, setup and teardown included, of the test process and of the children it waited for
# (servers, `arena run` subprocesses, environment workers). Module- and session-scoped fixtures
# count towards the first test that uses them and the last that releases them.
_CPU_AT_SETUP = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_CPU_AT_SETUP] = _cpu_seconds()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    if call.when == "teardown" and _CPU_AT_SETUP in item.stash:
        item.user_properties.append(("cpu_s", f"{_cpu_seconds() - item.stash[_CPU_AT_SETUP]:.3f}"))
    return (yield)
