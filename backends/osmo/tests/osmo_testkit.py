"""Test helpers of the OSMO backend: fake remote policies with server tasks, experiments, a fake ``osmo``.

The fake policies stand in for the openpi, GR00T and Cosmos plugins (their server tasks carry
what matters here: image, command, port, readiness, resources, secrets), so these tests do not
depend on those plugins' defaults. The fake ``osmo`` executable records its arguments as JSON
lines and answers like the real CLI (``--format-type json``), from a state file the test edits;
``workflow submit`` renders the file as the OSMO service does (its tokens protected, the rest
through sandboxed Jinja with undefined variables as errors) and refuses it like the service
when that fails. :func:`execute_task` then runs one task of a submitted workflow the way an
OSMO pod would: files written (base64 ones decoded), tokens substituted in every string of the
task, its command run, and its checkpoint directory published to the checkpoint URL when it
ends, also when it is killed.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from arena.hookspecs import hookimpl
from arena.policies.remote import RemoteChunkReplayPolicy, RemotePolicyConfig
from arena.servertask import ServerResources, ServerTask

GOLDEN = Path(__file__).parent / "golden"


class FakeOpenpiConfig(RemotePolicyConfig):
    embodiment: str = "droid"
    policy_config: str = Field("pi05_droid", description="openpi training config")


class FakeOpenpiPolicy(RemoteChunkReplayPolicy):
    name = "fake_openpi"
    Config = FakeOpenpiConfig
    adapter_family = "openpi"


class FakeGr00tConfig(RemotePolicyConfig):
    embodiment: str = "droid"
    remote_port: int = 5555


class FakeGr00tPolicy(RemoteChunkReplayPolicy):
    name = "fake_gr00t"
    Config = FakeGr00tConfig
    adapter_family = "openpi"


class FakeCosmosConfig(RemotePolicyConfig):
    embodiment: str = "droid"


class FakeCosmosPolicy(RemoteChunkReplayPolicy):
    name = "fake_cosmos"
    Config = FakeCosmosConfig
    adapter_family = "openpi"


def openpi_server(config: FakeOpenpiConfig) -> ServerTask:
    return ServerTask(
        name="openpi-server",
        image="registry.example/openpi-server:1.0",
        command=["uv", "run", "scripts/serve_policy.py", "--port={port}", "policy:checkpoint", "--policy.config={config}"],
        fields={"config": config.policy_config},
        port=8000,
        readiness="websocket",
        startup_timeout_s=900,
        resources=ServerResources(cpu=8, gpu=1, gpu_memory_gb=24, memory=64),
    )


def gr00t_server(config: FakeGr00tConfig) -> ServerTask:
    return ServerTask(
        name="gr00t-server",
        image="registry.example/gr00t-server:1.6",
        command=["python", "scripts/inference_service.py", "--server", "--host", "{host}", "--port", "{port}"],
        port=5555,
        readiness="zmq-ping",
        startup_timeout_s=600,
        resources=ServerResources(cpu=8, gpu=1, gpu_memory_gb=40, memory=64),
        secrets=["HF_TOKEN"],
    )


def cosmos_server(config: FakeCosmosConfig) -> ServerTask:
    return ServerTask(
        name="cosmos-server",
        image="registry.example/cosmos-server:1.0",
        command=["python", "-m", "cosmos_policy.serve", "--port", "{port}"],
        port=8000,
        readiness="http:/healthz",
        startup_timeout_s=1200,
        resources=ServerResources(cpu=16, gpu=1, gpu_memory_gb=80, memory=128, gpu_type="H100"),
        env={"COSMOS_CHECKPOINT": "/workspace/baked_checkpoint"},
    )


class FakeUnpublishedPolicy(RemoteChunkReplayPolicy):
    """A model whose plugin knows of no image a cluster can pull (as openpi, GR00T, Cosmos)."""

    name = "fake_unpublished"
    Config = FakeOpenpiConfig
    adapter_family = "openpi"


def unpublished_server(config: FakeOpenpiConfig) -> ServerTask:
    return ServerTask(
        name="unpublished-server",
        image=None,
        image_hint="no public image exists: build one from the model's Dockerfile",
        command=["python", "-m", "serve", "--port", "{port}"],
        local_command=["python", "-m", "serve", "--port", "{port}"],
        port=8000,
        resources=ServerResources(cpu=4, gpu=1, memory=32, storage=120),
    )


class FakeModelsPlugin:
    @hookimpl
    def arena_register_policies(self, register):
        register("fake_openpi", FakeOpenpiPolicy)
        register("fake_gr00t", FakeGr00tPolicy)
        register("fake_cosmos", FakeCosmosPolicy)
        register("fake_unpublished", FakeUnpublishedPolicy)

    @hookimpl
    def arena_register_server_tasks(self, register):
        register("fake_openpi", openpi_server)
        register("fake_gr00t", gr00t_server)
        register("fake_cosmos", cosmos_server)
        register("fake_unpublished", unpublished_server)


@pytest.fixture
def fake_models(arena_plugin, tmp_path, monkeypatch):
    arena_plugin(FakeModelsPlugin(), "osmo-test-fake-models")
    # A dry-run writes its workflow files to a new temporary directory: this test's.
    import tempfile

    (tmp_path / "tmp").mkdir(exist_ok=True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


PLATFORMS = {
    "gpu-pool": {
        "ovx-l40s": {"gpu_type": "L40S", "gpus": 8, "gpu_memory_gb": 48, "memory_gb": 512, "cpus": 64},
        "dgx-h100": {"gpu_type": "H100", "gpus": 8, "gpu_memory_gb": 80, "memory_gb": 2048, "cpus": 224},
    },
    "h100-pool": {
        "dgx-h100": {"gpu_type": "H100", "gpus": 8, "gpu_memory_gb": 80, "memory_gb": 2048, "cpus": 224},
    },
}


def osmo_options(**changes: Any) -> dict[str, Any]:
    """``launch.osmo`` of the tests: a described pool, an image and an output URL."""
    base: dict[str, Any] = {
        "pool": "gpu-pool",
        "platforms": PLATFORMS,
        "runner_image": "registry.example/arena-runner:0.1",
        "output_url": "s3://arena-results/{{workflow_id}}",
        "credentials": {"HF_TOKEN": {"credential": "hf", "key": "token"}},
    }
    base.update(changes)
    return base


def run(policy: str, task: str = "pick-place-v3", **policy_fields: Any) -> dict[str, Any]:
    return {"environment": {"type": "metaworld", "task": task}, "policy": {"type": policy, **policy_fields}}


def experiment(runs: dict[str, Any], overrides=(), *, name: str = "exp", osmo: dict[str, Any] | None = None, **launch):
    """Resolve an experiment of ``runs`` with the OSMO backend selected."""
    from arena.config import load_experiment_dict

    data = {
        "launch": {"backend": "osmo", "osmo": osmo if osmo is not None else osmo_options(), **launch},
        "shared": {"rollout_limit": {"num_episodes": 4}},
        "runs": runs,
    }
    return load_experiment_dict(data, list(overrides), source=f"{name}.yaml", check_requires=False)


def render(exp, *, placeholders: bool = False):
    """The rendered workflows of a resolved experiment."""
    from arena.launch.planning import plan_servers
    from arena.launch.submit import make_backend

    backend = make_backend(exp)
    return backend.render(exp, plan_servers(exp), placeholders=placeholders)


def dry_run_text(exp) -> str:
    """What ``--dry-run`` prints as the backend's plan."""
    from arena.launch.planning import plan_servers
    from arena.launch.submit import make_backend

    return make_backend(exp).plan(exp, plan_servers(exp), Path("out"))


def dry_run_files(text: str) -> dict[str, str]:
    """The workflow files a dry-run wrote, by file name, found where its output says they are."""
    import re

    found = re.search(r"the workflow files are in (\S+)/$", text, re.M)
    assert found, text
    return {p.name: p.read_text() for p in sorted(Path(found.group(1)).glob("*.yaml"))}


def tasks_of(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every task of a workflow dict, by name."""
    return {t["name"]: t for g in spec["workflow"]["groups"] for t in g["tasks"]}


def snapshot_of(task: dict[str, Any]) -> str:
    """The single-run snapshot a runner task carries, as OSMO writes it into the pod."""
    from arena_osmo.render import SNAPSHOT_FILE, file_bytes

    return file_bytes(next(f for f in task["files"] if f["path"] == SNAPSHOT_FILE)).decode("utf-8")


def node_spec_of(task: dict[str, Any]) -> dict[str, Any]:
    """What a runner task's ``arena node`` runs (:class:`arena.launch.node.NodeSpec`), as a dict."""
    from arena_osmo.render import NODE_SPEC_FILE, file_bytes

    return json.loads(file_bytes(next(f for f in task["files"] if f["path"] == NODE_SPEC_FILE)))


def normalized_text(workflows) -> str:
    """The workflows' text with each embedded run snapshot replaced by a stand-in.

    The snapshots hold every default of arena-core's configs; they are checked by loading
    them back (test_runner_snapshot_*), so the golden files do not change with those defaults.
    """
    import copy

    from arena_osmo.render import SNAPSHOT_FILE, dump

    parts = []
    for wf in workflows:
        spec = copy.deepcopy(wf.spec)
        for group in spec["workflow"]["groups"]:
            for task in group["tasks"]:
                for f in task.get("files", []):
                    if f["path"] == SNAPSHOT_FILE:
                        f["contents"] = "<base64 of the single-run snapshot: see test_runner_snapshot_round_trips>"
        parts.append("".join(f"# {line}\n" for line in wf.header) + dump(spec))
    return "---\n".join(parts)


def assert_golden(name: str, text: str) -> None:
    """Compare with ``golden/NAME``; ``ARENA_UPDATE_GOLDEN=1`` rewrites it."""
    path = GOLDEN / name
    if os.environ.get("ARENA_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing (ARENA_UPDATE_GOLDEN=1 writes it)"
    assert text == path.read_text(), f"{path} differs (ARENA_UPDATE_GOLDEN=1 rewrites it)"


# -- a fake `osmo` on PATH -----------------------------------------------------------------------
_FAKE = '''\
#!{python}
"""Fake osmo CLI: records argv to calls.jsonl and answers from state.json (see osmo_testkit)."""
import json, os, shutil, sys
from pathlib import Path

home = Path(os.environ["FAKE_OSMO_HOME"])
args = sys.argv[1:]
with open(home / "calls.jsonl", "a") as fh:
    fh.write(json.dumps(args) + "\\n")
state = json.loads((home / "state.json").read_text())
fail = state.get("fail", {{}})
key = " ".join(args[:2])
if key in fail:
    rule = fail[key]
    if rule.get("after", 0) <= sum(1 for l in open(home / "calls.jsonl") if json.loads(l)[:2] == args[:2]) - 1:
        print(rule.get("stderr", "error"), file=sys.stderr)
        sys.exit(rule.get("code", 1))
if args[:2] == ["workflow", "submit"]:
    # What the service does with the file (src/utils/job/workflow.py): its own tokens are
    # protected, the rest is rendered by sandboxed Jinja with undefined variables as errors.
    import re
    import jinja2, jinja2.sandbox, yaml
    text = Path(args[2]).read_text()
    defaults = (yaml.safe_load(text) or {{}}).get("default-values") or {{}}
    kept = {{}}
    def protect(match):
        name = "hash" + str(len(kept))
        kept[name] = "{{{{" + match.group(1) + "}}}}"
        return "{{{{" + name + "}}}}"
    body = re.sub(r"{{{{(uuid|workflow_id|output|input:[^}}]+|host:[^}}]+)}}}}", protect, text)
    try:
        rendered = jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined).from_string(body).render(
            {{**defaults, **kept}})
    except (jinja2.TemplateError, TypeError) as exc:
        print(f"Jinja Template Error: {{exc}}", file=sys.stderr)
        sys.exit(1)
    n = state.get("submitted", 0) + 1
    state["submitted"] = n
    (home / "state.json").write_text(json.dumps(state))
    wid = f"{{state.get('prefix', 'arena-exp')}}-{{n}}"
    (home / f"{{wid}}.yaml").write_text(rendered)
    print(json.dumps({{"name": wid, "overview": f"https://osmo.example/workflows/{{wid}}",
                      "dashboard_url": None}}, indent=2))
elif args[:2] == ["workflow", "query"]:
    wid = args[2]
    wf = state.get("workflows", {{}}).get(wid)
    if wf is None:
        print(f"Workflow {{wid}} not found", file=sys.stderr); sys.exit(1)
    print(json.dumps({{"name": wid, "uuid": "0" * 32, "submitted_by": "tester", "status": wf["status"],
                      "overview": "", "logs": "", "events": "", "spec": "", "template_spec": "",
                      "groups": [{{"name": g, "status": wf["status"], "tasks": tasks}}
                                 for g, tasks in wf.get("groups", {{}}).items()]}}, indent=2))
elif args[:2] == ["workflow", "cancel"]:
    for wid in args[2:]:
        if wid.startswith("-"):
            break
        print(json.dumps({{"name": wid}}, indent=2))
elif args[:2] == ["workflow", "logs"]:
    wid, task = args[2], args[args.index("--task") + 1]
    print(f"Workflow {{wid}} has logs:")
    print(state.get("logs", {{}}).get(task, f"log of {{task}}"))
elif args[:2] == ["credential", "set"]:
    payload = args[args.index("--payload-file") + 1]
    key, _, path = payload.partition("=")
    creds = state.setdefault("credentials", {{}})
    creds[args[2]] = {{key: open(path).read()}}
    (home / "state.json").write_text(json.dumps(state))
    print(json.dumps({{"name": args[2]}}))
elif args[:2] == ["credential", "delete"]:
    state.setdefault("credentials", {{}}).pop(args[2], None)
    (home / "state.json").write_text(json.dumps(state))
elif args[:2] == ["data", "download"]:
    src = state["data"][args[2]]
    shutil.copytree(src, Path(args[3]) / Path(src).name, dirs_exist_ok=True)
else:
    print("unknown command", args, file=sys.stderr)
    sys.exit(2)
'''


class FakeOsmo:
    """A fake ``osmo`` on PATH. ``calls`` lists the argument vectors it received."""

    def __init__(self, home: Path) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        exe = home / "bin" / "osmo"
        exe.parent.mkdir(exist_ok=True)
        exe.write_text(_FAKE.format(python=sys.executable))
        exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
        self.bin = exe.parent
        self.state: dict[str, Any] = {}
        self.save()

    def save(self) -> None:
        (self.home / "state.json").write_text(json.dumps(self.state))

    def load(self) -> dict[str, Any]:
        self.state = json.loads((self.home / "state.json").read_text())
        return self.state

    @property
    def calls(self) -> list[list[str]]:
        path = self.home / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def set_workflow(self, wid: str, status: str, groups: dict[str, list[dict[str, Any]]]) -> None:
        self.load()
        self.state.setdefault("workflows", {})[wid] = {"status": status, "groups": groups}
        self.save()


@pytest.fixture
def fake_osmo(tmp_path, monkeypatch) -> FakeOsmo:
    fake = FakeOsmo(tmp_path / "fake-osmo")
    monkeypatch.setenv("FAKE_OSMO_HOME", str(fake.home))
    monkeypatch.setenv("PATH", f"{fake.bin}{os.pathsep}{os.environ['PATH']}")
    return fake


def task(name: str, status: str, exit_code: int | None = None, lead: bool = True, message: str | None = None) -> dict[str, Any]:
    """One task of a query answer, with the fields of OSMO's TaskQueryResponse that arena reads."""
    return {
        "name": name, "retry_id": 0, "status": status, "exit_code": exit_code, "failure_message": message,
        "logs": "", "events": "", "pod_name": name, "task_uuid": "0" * 32, "lead": lead,
    }




def submitted_spec(fake: FakeOsmo, workflow_id: str) -> dict[str, Any]:
    """The workflow as the fake service rendered it at submission."""
    import yaml

    return yaml.safe_load((fake.home / f"{workflow_id}.yaml").read_text())


def _materialize(task: dict[str, Any], workflow_id: str, root: Path) -> dict[str, Any]:
    """``task`` as OSMO's pod sees it (``TaskSpec.parse``: tokens substituted in every string),
    with its files written under ``root`` (absolute paths re-rooted there)."""
    import re

    from arena_osmo.render import file_bytes

    tokens = {"workflow_id": workflow_id, "output": str(root / "output")}
    tokens |= {f"host:{name}": "127.0.0.1" for name in re.findall(r"{{\s*host:([^}\s]+)\s*}}", json.dumps(task))}
    text = json.dumps(task)
    for key, value in tokens.items():
        text = re.sub("{{[ ]*" + re.escape(key) + "[ ]*}}", value.replace("\\", "\\\\"), text)
    task = json.loads(text)
    (root / "output").mkdir(parents=True, exist_ok=True)
    for f in task.get("files", []):
        target = root / f["path"].lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = file_bytes(f)
        if not f.get("base64"):  # our own scripts name the files by absolute path
            data = data.replace(b"/tmp/arena/", f"{root}/tmp/arena/".encode())
        target.write_bytes(data)
    return task


def execute_task(
    fake: FakeOsmo,
    workflow_id: str,
    task_name: str,
    root: Path,
    *,
    kill_when=None,
    timeout_s: float = 600.0,
    path: str | None = None,
) -> int:
    """Run one task of a submitted workflow as an OSMO pod would; return its exit code.

    ``kill_when(root)``: polled while the task runs; when true, the task's whole process group
    is SIGKILLed (out of memory, eviction) and the exit code is 137. Either way the task's
    checkpoint directories are then published to their ``file://`` URLs, as OSMO's final
    checkpoint upload does for a completed or failed task. ``path``: the pod's PATH (default:
    this interpreter's bin directory first, so ``arena`` is this checkout's).
    """
    import signal
    import subprocess
    import time
    from urllib.parse import urlparse

    spec = submitted_spec(fake, workflow_id)
    task = _materialize(tasks_of(spec)[task_name], workflow_id, root)
    argv = [a.replace("/tmp/arena/", f"{root}/tmp/arena/") for a in [*task["command"], *task.get("args", [])]]
    env = {**os.environ, **task.get("environment", {})}
    env["PATH"] = path if path is not None else f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    with open(root / "task.log", "ab") as log:
        proc = subprocess.Popen(argv, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        code = None
        while code is None:
            code = proc.poll()
            if code is None and kill_when is not None and kill_when(root):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                code = 137
            elif code is None:
                assert time.monotonic() < deadline, (root / "task.log").read_text()[-3000:]
                time.sleep(0.05)
    for checkpoint in task.get("checkpoint", []):
        source = Path(checkpoint["path"])
        if source.is_dir():
            shutil.copytree(source, urlparse(checkpoint["url"]).path, dirs_exist_ok=True)
    return code


def runner_output(run_dir: Path, run: str | None, outcomes: list[str], state: str, error: str | None = None) -> Path:
    """What ``arena run-one`` leaves in a run directory (``run``: its name, default the
    directory's): records with these outcomes, a final status and run result."""
    from arena.outputs.records import EpisodeRecord, RecordWriter, StatusWriter, write_run_result

    run = run or run_dir.name
    run_dir.mkdir(parents=True)
    records = [
        EpisodeRecord(run=run, episode_index=i, seed=i, outcome=o, error="server gone" if o == "error" else None)
        for i, o in enumerate(outcomes)
    ]
    with RecordWriter(run_dir / "episodes.jsonl") as writer:
        for record in records:
            writer.write(record)
    StatusWriter(run_dir / "status.json").write(state=state, run=run, error=error, episodes_done=len(records))
    write_run_result(run_dir, run=run, state=state, error=error, episodes_total=4)
    return run_dir
