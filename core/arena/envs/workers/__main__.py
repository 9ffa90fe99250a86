"""``python -m arena.envs.workers --fd N``: one environment worker (see :mod:`arena.envs.workers.worker`)."""

import sys

from arena.envs.workers.worker import main

sys.exit(main())
