"""Files arena writes atomically are readable by colleagues on a shared disk (the umask applies)."""

import os
import stat

from arena.fsutil import write_text_atomic
from arena.outputs.records import write_json_atomic


def test_atomic_writes_follow_the_umask_and_leave_no_temporary_files(tmp_path):
    old = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "a" / "experiment.yaml", "runs: {}\n")
        write_json_atomic(tmp_path / "a" / "status.json", {"state": "running"})
    finally:
        os.umask(old)
    for name in ("experiment.yaml", "status.json"):
        mode = stat.S_IMODE((tmp_path / "a" / name).stat().st_mode)
        assert mode == 0o644, (name, oct(mode))
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["experiment.yaml", "status.json"]


def test_atomic_write_replaces_the_old_content_whole(tmp_path):
    path = tmp_path / "run_result.json"
    write_json_atomic(path, {"state": "running"})
    write_json_atomic(path, {"state": "completed"})
    assert path.read_text().strip().endswith("}")
    assert '"completed"' in path.read_text()
