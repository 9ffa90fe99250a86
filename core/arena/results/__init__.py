"""Results: statistics, the merged ``experiment_result.json`` and the static HTML report.

- :mod:`~arena.results.stats`      ``newcombe_difference`` (one run's interval: :mod:`arena.outputs.stats`)
- :mod:`~arena.results.aggregate`  ``collect_run_records``, ``build_experiment_result``
- :mod:`~arena.results.report`     ``write_report`` (``index.html``, template ``arena/templates/report.html.j2``)
- :mod:`~arena.results.redact`     what a shareable report leaves out (hosts, the kernel, local paths)
- :mod:`~arena.results.paired`     paired / unpaired comparison of two rates, McNemar, Fisher, Holm
- :mod:`~arena.results.suite`      task-averaged and episode-weighted suite rates, suite differences
- :mod:`~arena.results.compare`    ``compare_experiments`` (``arena compare``'s figures)
- :mod:`~arena.results.comparison` what ``arena compare`` refuses and shows (the CLI prints it)
- :mod:`~arena.results.sample_size` episodes needed for a difference (``arena plan-episodes``, ``rollout_limit.detect``)
- :mod:`~arena.results.provenance` ``provenance.json``
"""
