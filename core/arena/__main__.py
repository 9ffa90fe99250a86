"""``python -m arena``: the ``arena`` command.

``python -m`` puts the working directory first on ``sys.path``; arena takes it off before
importing anything else, so a stray ``yaml.py`` or ``my_policy.py`` in the directory you run
from is never imported (install your package, or put it on ``PYTHONPATH``, and allow it with
``--allow-import``).
"""

import os
import sys

try:
    _cwd = os.getcwd()
except OSError:  # the working directory was deleted
    _cwd = None
if sys.path and sys.path[0] in ("", _cwd):
    del sys.path[0]

from arena.cli import main  # noqa: E402

main()
