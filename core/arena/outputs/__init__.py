"""The output directory: its layout, the records and statuses written into it, its progress.

Below rollout, results, launch and the backends, which all read or write it through here; it
imports nothing of theirs. Modules, one concept each:

- :mod:`~arena.outputs.layout`    file names, run / shard / work directories, the runs of a directory
- :mod:`~arena.outputs.records`   ``EpisodeRecord``, ``RecordWriter``, ``read_records``, ``StatusWriter``,
  ``RUN_STATES`` / ``FINAL_STATES``, ``write_run_result``
- :mod:`~arena.outputs.run_stats`     ``wilson_interval``, ``success_rate`` (the numbers a run's result carries)
- :mod:`~arena.outputs.fingerprint` the protocol fingerprint on every record (what makes two runs comparable)
- :mod:`~arena.outputs.stopping`  ``rollout_limit.stop_when``: the betting confidence sequence, decided in seed order,
  and which episodes of a stopped run count
- :mod:`~arena.outputs.workqueue` ``WorkQueue``: episodes claimed with a lease, renewed, lapsed leases claimed
  once more, one finish per item
- :mod:`~arena.outputs.progress`  ``read_progress``, ``ProgressWatcher`` (live progress from the statuses)
"""
