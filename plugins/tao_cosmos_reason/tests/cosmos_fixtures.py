"""Fixture builders shared by the tao_cosmos_reason tests (unique name: importable from any test)."""

from __future__ import annotations

import json
from pathlib import Path


def write_model(folder: Path, model_type: str = "qwen3_vl", index: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0\0\0\0")
    (folder / "tokenizer.json").write_text("{}")
    (folder / "processor_config.json").write_text("{}")
    if index is not None:
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def conversation_split(root: Path, name: str, n: int = 16, answers=None, style: str = "sharegpt") -> tuple[Path, Path]:
    media = root / f"{name}_media"
    media.mkdir(parents=True, exist_ok=True)
    records = []
    for i in range(n):
        clip = f"{name}_{i:03d}.mp4"
        (media / clip).write_bytes(b"\0\0\0\x18ftypmp42" + f"{name}{i}".encode())
        answer = answers[i % len(answers)] if answers else f"A person does thing {name} {i}."
        if style == "openai":
            records.append({"id": f"{name}-{i}", "video": clip, "width": 960, "height": 540, "fps": 24, "duration": 12,
                            "messages": [{"role": "user", "content": "What happens?"},
                                         {"role": "assistant", "content": answer}]})
        else:
            value = "<video>\nWhat happens?" if style == "llava" else "What happens?"
            records.append({"id": f"{name}-{i}", "video": clip, "width": 960, "height": 540, "fps": 24, "duration": 12,
                            "conversations": [{"from": "human", "value": value}, {"from": "gpt", "value": answer}]})
    ann = root / f"{name}.json"
    ann.write_text(json.dumps(records))
    return ann, media


def task_aware_split(root: Path, name: str, per_task: int = 8) -> tuple[list[Path], Path]:
    media = root / f"{name}_media"
    media.mkdir(parents=True, exist_ok=True)
    files = []
    for task, answers in (("bcq", ["yes", "no"]), ("mcq", ["A", "B", "C", "D"]),
                          ("scene_description", [f"a scene {k}" for k in range(4)])):
        items = []
        for i in range(per_task):
            clip = f"{name}_{task}_{i}.mp4"
            (media / clip).write_bytes(f"{name}{task}{i}".encode())
            items.append({"id": f"{name}-{task}-{i}", "video_id": clip, "question": f"Q {i}?",
                          "answer": answers[i % len(answers)], "width": 960, "height": 540})
        path = root / f"{name}_{task}.json"
        path.write_text(json.dumps({"format": "tao-vl-reason-v1.0", "metadata": {"task": task}, "items": items}))
        files.append(path)
    return files, media


def docker_mounts(script: str) -> list[tuple[str, str, str]]:
    """``(source, target, options)`` of every ``-v`` of a rendered ``docker run``."""
    import shlex

    words = shlex.split(script.replace("\\\n", " "), comments=False, posix=True)
    out = []
    for flag, value in zip(words, words[1:], strict=False):
        if flag == "-v":
            source, target, *options = value.split(":")
            out.append((source, target, options[0] if options else ""))
    return out


def slurm_mounts(script: str) -> list[tuple[str, str, str]]:
    """``(source, target, options)`` of the ``--container-mounts=`` of the training ``srun``."""
    import re
    import shlex

    values = re.findall(r"--container-mounts=(\S+)", script)
    out = []
    for value in values:
        for mount in shlex.split(value)[0].split(","):
            source, target, *options = mount.split(":")
            out.append((source, target, options[0] if options else ""))
    return out


def host_path_of(container_path: str, mounts: list[tuple[str, str, str]]) -> str | None:
    """The host path a container path reaches through ``mounts`` (longest target wins), or ``None``."""
    best = None
    for source, target, _ in mounts:
        if container_path == target or container_path.startswith(target.rstrip("/") + "/"):
            if best is None or len(target) > len(best[1]):
                best = (source, target)
    if best is None:
        return None
    return best[0] + container_path[len(best[1]):]


def exported(script: str) -> dict[str, str]:
    """``NAME -> value`` of the ``export NAME=value`` lines of a SLURM script, or the ``-e NAME=value``
    of a Docker one (values unquoted)."""
    import shlex

    env = {}
    for line in script.splitlines():
        line = line.strip().rstrip("\\").strip()
        if line.startswith("export ") and "=" in line:
            name, _, value = line[len("export "):].partition("=")
            words = shlex.split(value) if value else [""]
            env[name] = words[0] if words else ""
        elif line.startswith("-e ") and "=" in line:
            name, _, value = shlex.split(line[3:])[0].partition("=")
            env[name] = value
    return env
