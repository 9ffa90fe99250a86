"""Fixtures for the tao_cosmos_reason suite: a tiny model folder, conversation and task-aware
splits with byte-only fake media, a local fake Hub, and fake ssh/nvidia-smi/ffprobe on PATH."""

from __future__ import annotations

import http.server
import json
import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from arena_tao_cosmos_reason.request import PlanRequest
from cosmos_fixtures import conversation_split, task_aware_split, write_model  # noqa: F401

CACHE_ENV = {
    "HOME": "home", "XDG_CACHE_HOME": "xdg-cache", "XDG_CONFIG_HOME": "xdg-config", "XDG_DATA_HOME": "xdg-data",
    "XDG_STATE_HOME": "xdg-state", "HF_HOME": "hf-home", "HF_HUB_CACHE": "hf-home/hub",
    "HUGGINGFACE_HUB_CACHE": "hf-home/hub", "HF_ASSETS_CACHE": "hf-home/assets", "HF_XET_CACHE": "hf-home/xet",
    "HF_TOKEN_PATH": "hf-home/token", "HF_STORED_TOKENS_PATH": "hf-home/stored_tokens",
}
"""Every cache/config location a test of this plugin (or a library it calls) could write to,
relative to the test's own temporary folder."""


@pytest.fixture(autouse=True)
def isolated_user_dirs(tmp_path_factory, monkeypatch):
    """Point HOME, XDG_* and every Hugging Face cache at a fresh folder for each test.

    ``huggingface_hub`` reads these variables once, when it is imported; if an earlier test (of
    any plugin) imported it, its path constants still name the user's real folders, so they
    are re-pointed too. Returns the folder.
    """
    root = tmp_path_factory.mktemp("user-dirs")
    for name, rel in CACHE_ENV.items():
        monkeypatch.setenv(name, str(root / rel))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    (root / "home").mkdir()
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        old_home = str(getattr(constants, "HF_HOME", "")) or None
        for attr in dir(constants):
            value = getattr(constants, attr)
            if old_home and isinstance(value, str) and attr.isupper() and value.startswith(old_home):
                monkeypatch.setattr(constants, attr, str(root / "hf-home") + value[len(old_home):])
        for attr, rel in (("HF_HOME", "hf-home"), ("HF_HUB_CACHE", "hf-home/hub"),
                          ("HUGGINGFACE_HUB_CACHE", "hf-home/hub"), ("HF_ASSETS_CACHE", "hf-home/assets")):
            if hasattr(constants, attr):
                monkeypatch.setattr(constants, attr, str(root / rel))
    return root


@pytest.fixture
def workspace(tmp_path):
    """Model, splits, key, SQSH cache and an inventory under ``tmp_path``; all mounted at /ws."""
    model = write_model(tmp_path / "model")
    train_ann, train_media = conversation_split(tmp_path / "data", "train")
    val_ann, val_media = conversation_split(tmp_path / "data", "val")
    key = tmp_path / "id_ed25519"
    key.write_text("fake key")
    (tmp_path / "sqsh").mkdir()
    return {"root": tmp_path, "model": model, "train_ann": train_ann, "train_media": train_media,
            "val_ann": val_ann, "val_media": val_media, "key": key}


@pytest.fixture
def make_request(workspace):
    """``make_request(**overrides) -> PlanRequest``: a SLURM (1 x 8 GPUs, EGB 8) Nano request."""
    ws = workspace
    root = ws["root"]

    def build(**overrides) -> PlanRequest:
        fields = dict(
            model="auto", base_model_path_or_uri=str(ws["model"]), base_model_format="qwen3_vl",
            model_name_hint=None,
            train_annotation=[str(ws["train_ann"])], train_media_root=[str(ws["train_media"])],
            validation_annotation=[str(ws["val_ann"])], validation_media_root=[str(ws["val_media"])],
            write_spec=str(root / "run" / "config" / "train.toml"), results_dir=str(root / "run" / "results"),
            checkpoint_dir=str(root / "run" / "checkpoints"), cache_dir=str(root / "run" / "cache"),
            platform="slurm", gpus_per_node=8, nodes=1, partition="batch", account="acct",
            sqsh_path=str(root / "sqsh" / "image.sqsh"), ssh_key_path=str(ws["key"]), slurm_user="me",
            slurm_host=["login1"], container_mount=[f"{root}:/ws"], experiment_id="exp-1",
        )
        fields.pop("model_name_hint")
        fields.update(overrides)
        return PlanRequest(**fields)

    return build


REVISION_PATH = "/api/models/"
AGENT_REGISTRY_PATH = "/api/agent-harnesses"
EMPTY_AGENT_REGISTRY = {"standardEnvVars": [], "harnesses": {}}
"""What huggingface_hub 2.x fetches from the endpoint to build its User-Agent (an empty registry
is the shape the Hub serves; the plugin itself never asks for it)."""


class _Hub(http.server.BaseHTTPRequestHandler):
    """Answers by path: revision requests pop ``replies`` (default ``{"sha": "a"*40}``), the agent
    registry gets an empty registry, anything else a 404. Every request lands in ``seen``; the
    revision requests also in ``revisions``."""

    replies: list = []
    seen: list = []
    revisions: list = []

    def do_GET(self):  # noqa: N802
        entry = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
        type(self).seen.append(entry)
        if self.path.startswith(REVISION_PATH) and "/revision/" in self.path:
            type(self).revisions.append(entry)
            code, body = type(self).replies.pop(0) if type(self).replies else (200, {"sha": "a" * 40})
        elif self.path.split("?")[0] == AGENT_REGISTRY_PATH:
            code, body = 200, EMPTY_AGENT_REGISTRY
        else:
            code, body = 404, {"error": f"fake hub has no {self.path}"}
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_hub(monkeypatch):
    """A local Hub on 127.0.0.1; ``HF_ENDPOINT`` points at it. Set ``.replies`` to queue answers."""
    handler = type("Hub", (_Hub,), {"replies": [], "seen": [], "revisions": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:  # the library read HF_ENDPOINT when it was imported
        monkeypatch.setattr(constants, "ENDPOINT", endpoint, raising=False)
    detect_agent = sys.modules.get("huggingface_hub.utils._detect_agent")
    if detect_agent is not None:  # 2.x keeps the agent registry per process: each test starts as a fresh one
        monkeypatch.setattr(detect_agent, "_registry", None, raising=False)
    yield handler
    server.shutdown()
    server.server_close()


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    """``fake_bin(name, script)`` writes an executable on a PATH dir placed first."""
    folder = tmp_path / "fakebin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def make(name: str, body: str) -> Path:
        path = folder / name
        path.write_text("#!/usr/bin/env bash\n" + body + "\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return path

    return make


@pytest.fixture
def login_host(tmp_path, fake_bin):
    """A fake SLURM login host reached through a fake ``ssh`` first on ``PATH``.

    Its files live under ``.prefix`` (an absolute path that does not exist on the controller);
    the fake ``ssh`` runs the remote command with ``sh`` after re-rooting that prefix into a
    hidden folder (``.hidden``), on stdin and stdout too, so the controller can never see them.
    Every call's arguments are appended to ``.log``; ``.path(p)`` is where a remote path really is.
    """

    class Host:
        prefix = f"/tao-login-{os.getpid()}-{tmp_path.name}"
        hidden = tmp_path / "login-host-files"
        log = tmp_path / "ssh-calls.log"

        def path(self, remote: str) -> Path:
            return Path(str(self.hidden) + remote)

    host = Host()
    assert not os.path.exists(host.prefix)
    host.hidden.mkdir()
    python_bin = os.path.dirname(sys.executable)
    to_hidden = f"s#{host.prefix}#{host.hidden}{host.prefix}#g"
    to_remote = f"s#{host.hidden}{host.prefix}#{host.prefix}#g"
    fake_bin("ssh", f"""
printf '%s\\n' "$*" >> '{host.log}'
cmd="${{@: -1}}"
export PATH='{python_bin}':"$PATH"
mapped="$(printf '%s' "$cmd" | sed '{to_hidden}')"
sed '{to_hidden}' | sh -c "$mapped" | sed '{to_remote}'
exit "${{PIPESTATUS[1]}}"
""")
    return host
