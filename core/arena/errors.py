"""One exception hierarchy for arena; plugins subclass it.

Every error says what was wrong, where (file, run, key, endpoint) and, where it can, what to
do. The CLI maps :class:`ConfigError` to exit code 2 and everything else to exit code 3.
"""

from __future__ import annotations

import reprlib
from typing import Any


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` for a message, bounded: at most ``limit`` characters, and containers
    are walked only a few items and levels deep (a YAML alias bomb or a huge array never
    gets rendered whole just to be cut afterwards)."""
    r = reprlib.Repr()
    r.maxlevel = 3
    r.maxlist = r.maxtuple = r.maxdict = r.maxset = r.maxfrozenset = r.maxdeque = r.maxarray = 6
    r.maxstring = r.maxother = r.maxlong = max(8, limit)
    text = r.repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unwritable(exc: OSError) -> str:
    """One line for an output that cannot be written (disk full, read-only, not a directory):
    ``cannot write PATH: REASON``."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"cannot write {exc.filename}: {reason}" if exc.filename else f"cannot write the output: {reason}"


class ArenaError(Exception):
    """Base class of every error arena raises on purpose."""


class ConfigError(ArenaError):
    """A configuration is wrong: an experiment file, an override or a component config.

    ``file``, ``run`` and ``key`` locate the problem; ``str(err)`` reads
    ``FILE: run 'NAME': key a.b.c: MESSAGE`` with the parts that are known.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        run: str | None = None,
        key: str | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.run = run
        self.key = key
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file)
        if self.run:
            parts.append(f"run '{self.run}'")
        if self.key:
            parts.append(f"key {self.key}")
        prefix = ": ".join(parts)
        return f"{prefix}: {self.message}" if prefix else self.message

    def located(
        self, *, file: str | None = None, run: str | None = None, key_prefix: str | None = None
    ) -> ConfigError:
        """Return a copy with the missing location parts filled in."""
        key = self.key
        if key_prefix:
            key = f"{key_prefix}.{key}" if key else key_prefix
        return ConfigError(
            self.message,
            file=self.file or file,
            run=self.run or run,
            key=key,
        )


class ConfigErrors(ConfigError):
    """Several configuration problems found together, reported at once (each under its own key).

    ``errors`` are the single problems; ``str(err)`` reads ``FILE: SUMMARY:`` followed by one
    indented line per problem (``run 'NAME': key a.b: MESSAGE``).
    """

    def __init__(self, summary: str, errors: list[ConfigError], *, file: str | None = None) -> None:
        self.errors = list(errors)
        self.summary = summary
        lines = [f"  - {ConfigError(e.message, run=e.run, key=e.key)}" for e in self.errors]
        super().__init__("\n".join([f"{summary}:", *lines]), file=file)


class PluginError(ArenaError):
    """A plugin could not be loaded, registered a duplicate name, or is missing."""


class TransportError(ArenaError):
    """Base of the wire errors raised by :mod:`arena.transport` (see there)."""


class PolicyError(ArenaError):
    """A policy could not produce actions for some envs because of infrastructure.

    ``env_ids`` lists the envs whose current episode must end with outcome ``error``;
    ``None`` means every env. The rollout never counts these as policy failures.
    ``env_errors`` optionally gives each env its own reason (one fault may reach several envs
    in different ways); :meth:`for_env` is what an env's episode record says.
    """

    def __init__(
        self, message: str, env_ids: list[int] | None = None, env_errors: dict[int, str] | None = None
    ) -> None:
        super().__init__(message)
        self.env_ids = env_ids
        self.env_errors = dict(env_errors or {})

    def for_env(self, env_id: int) -> str:
        """``env <env_id>: <reason>``: this env's own reason, else the message."""
        return f"env {env_id}: {self.env_errors.get(env_id, str(self))}"


class SimulatorError(ArenaError):
    """Some envs of a vectorized environment failed for reasons of infrastructure (a worker
    process died, a simulator could not be restarted) while the others are fine.

    ``env_ids`` lists the envs whose episode must end with outcome ``error`` (``None``: every
    env). ``observation``, when not ``None``, is the batched observation holding the results
    of the other envs of the same call (``reset_envs`` raises it after resetting them), so
    their episodes go on. The rollout never counts these as policy failures.
    """

    def __init__(
        self, message: str, env_ids: list[int] | None = None, *, observation: dict | None = None
    ) -> None:
        super().__init__(message)
        self.env_ids = env_ids
        self.observation = observation


class LaunchError(ArenaError):
    """A launch backend could not start, wait for or stop something it manages."""


class ExecutableNotFound(LaunchError, FileNotFoundError):
    """A command's program is not an executable here (a bare name not on ``PATH``, or a path
    that is not an executable file): what it would run cannot start. ``program`` names it. A
    ``FileNotFoundError`` too, as ``subprocess.Popen`` raises; never an unwritable output."""

    def __init__(self, program: str, message: str) -> None:
        self.program = program
        super().__init__(message)

    def __str__(self) -> str:
        return str(self.args[0])


class EvaluationFailed(ArenaError):
    """``arena.evaluate()``: the experiment ran, but a run failed or has error episodes
    (``arena run`` would exit 3), so its numbers are not the policy's. ``result`` is the
    :class:`arena.ExperimentResult` as written (``None`` when none was); ``failures`` one line
    per failed run."""

    def __init__(self, message: str, *, result: object = None, failures: list[str] | None = None) -> None:
        super().__init__(message)
        self.result = result
        self.failures = list(failures or [])


class SuccessSignalError(ArenaError):
    """An environment does not declare, or does not deliver, its success signal."""


class ObservationError(ArenaError, ValueError):
    """An observation an adapter cannot turn into a request without changing it (e.g. a float
    image outside [0, 1], a 16-bit image); an infrastructure error, never a policy failure."""
