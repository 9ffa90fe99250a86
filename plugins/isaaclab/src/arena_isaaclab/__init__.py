"""arena plugin for Isaac Lab (and IsaacLab-Arena) environments.

Two halves (README): the arena side (:mod:`arena_isaaclab.config`,
:mod:`arena_isaaclab.environment`, :mod:`arena_isaaclab.expert`, :mod:`arena_isaaclab.setup`)
imports no Isaac Lab and runs under any interpreter arena runs under; the simulator side
(:mod:`arena_isaaclab.sim`) runs in an environment worker under the Python 3.12 venv that
``arena isaaclab setup`` creates.
"""

#: Name of the benchmark venv (``$ARENA_VENVS/isaaclab``) whose interpreter runs the simulator.
VENV_NAME = "isaaclab"
