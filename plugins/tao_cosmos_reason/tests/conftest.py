"""Fixtures for the tao_cosmos_reason suite: a tiny model folder, conversation and task-aware
splits with byte-only fake media, a local fake Hub, and fake ssh/nvidia-smi/ffprobe on PATH."""

from __future__ import annotations

import http.server
import json
import os
import stat
import threading
from pathlib import Path

import pytest

from arena_tao_cosmos_reason.request import PlanRequest


from cosmos_fixtures import conversation_split, task_aware_split, write_model  # noqa: E402,F401


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


class _Hub(http.server.BaseHTTPRequestHandler):
    replies: list = []
    seen: list = []

    def do_GET(self):  # noqa: N802
        type(self).seen.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}})
        code, body = type(self).replies.pop(0) if type(self).replies else (200, {"sha": "a" * 40})
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
    handler = type("Hub", (_Hub,), {"replies": [], "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    yield handler
    server.shutdown()


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
