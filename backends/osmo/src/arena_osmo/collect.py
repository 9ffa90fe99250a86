"""``arena collect`` for OSMO: download what each runner published and merge the runs.

Every runner task publishes its own run directory to ``<output_url>/<run>`` (an OSMO
checkpoint: periodically, and once more when the task completes or fails), so one runner's
failure never costs another run's records. For each run whose task has ended this copies
what was published into the experiment's output directory; a run that published no final
state (its task was killed, evicted, never pulled its image, or was cancelled) is written as
``failed`` or ``cancelled`` with OSMO's reason, keeping every episode it did publish. URLs
whose scheme fsspec can open with what is installed (``file://``, and ``s3://``/``gs://``/...
with their fsspec packages) are read with fsspec; any other (``swift://``, or a missing fsspec
driver) goes through ``osmo data download``, which uses the user's OSMO data credentials.
Policy-server logs (non-lead tasks publish nothing) come from ``osmo workflow logs --task``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from rich.markup import escape

from arena.outputs.layout import EPISODES_FILE, RUN_RESULT_FILE, STATUS_FILE, run_dir as run_directory
from arena.outputs.records import FINAL_STATES, LIVE_STATES
from arena_osmo import osmo_cli
from arena_osmo.states import QUEUED, run_state, tasks_by_name

#: Files of a run directory run-one writes (the published directory's root holds them).
_RUN_FILES = (RUN_RESULT_FILE, STATUS_FILE, EPISODES_FILE)


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


def find_run_root(tree: Path) -> Path | None:
    """The published run directory inside a download (the shallowest holding run-one's files)."""
    found = sorted((p.parent for name in _RUN_FILES for p in tree.rglob(name)), key=lambda p: len(p.parts))
    return found[0] if found else None


def collect_workflow(entry: dict[str, Any], output_dir: Path, say=print) -> dict[str, str]:
    """Bring the published runs of one workflow into ``output_dir``; returns ``{run: how}``.

    ``say`` gets rich markup (what it quotes is escaped).
    """
    from arena.outputs.records import StatusWriter, read_json, write_run_result

    workflow = osmo_cli.query(entry["id"])
    tasks = tasks_by_name(workflow)
    how: dict[str, str] = {}
    for run, names in entry["runs"].items():
        state, error, raw = run_state(workflow, names["runner"], names.get("server"))
        if state in LIVE_STATES:
            how[run] = state
            continue
        run_dir = run_directory(output_dir, run)
        published = _fetch(names["url"], run_dir, say) if "url" in names else False
        result = read_json(run_dir / RUN_RESULT_FILE)
        if published and isinstance(result, dict) and result.get("state") in FINAL_STATES:
            how[run] = "downloaded"
            continue
        own = read_json(run_dir / STATUS_FILE) if published else None
        if isinstance(own, dict) and own.get("state") in FINAL_STATES and own.get("error"):
            # the task recorded why it ended before run-one could (arena missing from the image)
            state, error = own["state"], own["error"]
        elif state == "completed":  # run-one exited 0 but its final result never arrived
            state = "failed"
            error = f"the runner task ended but published no final result to {names.get('url')} (see runner.log)"
        run_dir.mkdir(parents=True, exist_ok=True)
        StatusWriter(run_dir / STATUS_FILE).write(state=state, run=run, error=error)
        write_run_result(run_dir, run=run, state=state, error=error)  # keeps the published episodes
        how[run] = f"{state} ({'partly published' if published else 'nothing published'})"
    _fetch_logs(entry, tasks, output_dir, say)
    return how


def _fetch(url: str, run_dir: Path, say) -> bool:
    """Copy the run directory published at ``url`` over ``run_dir``; whether anything was there."""
    with tempfile.TemporaryDirectory(prefix="arena-osmo-") as tmp:
        try:
            download(url, Path(tmp))
        except (FileNotFoundError, osmo_cli.OsmoCliError) as exc:
            say(f"[yellow]{escape(f'nothing to download at {url}: {exc}')}[/]")
            return False
        root = find_run_root(Path(tmp))
        if root is None:
            return False
        shutil.copytree(root, run_dir, dirs_exist_ok=True)
    return True


def _fetch_logs(entry: dict[str, Any], tasks: dict[str, dict[str, Any]], output_dir: Path, say) -> None:
    for run, names in entry["runs"].items():
        for kind in ("runner", "server"):
            task = names.get(kind)
            if not task or (tasks.get(task) or {}).get("status", "WAITING") in QUEUED:
                continue
            try:
                text = osmo_cli.task_logs(entry["id"], task)
            except osmo_cli.OsmoCliError as exc:
                say(f"[yellow]{escape(f'no {kind} log for run {run}: {exc}')}[/]")
                continue
            path = run_directory(output_dir, run) / f"{kind}.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
