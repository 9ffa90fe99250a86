"""Executing runs: work items, the rollout loop, episode records and ``arena run-one``.

Modules, one concept each:

- :mod:`~arena.rollout.workitems`  ``WorkItem``, ``plan_work_items``, ``select_shard``, ``write_manifest``
- :mod:`~arena.rollout.rollout`    ``rollout`` (vectorized envs ↔ policy) and ``RolloutSummary``
- :mod:`~arena.rollout.run_one`    ``run_one``: one run or shard from a snapshot, with its files and exit code
"""
