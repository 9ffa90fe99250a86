"""``arena collect`` for OSMO: download each workflow's published output and merge the runs.

Each workflow's collector uploaded a directory (the runs of that workflow, their report) to
its ``output_url`` with ``{{workflow_id}}`` filled in. URLs whose scheme fsspec can open with
what is installed (``file://``, and ``s3://``/``gs://``/... with their fsspec packages) are
read with fsspec; any other (``swift://``, or a missing fsspec driver) goes through ``osmo
data download``, which uses the user's OSMO data credentials. Each run's directory is copied
into the experiment's output directory; the core then rebuilds ``experiment_result.json`` and
``index.html`` over all of them. A run whose records never got published (its task failed, or
the collector did) is written as failed or cancelled with OSMO's reason, so the report shows
it. Policy-server logs (non-lead tasks upload nothing) come from ``osmo workflow logs --task``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from arena_osmo import osmo_cli
from arena_osmo.collector import MARKER
from arena_osmo.states import QUEUED, run_state, tasks_by_name, workflow_finished


def resolve_url(url: str, workflow_id: str) -> str:
    """``url`` with OSMO's ``{{workflow_id}}`` token filled in."""
    import re

    return re.sub(r"\{\{\s*workflow_id\s*\}\}", workflow_id, url)


def fsspec_can_open(url: str) -> bool:
    """Whether fsspec has an importable driver for ``url``'s scheme."""
    try:
        import fsspec
    except ImportError:
        return False
    scheme = url.split("://", 1)[0] if "://" in url else "file"
    try:
        fsspec.get_filesystem_class(scheme)
    except (ImportError, ValueError):
        return False
    return True


def download(url: str, dest: Path) -> None:
    """Copy everything under ``url`` into ``dest``.

    Raises:
        FileNotFoundError: nothing is published at ``url`` (fsspec).
        OsmoCliError: ``osmo data download`` failed.
    """
    dest.mkdir(parents=True, exist_ok=True)
    if not fsspec_can_open(url):
        osmo_cli.data_download(url, str(dest))
        return
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/")
    if not fs.exists(root):
        raise FileNotFoundError(f"nothing is published at {url}")
    for path in fs.find(root):
        rel = path[len(root):].lstrip("/")
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(path, str(target))


def find_collector_root(tree: Path) -> Path | None:
    """The directory a collector published (it holds the collector's marker file)."""
    if (tree / MARKER).exists():
        return tree
    found = sorted(tree.rglob(MARKER), key=lambda p: len(p.parts))
    return found[0].parent if found else None


def collect_workflow(entry: dict[str, Any], output_dir: Path, say=print) -> dict[str, str]:
    """Bring one workflow's runs into ``output_dir``; returns ``{run: how}``."""
    from arena.rollout.records import StatusWriter, read_json, write_run_result

    workflow = osmo_cli.query(entry["id"])
    finished = workflow_finished(str(workflow.get("status", "")))
    tasks = tasks_by_name(workflow)
    collector = tasks.get(entry["collector_task"], {})
    how: dict[str, str] = {}
    if collector.get("status") == "COMPLETED":
        url = entry["output_url"]
        with tempfile.TemporaryDirectory(prefix="arena-osmo-") as tmp:
            try:
                download(url, Path(tmp))
            except (FileNotFoundError, osmo_cli.OsmoCliError) as exc:
                say(f"[yellow]workflow {entry['id']}: could not download {url}: {exc}[/]")
            root = find_collector_root(Path(tmp))
            for run in entry["runs"]:
                src = root / run if root is not None else None
                if src is not None and src.is_dir():
                    shutil.copytree(src, output_dir / run, dirs_exist_ok=True)
                    how[run] = "downloaded"
    collector_status = str(collector.get("status") or "")
    for run, names in entry["runs"].items():
        if run in how:
            continue
        if isinstance(read_json(output_dir / run / "run_result.json"), dict):
            how[run] = "kept"
            continue
        state, error, raw = run_state(workflow, names["runner"], names.get("server"))
        if raw.get("task_status") == "COMPLETED":
            # The runner finished; its records reach us only through the collector.
            if collector_status == "COMPLETED" or collector_status.startswith("FAILED") or finished:
                state = "failed"
                error = (
                    f"the run finished but its records were not published: collector task {entry['collector_task']} "
                    f"is {collector_status or 'missing'} (see `osmo workflow logs {entry['id']} --task {entry['collector_task']}`)"
                )
            else:
                how[run] = "waiting for the collector"
                continue
        if state in ("failed", "cancelled"):
            run_dir = output_dir / run
            run_dir.mkdir(parents=True, exist_ok=True)
            StatusWriter(run_dir / "status.json").write(state=state, run=run, error=error)
            write_run_result(run_dir, run=run, state=state, error=error)
        how[run] = state
    _fetch_logs(entry, tasks, output_dir, say)
    return how


def _fetch_logs(entry: dict[str, Any], tasks: dict[str, dict[str, Any]], output_dir: Path, say) -> None:
    for run, names in entry["runs"].items():
        for kind in ("runner", "server"):
            task = names.get(kind)
            if not task or (tasks.get(task) or {}).get("status", "WAITING") in QUEUED:
                continue
            try:
                text = osmo_cli.task_logs(entry["id"], task)
            except osmo_cli.OsmoCliError as exc:
                say(f"[yellow]no {kind} log for run {run}: {exc}[/]")
                continue
            path = output_dir / run / f"{kind}.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
