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
:mod:`arena.testing.frames` writes and reads length-prefixed frames of arena's wire codec on
files and pipes (:func:`write_frame`, :func:`read_frame`, :func:`read_frame_files`,
:func:`serve_calls`): the plugins' trace files and raw-simulator servers, never pickle.
"""

from arena.testing.doubles import OpenPIDouble, RecordingModel
from arena.testing.experiments import ExperimentOutcome, run_tiny_experiment, tiny_experiment
from arena.testing.faults import Fault, FaultKnobs, InjectedFailure
from arena.testing.frames import TruncatedFrame, read_frame, read_frame_files, serve_calls, write_frame

__all__ = [
    "ExperimentOutcome",
    "Fault",
    "FaultKnobs",
    "InjectedFailure",
    "OpenPIDouble",
    "RecordingModel",
    "TruncatedFrame",
    "read_frame",
    "read_frame_files",
    "run_tiny_experiment",
    "serve_calls",
    "tiny_experiment",
    "write_frame",
]
