"""Results: statistics, the merged ``experiment_result.json`` and the static HTML report.

- :mod:`~arena.results.aggregate`       ``build_experiment_result``: every run merged into ``experiment_result.json``
- :mod:`~arena.results.run_summary`     one run's records read back (``collect_run_records``) and summarized
- :mod:`~arena.results.labels`          a run's policy label, what tells two models apart
- :mod:`~arena.results.groups`          runs by task, by policy and by suite, pooled and task-averaged rates
- :mod:`~arena.results.task_comparisons` policies on one task compared pairwise, Holm-adjusted
- :mod:`~arena.results.methods`         the statistical methods' names and the lines explaining them
- :mod:`~arena.results.difference_stats` two runs' rates compared: Newcombe intervals, McNemar, Fisher, Holm
  (one run's interval: :mod:`arena.outputs.run_stats`)
- :mod:`~arena.results.suite_stats`     task-averaged and episode-weighted suite rates, suite differences
- :mod:`~arena.results.compare`         ``arena compare``: its figures, what it refuses and what it shows
- :mod:`~arena.results.report`          ``write_report`` (``index.html``, template ``arena/templates/report.html.j2``)
- :mod:`~arena.results.redact`          what a shareable report leaves out (hosts, the kernel, local paths)
- :mod:`~arena.results.sample_size`     episodes needed for a difference (``arena plan-episodes``, ``rollout_limit.detect``)
- :mod:`~arena.results.provenance`      ``provenance.json``
"""
