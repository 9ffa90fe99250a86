"""Loading code named by an experiment file is opt-in.

A ``type`` that is not a registered name but ``package.module:Class`` makes arena import that
module — run its code — as soon as the experiment is validated. arena does so only for
modules the user allowed, by any of:

- ``--allow-import MODULE`` on ``arena run``, ``arena validate`` and ``arena run-one``
  (repeatable);
- ``$ARENA_ALLOW_IMPORTS=MODULE,MODULE`` (comma-separated).

An entry allows that module and its submodules (``my_lab`` allows ``my_lab.policies``);
``*`` allows any module. arena's own modules (``arena.…``, e.g.
``arena.testing.envs:ToyReachEnv``) are always allowed: they are the code already running.
An experiment file cannot allow its own imports.

Runs executed elsewhere inherit the opt-in through the snapshot: the output directory's
``experiment.yaml`` lists, under the top-level ``allow_imports``, exactly the modules the
experiment imported, and arena honours that list only where it executes a snapshot it wrote
(``arena run-one``, ``arena run --resume``, the OSMO collector) — so a Slurm job or an OSMO
task imports the same modules, and no others, without the flag or the variable.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: Environment variable holding allowed modules, comma-separated (``*``: any).
ALLOW_IMPORTS_ENV = "ARENA_ALLOW_IMPORTS"
#: The snapshot's top-level key listing the modules its experiment imported.
SNAPSHOT_KEY = "allow_imports"


@dataclass(frozen=True)
class ImportPolicy:
    """The modules an experiment may import (module names or prefixes; ``*`` for any)."""

    allowed: tuple[str, ...] = ()

    @classmethod
    def gather(
        cls,
        flags: Iterable[str] = (),
        *,
        environ: Mapping[str, str] | None = None,
        snapshot: Iterable[str] = (),
    ) -> ImportPolicy:
        """Combine ``--allow-import`` ``flags``, ``$ARENA_ALLOW_IMPORTS`` and a trusted snapshot's list."""
        env = (os.environ if environ is None else environ).get(ALLOW_IMPORTS_ENV, "")
        entries = [*flags, *env.split(","), *snapshot]
        return cls(tuple(dict.fromkeys(e.strip() for e in entries if e and e.strip())))

    def allows(self, module: str) -> bool:
        """Whether ``module`` (e.g. ``my_lab.policies``) may be imported."""
        return is_arena_module(module) or any(a == "*" or module == a or module.startswith(a + ".") for a in self.allowed)


def is_arena_module(module: str) -> bool:
    """Whether ``module`` is part of arena-core itself (always allowed, never recorded)."""
    return module == "arena" or module.startswith("arena.")


def module_of(type_name: str) -> str | None:
    """The module a ``package.module:Class`` type would import; ``None`` for a plain name."""
    if ":" not in type_name:
        return None
    return type_name.partition(":")[0]


def refusal(type_name: str, label: str) -> str:
    """The message for a ``type`` whose module the user did not allow (says how to opt in)."""
    module = module_of(type_name) or type_name
    top = module.split(".")[0]
    return (
        f"'{type_name}' is not a registered {label}, and loading it would import and run the module "
        f"'{module}' named by the experiment file, which arena does only when you allow it: pass "
        f"--allow-import {top} to arena run / validate / run-one, or set {ALLOW_IMPORTS_ENV}={top}"
    )


class ImportCheck:
    """The import opt-in of one load (:class:`ImportPolicy`), and the modules it imported.

    ``listed``: the file's own ``allow_imports`` (honoured only when ``trusted``, a snapshot
    arena wrote; named in the refusal otherwise).
    """

    def __init__(self, policy: ImportPolicy, listed: list[str], trusted: bool) -> None:
        self.policy = policy
        self.listed = ImportPolicy(tuple(listed))
        self.trusted = trusted
        self.used: list[str] = []

    def check(self, type_name: str, table: Mapping[str, Any], label: str) -> bool:
        """Whether resolving ``type_name`` imports a module (raises ValueError when not allowed)."""
        module = None if type_name in table else module_of(type_name)
        if module is None:
            return False
        if not self.policy.allows(module):
            message = refusal(type_name, label)
            if not self.trusted and self.listed.allows(module):
                message += f" (the file's own '{SNAPSHOT_KEY}' is honoured only in the snapshots arena runs)"
            raise ValueError(message)
        if not is_arena_module(module):
            self.used.append(module)
        return True
