"""Build a tiny local Cosmos workspace: a model folder, two conversation splits, a request.

Usage: python make_tiny_workspace.py DIR   (then follow the plugin README)
The media files are byte-only stand-ins: planning never decodes them (preflight does, with ffprobe).
"""

import json
import sys
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else "cosmos-demo").absolute()
model = root / "model"
model.mkdir(parents=True, exist_ok=True)
(model / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
(model / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4)
(model / "tokenizer.json").write_text("{}")
for split in ("train", "val"):
    media = root / "data" / f"{split}_media"
    media.mkdir(parents=True, exist_ok=True)
    records = []
    for i in range(16):
        clip = f"{split}_{i:02d}.mp4"
        (media / clip).write_bytes(f"fake video {split} {i}".encode())
        records.append({"id": f"{split}-{i}", "video": clip, "width": 960, "height": 540, "fps": 24, "duration": 12,
                        "conversations": [{"from": "human", "value": "<video>\nIs the door open?"},
                                          {"from": "gpt", "value": "Yes" if i % 2 else "No"}]})
    (root / "data" / f"{split}.json").write_text(json.dumps(records, indent=1))
(root / "sqsh").mkdir(exist_ok=True)
(root / "sqsh" / "cosmos-framework.sqsh").write_bytes(b"placeholder")
(root / "id_demo").write_text("placeholder key")
request = {
    "base_model_path_or_uri": str(model), "base_model_format": "qwen3_vl", "backend": "cosmos-framework",
    "train_annotation": [str(root / "data" / "train.json")], "train_media_root": [str(root / "data" / "train_media")],
    "validation_annotation": [str(root / "data" / "val.json")], "validation_media_root": [str(root / "data" / "val_media")],
    "write_spec": str(root / "run" / "config" / "train.toml"), "results_dir": str(root / "run" / "results"),
    "checkpoint_dir": str(root / "run" / "checkpoints"), "cache_dir": str(root / "run" / "cache"),
    "platform": "slurm", "nodes": 1, "gpus_per_node": 8, "partition": "batch", "account": "my-account",
    "sqsh_path": str(root / "sqsh" / "cosmos-framework.sqsh"), "ssh_key_path": str(root / "id_demo"),
    "container_mount": [f"{root}:/workspace-data"], "experiment_id": "demo-001",
}
(root / "request.json").write_text(json.dumps(request, indent=2))
print(root / "request.json")
