import os
import signal
from pathlib import Path

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
