"""What keeps an OSMO experiment from being submitted, collected so that all are reported at once.

Rendering (:mod:`arena_osmo.render`) and placement (:mod:`arena_osmo.placement`) both add to one
:class:`Problems`; ``--dry-run`` shows a missing setting as a visible ``<unset: KEY>``.
"""

from __future__ import annotations

from arena.errors import ConfigError, ConfigErrors

#: What a missing setting shows as in ``--dry-run`` (``<unset: launch.osmo.pool>``).
PLACEHOLDER = "<unset: {}>"


class Problems:
    """What keeps an experiment from being submitted, collected so all are reported at once.

    ``missing`` settings (an unset pool, platform description, credential, image) may be
    stood in for by a visible ``<unset: KEY>`` in ``--dry-run``; ``invalid`` ones never.
    """

    def __init__(self, source: str | None) -> None:
        self.source = source
        self.missing: list[ConfigError] = []
        self.invalid: list[ConfigError] = []

    def add_missing(self, key: str, message: str, *, run: str | None = None) -> str:
        """Record a missing setting once; return its placeholder."""
        if not any(e.key == key and e.run == run for e in self.missing):
            self.missing.append(ConfigError(message, file=self.source, run=run, key=key))
        return PLACEHOLDER.format(key if run is None else f"runs.{run}.{key}")

    def add_invalid(self, error: ConfigError) -> None:
        if not any(str(e) == str(error) for e in self.invalid):
            self.invalid.append(error)

    def raise_if_any(self, *, allow_missing: bool) -> None:
        """Raise every problem at once (``allow_missing``: only when something is invalid).

        Raises:
            ConfigError: one problem; ConfigErrors: several.
        """
        errors = self.invalid + ([] if allow_missing and not self.invalid else self.missing)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ConfigErrors("the osmo launch backend cannot submit this experiment", errors, file=self.source)

    def notes(self) -> list[str]:
        """Comment lines naming every missing setting (for ``--dry-run``)."""
        if not self.missing:
            return []
        from arena.launch.wording import fold_by_run, some_runs

        lines = ["missing settings (a submission refuses these; each shows as <unset: KEY> above):"]
        # a setting every run misses alike (40 LIBERO runs without a server image) is one line
        pairs = ((e.run, f"{'runs.' + e.run + '.' if e.run else ''}{e.key}: {e.message}") for e in self.missing)
        for runs, message in fold_by_run(pairs):
            key, _, text = message.partition(": ")
            lines.append(f"  {key} (run(s) {some_runs(runs)}): {text}" if len(runs) > 1 else f"  {message}")
        return lines
