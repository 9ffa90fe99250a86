"""arena plugin for Isaac Lab (and IsaacLab-Arena) environments.

Two halves (README): the arena side (:mod:`arena_isaaclab.config`,
:mod:`arena_isaaclab.env`, :mod:`arena_isaaclab.expert`, :mod:`arena_isaaclab.venv`) imports no
Isaac Lab and runs under any interpreter arena runs under; the simulator side
(:mod:`arena_isaaclab.sim`) runs in an environment worker under the Python 3.12 venv that
``arena venv setup isaaclab`` (alias ``arena isaaclab setup``) creates.
"""
