"""One readiness check's outcome, as ``arena doctor`` reports it and environments declare them.

:class:`Check` sits below both :mod:`arena.doctor` (which runs the checks) and
:mod:`arena.envs.base` (whose :meth:`~arena.envs.base.Environment.venv_checks` returns them), so
the environment contract names its return type and the doctor calls that contract directly,
with no import running from the environments back to the doctor.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

#: The statuses a check has: nothing wrong, nothing to do, works with a caveat, broken.
STATUSES = ("ok", "info", "warn", "fail")


@dataclass
class Check:
    """``name`` (what was checked), ``status`` (one of :data:`STATUSES`; ``fail`` makes
    ``arena doctor`` exit 1), ``detail`` (what was found) and ``fix`` (how to fix it, or
    ``None``)."""

    name: str
    status: str  # ok | info | warn | fail
    detail: str
    fix: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)
