"""The ``osmo`` launch backend: ``arena run exp.yaml --backend osmo``.

``plan`` renders the workflows (``--dry-run`` prints them, with ``<unset: KEY>`` stand-ins for
every missing setting and a list of them under their keys); ``check`` refuses what cannot be
submitted (every missing or invalid setting at once, placements the platforms cannot host, no
``osmo`` on PATH) before the output directory is written; ``submit`` writes each workflow to
``OUTPUT/osmo/NAME.yaml`` and submits it with ``osmo workflow submit … --format-type json``;
``status``, ``cancel`` and ``collect`` work from ``submission.json`` alone (the core builds the
backend with default options for them), so everything they need is recorded there.

arena's own policy servers are exposed on OSMO (their own tasks), so they require a key
generated at submit time: it goes into a new OSMO credential (``osmo credential set`` reads
it from standard input) named in ``submission.json`` (the name, never the key), and is
deleted by ``cancel`` and by ``collect`` once every workflow has finished.

Resume (``arena run --resume OUT``): ``collect`` first brings in what every runner published;
then one new workflow per pool holds only the runs with unfinished work items, each runner
carrying its run's finished records and starting ``arena run-one --resume``. The earlier
workflows keep the runs that were done; ``submission.json`` records both.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from rich.markup import escape
from rich.text import Text

from arena.errors import LaunchError
from arena.launch.base import LaunchBackend, Poll, Resume, Submission
from arena.launch.exposure import generate_key
from arena.outputs.layout import RUN_RESULT_FILE, STATUS_FILE, run_dir as run_directory
from arena.outputs.records import FINAL_STATES, StatusWriter, read_json
from arena_osmo import osmo_cli
from arena_osmo.collect import collect_workflow, resolve_url
from arena_osmo.options import OsmoOptions
from arena_osmo.render import (
    KEY_CREDENTIAL_KEY,
    KEY_CREDENTIAL_PLACEHOLDER,
    RenderedWorkflow,
    finished_records,
    render_workflows,
    run_url,
    server_exposures,
    submit_argv,
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
    can_resume = True
    options: OsmoOptions  # set by LaunchBackend.__init__ from Config

    # -- planning ------------------------------------------------------------------------------
    def render(
        self,
        experiment: ResolvedExperiment,
        servers: dict[str, ServerPlan],
        *,
        placeholders: bool,
        resume: Resume | None = None,
        carried: dict[str, bytes] | None = None,
        key_credential: str = KEY_CREDENTIAL_PLACEHOLDER,
    ) -> list[RenderedWorkflow]:
        """The workflows of ``experiment`` (see :func:`arena_osmo.render.render_workflows`)."""
        return self._render(
            experiment, servers, placeholders=placeholders, resume=resume, carried=carried, key_credential=key_credential
        )[0]

    def exposures(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> dict[str, Exposure]:
        return server_exposures(experiment, servers)

    def _render(self, experiment, servers, *, placeholders: bool, resume=None, carried=None, key_credential=KEY_CREDENTIAL_PLACEHOLDER):
        from arena.errors import ConfigError
        from arena_osmo.problems import Problems

        external = Problems(experiment.source)
        for name, plan in servers.items():
            if plan.external and plan.host in _LOCAL_HOSTS:
                external.add_invalid(ConfigError(
                    f"`server: {{external: true}}` points at {plan.host}:{plan.port}, which inside an OSMO task is the task "
                    "itself; set the policy's remote_host to an address OSMO's nodes can reach",
                    file=experiment.source, run=name, key="policy.remote_host",
                ))
        external.raise_if_any(allow_missing=True)
        return render_workflows(
            experiment, servers, self.options, placeholders=placeholders, resume=resume, carried=carried,
            key_credential=key_credential,
        )

    def plan(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan], output_dir: Path) -> str:
        """Write the workflow files ``submit`` would submit to a new temporary directory
        (nothing is submitted, the output directory is not created) and return a summary
        naming them, as the Slurm dry-run does: per file its pool, runs and which task gets
        which credential, the command that would submit it, then the missing settings. So
        ``arena run ... --dry-run > wf.yaml`` cannot be mistaken for a workflow file."""
        import tempfile

        from arena.launch import runner_image
        from arena.launch.wording import LIST_WHOLE, command, count, run_names

        workflows, problems = self._render(experiment, servers, placeholders=True)
        where = Path(tempfile.mkdtemp(prefix=f"arena-dry-run-{experiment.name}-osmo-"))
        lines = [f"# osmo: {count(len(workflows), 'workflow')}, not submitted; the workflow files are in {where}/"]
        for wf in workflows:
            path = where / f"{wf.name}.yaml"
            path.write_text(wf.text())
            lines.append(f"  {path}  {wf.header[0] if wf.header else ''}".rstrip())
            grants = [line for line in wf.header if " gets " in line]
            bare = [line.split(" gets ")[0].strip() for line in grants if line.endswith(" gets no credentials")]
            if len(bare) > LIST_WHOLE:  # a suite's 80 tasks without credentials: one line, not 80
                grants = [line for line in grants if not line.endswith(" gets no credentials")]
                grants.append(f"    {run_names(bare, 'task')} get no credentials")
            lines += [f"  {line}" for line in grants]
            lines.append(f"    submit: {command(submit_argv(str(path), wf.pool, self.options.priority))}")
        if workflows:
            lines.append(f"  (read one: less {where / workflows[0].name}.yaml)")
        lacking = runner_image.notes(experiment, "launch.osmo.runner_image")
        if lacking:
            lines.append("# runs the runner image cannot run, if it is built from docker/runner.Dockerfile:")
            lines += [f"#   {line}" for line in lacking]
        return "\n".join(lines + [f"# {line}" for line in problems.notes()])

    def check(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> None:
        """Refuse a submission that cannot work, before anything is written.

        Raises:
            ConfigError / ConfigErrors: every unset required option and impossible placement.
            LaunchError: the ``osmo`` CLI is not installed.
        """
        self.render(experiment, servers, placeholders=False)
        osmo_cli.executable()

    # -- submission ----------------------------------------------------------------------------
    def submit(
        self,
        experiment: ResolvedExperiment,
        servers: dict[str, ServerPlan],
        output_dir: Path,
        *,
        wait: bool = False,
        console: Console | None = None,
        resume: Resume | None = None,
    ) -> Submission:
        """Submit the workflows; with ``resume``, workflows of only the given runs, each runner
        carrying its finished records, added to the earlier ``submission.json``."""
        output_dir = Path(output_dir)
        carried = _finished_records(output_dir, experiment, resume) if resume is not None else None
        if resume is None:
            submission = Submission(backend=self.name, experiment=experiment.name, output_dir=str(output_dir))
            earlier: list[dict[str, Any]] = []
        else:
            submission = Submission.load(output_dir)
            earlier = _hand_over(submission, list(experiment.runs))
        key_credential = KEY_CREDENTIAL_PLACEHOLDER
        if any(e.key == "generated" for e in self.exposures(experiment, servers).values()):
            _drop_key_credential(submission)  # an earlier attempt's, if it is still there
            key_credential = f"arena-key-{secrets.token_hex(6)}"
            osmo_cli.set_secret_credential(key_credential, KEY_CREDENTIAL_KEY, generate_key())
            submission.extra = {**submission.extra, "key_credential": key_credential}
            _say(console, escape(f"created OSMO credential {key_credential} with the servers' API key (deleted after collect)"))
        workflows = self.render(
            experiment, servers, placeholders=False, resume=resume, carried=carried, key_credential=key_credential
        )
        spec_dir = output_dir / "osmo"
        spec_dir.mkdir(parents=True, exist_ok=True)
        if resume is not None:
            _reset_runs(output_dir, list(experiment.runs))
        entries: list[dict[str, Any]] = []
        for wf in workflows:
            path = spec_dir / f"{wf.name}.yaml"
            if resume is not None:
                path = _unused(path)
            path.write_text(wf.text())
            try:
                workflow_id = osmo_cli.submit(str(path), wf.pool, self.options.priority)
            except LaunchError as exc:
                self._abort(entries, earlier, submission, exc)
            entry = {
                "name": wf.name,
                "id": workflow_id,
                "pool": wf.pool,
                "file": str(path.relative_to(output_dir)),
                "runs": {
                    t.run: {"runner": t.runner, "server": t.server, "url": resolve_url(run_url(self._url(), t.run), workflow_id)}
                    for t in wf.runs
                },
            }
            if resume is not None:
                entry["resumed"] = True
            entries.append(entry)
            for t in wf.runs:
                submission.ids[t.run] = {"0": workflow_id}
            submission.extra = {**submission.extra, "workflows": earlier + entries}
            submission.save()
            what = "resubmitted" if resume is not None else "submitted"
            _say(console, f"workflow [bold]{escape(wf.name)}[/] " + escape(f"{what} as {workflow_id} ({len(wf.runs)} run(s), pool {wf.pool})"))
        submission.extra = {**submission.extra, "workflows": earlier + entries}
        submission.save()
        if wait:
            self.wait(submission, console)
        return submission

    def _url(self) -> str:
        assert self.options.output_url is not None  # render refused an unset one
        return self.options.output_url

    def _abort(self, entries, earlier, submission: Submission, exc: LaunchError) -> NoReturn:
        """A later workflow failed to submit: cancel the earlier ones so no GPU server is orphaned."""
        ids = [e["id"] for e in entries]
        note = ""
        if ids:
            try:
                osmo_cli.cancel(ids, "arena: a later workflow of this experiment failed to submit")
                note = f"; cancelled the workflows already submitted ({', '.join(ids)})"
            except LaunchError as cancel_exc:
                note = f"; could not cancel the workflows already submitted ({', '.join(ids)}): {cancel_exc}"
            submission.extra = {**submission.extra, "workflows": earlier + entries, "aborted": str(exc)}
            submission.save()
        _drop_key_credential(submission)
        raise LaunchError(f"{exc}{note}") from None

    def poll(self, submission: Submission, console=None) -> Poll:
        """One query of the submission's workflows (:meth:`LaunchBackend.wait` loops until each
        has finished): how many runs are in each state."""
        states = self.status(submission)
        counts: dict[str, int] = {}
        for st in states.values():
            shown = _shown(st)
            counts[shown] = counts.get(shown, 0) + 1
        done = all(workflow_finished(st["osmo"]["workflow_status"]) for st in states.values() if "osmo" in st)
        return Poll(done=done, summary="osmo: " + escape(", ".join(f"{n} {s}" for s, n in sorted(counts.items()))))

    # -- after submission ----------------------------------------------------------------------
    def status(self, submission: Submission) -> dict[str, dict[str, Any]]:
        """Per run: its state from OSMO (or from its collected status.json once final)."""
        out: dict[str, dict[str, Any]] = {}
        queried: dict[str, dict[str, Any]] = {}
        for entry in _workflows(submission):
            if entry["id"] not in queried:
                queried[entry["id"]] = osmo_cli.query(entry["id"])
            workflow = queried[entry["id"]]
            for run, names in entry["runs"].items():
                state, error, raw = run_state(workflow, names["runner"], names.get("server"))
                local = read_json(run_directory(submission.output_dir, run) / STATUS_FILE)
                if isinstance(local, dict) and local.get("state") in FINAL_STATES:
                    st = dict(local)
                else:
                    st = {"state": state}
                    if error:
                        st["error"] = error
                    if state == "pending" and raw.get("pending_reason"):
                        st["pending_reason"] = raw["pending_reason"]
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


def _finished_records(output_dir: Path, experiment: ResolvedExperiment, resume: Resume) -> dict[str, bytes]:
    """Per run with finished episodes: their records, for its resumed runner to carry."""
    from arena.results.run_summary import collect_run_records

    carried: dict[str, bytes] = {}
    for run in experiment.runs:
        todo = set(resume.remaining.get(run, []))
        records = [r for r in collect_run_records(output_dir / run) if r.episode_index not in todo]
        if records:
            carried[run] = finished_records([r.to_json() for r in sorted(records, key=lambda r: r.episode_index)])
    return carried


def _hand_over(submission: Submission, runs: list[str]) -> list[dict[str, Any]]:
    """The earlier workflows without ``runs`` (a resumed workflow takes them over); a workflow
    left with no run is kept under ``superseded`` (``arena cancel`` no longer needs it)."""
    kept: list[dict[str, Any]] = []
    superseded = submission.extra.setdefault("superseded", [])
    for entry in _workflows(submission):
        left = {run: names for run, names in entry["runs"].items() if run not in runs}
        if left:
            kept.append({**entry, "runs": left})
        else:
            superseded.append(entry)
    return kept


def _reset_runs(output_dir: Path, runs: list[str]) -> None:
    """Resumed runs are ``pending`` again: the earlier attempt's final state must not hide the
    new workflow's (their records stay; ``collect`` replaces them with the published ones)."""
    for run in runs:
        run_dir = run_directory(output_dir, run)
        run_dir.mkdir(parents=True, exist_ok=True)
        StatusWriter(run_dir / STATUS_FILE).write(state="pending", run=run, error=None)
        (run_dir / RUN_RESULT_FILE).unlink(missing_ok=True)


def _unused(path: Path) -> Path:
    """``path``, or ``NAME-resume-N.yaml`` when an earlier submission wrote it."""
    n = 1
    candidate = path
    while candidate.exists():
        candidate = path.with_name(f"{path.stem}-resume-{n}{path.suffix}")
        n += 1
    return candidate


def _shown(st: dict[str, Any]) -> str:
    return f"{st['state']} ({st['pending_reason']})" if st.get("pending_reason") else st["state"]


def _workflows(submission: Submission) -> list[dict[str, Any]]:
    entries = submission.extra.get("workflows")
    if not isinstance(entries, list):
        raise LaunchError(f"{submission.output_dir}/submission.json lists no OSMO workflows")
    return entries


def _plain(text: str) -> str:
    """Rich markup ``text`` as plain text (an escaped ``\\[kitchen]`` stays ``[kitchen]``)."""
    return Text.from_markup(text).plain


def _say(console, text: str) -> None:
    """Print rich markup ``text``; whatever it quotes from outside arena must be ``escape``d."""
    if console is not None:
        console.print(text, highlight=False)
