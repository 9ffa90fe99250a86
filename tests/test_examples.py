"""Every experiment file a user is pointed at (examples/ and each package's own examples/)
validates and dry-runs with this checkout's packages installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.config import load_experiment
from arena.launch.submit import run_experiment

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted([*REPO.glob("examples/*.yaml"), *REPO.glob("examples/lerobot_bridge/*.yaml"), *REPO.glob("plugins/*/examples/*.yaml"), *REPO.glob("backends/*/examples/*.yaml")])


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(REPO)) for p in EXAMPLES])
def test_example_validates_and_dry_runs(path, tmp_path, capsys):
    experiment = load_experiment(path)
    assert experiment.runs
    assert run_experiment(experiment, output_dir=tmp_path / "out", dry_run=True) == 0
    text = capsys.readouterr().out
    assert all(name in text for name in experiment.runs)
    assert not (tmp_path / "out").exists()


def test_pi0_and_cosmos_dry_run_names_both_server_images(tmp_path, capsys):
    experiment = load_experiment(REPO / "examples" / "pi0_and_cosmos.yaml")
    assert sorted(experiment.runs) == ["kettle_cosmos", "kettle_pi05", "microwave_cosmos", "microwave_pi05"]
    assert run_experiment(experiment, output_dir=tmp_path / "out", dry_run=True) == 0
    text = capsys.readouterr().out
    assert "pi05_droid_jointpos_polaris" in text and "action_policy_server_robolab" in text


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(REPO)) for p in EXAMPLES])
def test_a_header_compares_the_folders_its_runs_write(path):
    """`arena run X --output-dir D` writes D itself (no timestamp below it), so an `arena
    compare` in the same header names those folders as they are."""
    import re
    import shlex

    header = [line.lstrip("# ").strip() for line in path.read_text().splitlines() if line.startswith("#")]
    written = {m.group(1) for line in header if (m := re.search(r"arena run \S+ .*--output-dir ([\w./-]+)$", line))}
    for line in header:
        if line.startswith("arena compare ") and written:
            folders = [w for w in shlex.split(line.split("#")[0])[2:] if not w.startswith("-")][:2]
            assert set(folders) <= written, f"{path.name}: `{line}` compares {folders}; its runs write {sorted(written)}"
