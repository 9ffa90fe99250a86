"""scripts/import_graph.py holds issue 24's measure at zero: no import of core/arena runs back
up a level, and no module cycle across core, the plugins and the backends."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_graph_has_no_import_running_back_up_and_no_cycle():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "import_graph.py"), "--json", "--check"], capture_output=True, text=True
    )
    result = json.loads(done.stdout)
    assert (result["back_up"], result["module_cycles"]) == (0, []), result["back_up_imports"]
    assert done.returncode == 0
