"""PushT (gym-pusht 0.1.8) in arena: the ``pusht`` environment (:mod:`.env`, options in
:mod:`.config`), its venv (:mod:`.venv`) and the scripted ``pusht_expert`` (:mod:`.expert`).

Only :mod:`.env` imports gym-pusht (in the env workers, under the ``pusht`` venv); the config,
the venv declaration and the expert need numpy and arena-core alone.
"""
