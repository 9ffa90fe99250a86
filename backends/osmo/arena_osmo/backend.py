"""The ``osmo`` launch backend: ``arena run exp.yaml --backend osmo``.

``plan`` renders the workflows (``--dry-run`` prints them, with ``<unset: …>`` placeholders
where ``runner_image`` or ``output_url`` is missing); ``check`` refuses what cannot be
submitted (unset options, placements the platforms cannot host, no ``osmo`` on PATH) before
the output directory is written; ``submit`` writes each workflow to ``OUTPUT/osmo/NAME.yaml``
and submits it with ``osmo workflow submit … --format-type json``; ``status``, ``cancel`` and
``collect`` work from ``submission.json`` alone (the core builds the backend with default
options for them), so everything they need is recorded there.

arena's own policy servers are exposed on OSMO (their own tasks), so they require a key
generated at submit time: it goes into a new OSMO credential (``osmo credential set`` reads
it from standard input) named in ``submission.json`` (the name, never the key), and is
deleted by ``cancel`` and by ``collect`` once every workflow has finished.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from arena.errors import ConfigError, LaunchError
from arena.launch.base import LaunchBackend, Submission
from arena.launch.exposure import generate_key
from arena_osmo import osmo_cli
from arena_osmo.collect import collect_workflow, resolve_url
from arena_osmo.options import OsmoOptions
from arena_osmo.render import (
    COLLECTOR_TASK,
    KEY_CREDENTIAL_KEY,
    KEY_CREDENTIAL_PLACEHOLDER,
    RenderedWorkflow,
    render_workflows,
    server_exposures,
)
from arena_osmo.states import run_state, workflow_finished

if TYPE_CHECKING:
    from rich.console import Console

    from arena.config import ResolvedExperiment
    from arena.launch.exposure import Exposure
    from arena.launch.planning import ServerPlan

_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


class OsmoBackend(LaunchBackend):
    """Runs every run as a group of an NVIDIA OSMO workflow."""

    name = "osmo"
    Config = OsmoOptions

    def __init__(self, options: OsmoOptions) -> None:
        super().__init__(options)
        self.options: OsmoOptions = options

    # -- planning ------------------------------------------------------------------------------
    def render(
        self,
        experiment: ResolvedExperiment,
        servers: dict[str, ServerPlan],
        *,
        placeholders: bool,
        key_credential: str = KEY_CREDENTIAL_PLACEHOLDER,
    ) -> list[RenderedWorkflow]:
        """The workflows of ``experiment`` (see :func:`arena_osmo.render.render_workflows`)."""
        self._check_external(experiment, servers)
        return render_workflows(
            experiment, servers, self.options, placeholders=placeholders, key_credential=key_credential
        )

    def exposures(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> dict[str, Exposure]:
        return server_exposures(experiment, servers)

    def plan(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan], output_dir: Path) -> str:
        workflows = self.render(experiment, servers, placeholders=True)
        return "---\n".join(wf.text() for wf in workflows)

    def check(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> None:
        """Refuse a submission that cannot work, before anything is written.

        Raises:
            ConfigError: an unset required option or an impossible placement.
            LaunchError: the ``osmo`` CLI is not installed.
        """
        self.render(experiment, servers, placeholders=False)
        osmo_cli.executable()

    @staticmethod
    def _check_external(experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> None:
        for name, plan in servers.items():
            if plan.external and plan.host in _LOCAL_HOSTS:
                raise ConfigError(
                    f"`server: {{external: true}}` points at {plan.host}:{plan.port}, which inside an OSMO task is the task "
                    "itself; set the policy's remote_host to an address OSMO's nodes can reach",
                    file=experiment.source, run=name, key="policy.remote_host",
                )

    # -- submission ----------------------------------------------------------------------------
    def submit(
        self,
        experiment: ResolvedExperiment,
        servers: dict[str, ServerPlan],
        output_dir: Path,
        *,
        wait: bool = False,
        console: Console | None = None,
    ) -> Submission:
        submission = Submission(backend=self.name, experiment=experiment.name, output_dir=str(output_dir))
        key_credential = KEY_CREDENTIAL_PLACEHOLDER
        if any(e.key == "generated" for e in self.exposures(experiment, servers).values()):
            key_credential = f"arena-key-{secrets.token_hex(6)}"
            osmo_cli.set_secret_credential(key_credential, KEY_CREDENTIAL_KEY, generate_key())
            submission.extra = {"key_credential": key_credential}
            _say(console, f"created OSMO credential {key_credential} with the servers' API key (deleted after collect)")
        workflows = self.render(experiment, servers, placeholders=False, key_credential=key_credential)
        spec_dir = Path(output_dir) / "osmo"
        spec_dir.mkdir(parents=True, exist_ok=True)
        entries: list[dict[str, Any]] = []
        for wf in workflows:
            path = spec_dir / f"{wf.name}.yaml"
            path.write_text(wf.text())
            try:
                workflow_id = osmo_cli.submit(str(path), wf.pool, self.options.priority)
            except LaunchError as exc:
                self._abort(entries, submission, exc, console)
            entry = {
                "name": wf.name,
                "id": workflow_id,
                "pool": wf.pool,
                "file": str(path.relative_to(output_dir)),
                "output_url": resolve_url(wf.output_url, workflow_id),
                "collector_task": COLLECTOR_TASK,
                "runs": {t.run: {"runner": t.runner, "server": t.server} for t in wf.runs},
            }
            entries.append(entry)
            for t in wf.runs:
                submission.ids[t.run] = {"0": workflow_id}
            submission.extra = {**submission.extra, "workflows": entries}
            submission.save()
            _say(console, f"workflow [bold]{wf.name}[/] submitted as {workflow_id} ({len(wf.runs)} run(s), pool {wf.pool})")
        submission.extra = {**submission.extra, "workflows": entries}
        submission.save()
        if wait:
            self._wait(submission, console)
        return submission

    def _abort(self, entries: list[dict[str, Any]], submission: Submission, exc: LaunchError, console) -> NoReturn:
        """A later workflow failed to submit: cancel the earlier ones so no GPU server is orphaned."""
        ids = [e["id"] for e in entries]
        note = ""
        if ids:
            try:
                osmo_cli.cancel(ids, "arena: a later workflow of this experiment failed to submit")
                note = f"; cancelled the workflows already submitted ({', '.join(ids)})"
            except LaunchError as cancel_exc:
                note = f"; could not cancel the workflows already submitted ({', '.join(ids)}): {cancel_exc}"
            submission.extra = {**submission.extra, "workflows": entries, "aborted": str(exc)}
            submission.save()
        _drop_key_credential(submission)
        raise LaunchError(f"{exc}{note}") from None

    def _wait(self, submission: Submission, console) -> None:
        last: dict[str, str] = {}
        while True:
            states = self.status(submission)
            summary = {name: st["state"] for name, st in states.items()}
            if summary != last:
                counts: dict[str, int] = {}
                for state in summary.values():
                    counts[state] = counts.get(state, 0) + 1
                _say(console, "osmo: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
                last = summary
            if all(workflow_finished(st["osmo"]["workflow_status"]) for st in states.values()):
                return
            self._sleep(self.options.poll_interval_s)

    @staticmethod
    def _sleep(seconds: float) -> None:
        time.sleep(seconds)

    # -- after submission ----------------------------------------------------------------------
    def status(self, submission: Submission) -> dict[str, dict[str, Any]]:
        """Per run: its state from OSMO (or from its collected status.json once final)."""
        from arena.rollout.records import read_json

        out: dict[str, dict[str, Any]] = {}
        for entry in _workflows(submission):
            workflow = osmo_cli.query(entry["id"])
            for run, names in entry["runs"].items():
                state, error, raw = run_state(workflow, names["runner"], names.get("server"))
                local = read_json(Path(submission.output_dir) / run / "status.json")
                if isinstance(local, dict) and local.get("state") in ("completed", "failed", "cancelled"):
                    st = dict(local)
                else:
                    st = {"state": state}
                    if error:
                        st["error"] = error
                st["osmo"] = raw
                out[run] = st
        return out

    def cancel(self, submission: Submission) -> None:
        ids = [e["id"] for e in _workflows(submission)]
        if ids:
            osmo_cli.cancel(ids, f"arena cancel {submission.output_dir}")
        _drop_key_credential(submission)

    def collect(self, submission: Submission) -> Path:
        output_dir = Path(submission.output_dir)
        for entry in _workflows(submission):
            collect_workflow(entry, output_dir, say=lambda text: print(_plain(text)))
        if submission.extra.get("key_credential"):
            finished = all(
                workflow_finished(osmo_cli.query(entry["id"]).get("status", "")) for entry in _workflows(submission)
            )
            if finished:  # a task still queued would need it to start
                _drop_key_credential(submission)
        return output_dir


def _drop_key_credential(submission: Submission) -> None:
    """Delete the submission's key credential (best effort: a leftover holds a dead key)."""
    name = submission.extra.get("key_credential")
    if not name:
        return
    try:
        osmo_cli.delete_credential(name)
    except LaunchError:
        return
    submission.extra = {k: v for k, v in submission.extra.items() if k != "key_credential"}
    submission.save()


def _workflows(submission: Submission) -> list[dict[str, Any]]:
    entries = submission.extra.get("workflows")
    if not isinstance(entries, list):
        raise LaunchError(f"{submission.output_dir}/submission.json lists no OSMO workflows")
    return entries


def _plain(text: str) -> str:
    import re

    return re.sub(r"\[/?[a-z ]*\]", "", text)


def _say(console, text: str) -> None:
    if console is not None:
        console.print(text, highlight=False)
