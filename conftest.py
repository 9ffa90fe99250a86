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

#: Real systems a whole session shares, each started once per test process by a session-scoped
#: fixture: fixture -> the folder every test that uses it lives in. ``make test`` runs the suite
#: in several processes (pytest-xdist, ``--dist loadscope``); :func:`pytest_xdist_make_scheduler`
#: sends each folder here to one process as a whole, so the system starts once, not once per process.
SHARED_SYSTEMS = {"slurm_cluster": "backends/slurm/tests/"}
#: Wall seconds of each test module in a full run (``scripts/test_profile.py JUNIT
#: --write-durations tests/durations.json`` after ``make test`` refreshes it): the workers start
#: the longest units first, so no long module starts last while the other processes sit idle.
DURATIONS = Path(__file__).resolve().parent / "tests" / "durations.json"


def _scope_of(nodeid: str) -> str:
    """A test's unit of scheduling: its module (its module-scoped fixtures, a LeRobot server or
    a built LIBERO scene, are paid once), or the folder of the shared system it belongs to."""
    path = nodeid.split("::", 1)[0]
    return next((folder for folder in SHARED_SYSTEMS.values() if path.startswith(folder)), path)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadscope`` with :func:`_scope_of` as the scope (xdist's own splits a module's
    classes apart, and its ``xdist_group`` marker no longer reaches the scheduler under pytest
    9.2, whose node ids xdist cannot rename). Units start in the order the workers collected
    them (:func:`pytest_collection_modifyitems`: the longest first), not by their test count."""
    if config.getvalue("dist") != "loadscope":
        return None
    config.option.loadscopereorder = False
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope_of(nodeid)

    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test of a shared system outside its folder would start the system in a second process:
    refuse the collection, naming the test and where it belongs. In an xdist worker, order the
    units of scheduling longest first (:data:`DURATIONS`; a module not listed there goes last),
    each unit's tests in their own order."""
    for item in items:
        for fixture, folder in SHARED_SYSTEMS.items():
            if fixture in getattr(item, "fixturenames", ()) and not _scope_of(item.nodeid).startswith(folder):
                raise pytest.UsageError(f"{item.nodeid} uses {fixture}: its tests live in {folder} (conftest.py SHARED_SYSTEMS)")
    if hasattr(config, "workerinput"):
        seconds = _unit_seconds()
        items.sort(key=lambda item: -seconds.get(_scope_of(item.nodeid), 0.0))  # stable


def _unit_seconds() -> dict[str, float]:
    """:data:`DURATIONS` summed per unit of scheduling (:func:`_scope_of`); ``{}`` without it."""
    import json

    try:
        modules = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    units: dict[str, float] = {}
    for module, seconds in modules.items():
        units[_scope_of(module)] = units.get(_scope_of(module), 0.0) + float(seconds)
    return units


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
