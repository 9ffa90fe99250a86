"""Test helpers for arena and its plugin authors (a pytest plugin, entry point ``pytest11``).

Fixtures (see :mod:`arena.testing.pytest_plugin`): ``arena_plugin`` registers a plugin object
for one test; ``policy_server`` starts a registered reference model or any Model in arena's
policy server; ``openpi_double`` starts a generic openpi-protocol double; ``run_experiment``
runs a tiny experiment end to end and returns its results; ``reference_server`` starts the
Meta-World expert server; ``arena_cli`` runs the ``arena`` command in a subprocess.
:func:`tiny_experiment` builds a one-run Meta-World experiment for any policy.
:mod:`arena.testing.envs` has small pure-numpy environments (one with a camera, one that
crashes on demand) that also run in environment workers under other interpreters.
:class:`FaultKnobs` (:mod:`arena.testing.faults`) is the mixin giving every server double,
core's and the plugins', the same fault knobs.
:func:`arena.testing.conformance.check_adapter_conformance` checks an embodiment adapter
against an environment's scripted expert (the expert's successes must survive the adapter).
"""

from arena.testing.doubles import OpenPIDouble, RecordingModel
from arena.testing.experiments import ExperimentOutcome, run_tiny_experiment, tiny_experiment
from arena.testing.faults import Fault, FaultKnobs, InjectedFailure

__all__ = [
    "ExperimentOutcome",
    "Fault",
    "FaultKnobs",
    "InjectedFailure",
    "OpenPIDouble",
    "RecordingModel",
    "run_tiny_experiment",
    "tiny_experiment",
]
