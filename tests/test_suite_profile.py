"""The profile ``make test`` prints after the suite (scripts/test_profile.py): it reads the JUnit
file pytest wrote, with the CPU seconds the root conftest.py adds to each test case."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import test_profile  # noqa: E402  (scripts/ is no package)


def test_a_real_pytest_run_is_profiled_per_group_with_cpu_seconds(tmp_path):
    junit = tmp_path / "junit.xml"
    tests = ["tests/test_fsutil.py", "plugins/gr00t/tests/test_gr00t_mapping.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *tests],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    cases = ET.parse(junit).getroot().findall(".//testcase")
    cpu = [float(case.find("properties/property[@name='cpu_s']").get("value")) for case in cases]
    assert len(cpu) == len(cases) > 2 and sum(cpu) > 0  # every case, the import of its module included

    durations = tmp_path / "durations.json"
    shown = subprocess.run([sys.executable, str(ROOT / "scripts" / "test_profile.py"), str(junit), "--top", "3",
                            "--write-durations", str(durations)], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    rows = {line.split()[0]: line.split() for line in shown.stdout.splitlines() if line.startswith(("tests ", "plugins/"))}
    assert set(rows) == {"tests", "plugins/gr00t"}
    assert int(rows["tests"][1]) == 2  # test_fsutil.py's two tests
    total = next(line.split() for line in shown.stdout.splitlines() if line.startswith("all "))
    assert float(total[3]) == round(sum(cpu), 1)  # the CPU column adds up what was recorded
    assert "session:" in shown.stdout and "slowest 3 tests" in shown.stdout
    # what conftest.py orders the units of an xdist run by: each module's wall seconds
    assert set(json.loads(durations.read_text())) == set(tests)


def test_node_ids_and_groups_come_from_junits_class_names():
    case = ET.fromstring('<testcase classname="plugins.lerobot.tests.test_serving.TestBatch" name="test_x[2]" time="1.5"/>')
    assert test_profile._nodeid(case) == "plugins/lerobot/tests/test_serving.py::TestBatch::test_x[2]"
    assert test_profile.group_of("plugins/lerobot/tests/test_serving.py::t") == "plugins/lerobot"
    assert test_profile.group_of("backends/slurm/tests/test_x.py::t") == "backends/slurm"
    assert test_profile.group_of("tests/envs/test_x.py::t") == "tests/envs"
    assert test_profile.group_of("tests/test_x.py::t") == "tests"


def test_an_unreadable_file_is_named_and_exits_2(tmp_path):
    missing = tmp_path / "none.xml"
    shown = subprocess.run([sys.executable, str(ROOT / "scripts" / "test_profile.py"), str(missing)],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 2 and str(missing) in shown.stderr


def test_make_tests_scheduling_keeps_a_module_and_the_slurm_folder_on_one_worker(tmp_path):
    """conftest.py's scheduler (``--dist loadscope``, what ``make test`` runs): the Slurm
    backend's tests are one unit, whatever module they are in (one test cluster per session),
    every other module is one (its module-scoped fixtures are paid once)."""
    slurm = ["backends/slurm/tests/test_slurm_scripts.py", "backends/slurm/tests/test_slurm_script_quoting.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadscope",
         *slurm, "tests/test_fsutil.py", "plugins/gr00t/tests/test_gr00t_mapping.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    workers: dict[str, set[str]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("[gw") and " PASSED " in line:
            worker, nodeid = line.split("]", 1)[0][1:], line.split(" PASSED ", 1)[1].strip()
            path = nodeid.split("::", 1)[0]
            workers.setdefault("slurm" if path in slurm else path, set()).add(worker)
    assert set(workers) == {"slurm", "tests/test_fsutil.py", "plugins/gr00t/tests/test_gr00t_mapping.py"}, done.stdout[-3000:]
    assert all(len(on) == 1 for on in workers.values()), workers


def test_the_durations_file_names_modules_that_exist():
    """tests/durations.json orders the units of ``make test``'s workers: a module renamed or
    removed since it was written would keep a stale entry (refresh it with scripts/test_profile.py)."""
    modules = json.loads((ROOT / "tests" / "durations.json").read_text())
    assert modules and all(isinstance(seconds, (int, float)) and seconds >= 0 for seconds in modules.values())
    missing = [module for module in modules if not (ROOT / module).is_file()]
    assert not missing, f"tests/durations.json names modules that do not exist: {missing}"
