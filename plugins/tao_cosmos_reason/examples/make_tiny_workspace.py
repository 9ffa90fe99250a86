"""Build a tiny Cosmos Reason workspace to walk through the plugin README without a GPU.

    python make_tiny_workspace.py DIR

Writes, under DIR:
  model/                  a local qwen3_vl checkpoint folder (config.json, a one-tensor
                          header-only model.safetensors, tokenizer and processor files)
  data/{train,val}.json   ShareGPT-style conversations, one answer per record (Yes/No)
  data/{train,val}_media/ real, decodable media: 8 short H.264 mp4 clips (0.5 s, 64x48,
                          16 fps) and 8 jpg images per split
  docker-request.json     a one-GPU Docker request (Cosmos-RL, the Nano default backend)
  slurm-request.json      a 1 x 8 GPU SLURM request (Cosmos Framework) with one mount
  sqsh/cosmos-framework.sqsh, id_cluster   stand-ins for an existing SQSH and an SSH key

Nothing is downloaded: the clips are encoded with PyAV (``arena-core[video]``, or this
plugin's ``examples`` extra) and the images with Pillow (a dependency of arena-core).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import av
import numpy as np
from PIL import Image

CLIPS, IMAGES = 8, 8
SIZE = (64, 48)  # width, height in pixels
FPS, FRAMES = 16, 8  # 0.5 s clips


def write_model(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_vl", "architectures": ["Qwen3VLForConditionalGeneration"]}))
    header = json.dumps({"lm_head.weight": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4)
    (folder / "tokenizer.json").write_text("{}")
    (folder / "tokenizer_config.json").write_text("{}")
    (folder / "processor_config.json").write_text("{}")


def frame(seed: int, index: int) -> np.ndarray:
    """An RGB frame (height, width, 3) uint8: a gradient that moves with ``index``."""
    width, height = SIZE
    x = np.arange(width, dtype=np.uint16)[None, :]
    y = np.arange(height, dtype=np.uint16)[:, None]
    red = (x * 4 + index * 16 + seed * 7) % 256
    green = (y * 5 + seed * 13) % 256
    blue = np.full((height, width), (seed * 29) % 256, dtype=np.uint16)
    return np.stack(np.broadcast_arrays(red, green, blue), axis=-1).astype(np.uint8)


def write_clip(path: Path, seed: int) -> None:
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
        for index in range(FRAMES):
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame(seed, index), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def write_split(data: Path, split: str, offset: int) -> Path:
    media = data / f"{split}_media"
    media.mkdir(parents=True, exist_ok=True)
    records = []
    for i in range(CLIPS + IMAGES):
        seed = offset + i
        if i < CLIPS:
            name, field = f"{split}_clip_{i:02d}.mp4", "video"
            write_clip(media / name, seed)
            prompt, extra = "<video>\nIs the door open at the end of the clip?", {"fps": FPS, "duration": FRAMES / FPS}
        else:
            name, field = f"{split}_frame_{i:02d}.jpg", "image"
            Image.fromarray(frame(seed, 0)).save(media / name, quality=90)
            prompt, extra = "<image>\nIs the door open?", {}
        records.append({"id": f"{split}-{i:02d}", field: name, "width": SIZE[0], "height": SIZE[1], **extra,
                        "conversations": [{"from": "human", "value": prompt},
                                          {"from": "gpt", "value": "Yes" if i % 2 else "No"}]})
    annotation = data / f"{split}.json"
    annotation.write_text(json.dumps(records, indent=1) + "\n")
    return annotation


def main(root: Path) -> None:
    root = root.absolute()
    write_model(root / "model")
    data = root / "data"
    splits = {"train": write_split(data, "train", 0), "validation": write_split(data, "val", 100)}
    (root / "sqsh").mkdir(exist_ok=True)
    (root / "sqsh" / "cosmos-framework.sqsh").write_bytes(b"stand-in for an enroot image")
    (root / "id_cluster").write_text("stand-in for the SSH key of the cluster login host\n")
    common = {
        "base_model_path_or_uri": str(root / "model"), "base_model_format": "qwen3_vl",
        "train_annotation": [str(splits["train"])], "train_media_root": [str(data / "train_media")],
        "validation_annotation": [str(splits["validation"])], "validation_media_root": [str(data / "val_media")],
    }
    docker = common | {
        "platform": "docker", "gpus_per_node": 1, "rl_train_batch_per_replica": 8, "experiment_id": "tiny-docker",
        "write_spec": str(root / "docker-run" / "config" / "train.toml"),
        "results_dir": str(root / "docker-run" / "results"), "checkpoint_dir": str(root / "docker-run" / "checkpoints"),
        "cache_dir": str(root / "docker-run" / "cache"),
    }
    slurm = common | {
        "platform": "slurm", "backend": "cosmos-framework", "nodes": 1, "gpus_per_node": 8, "partition": "batch",
        "account": "my-account", "experiment_id": "tiny-slurm", "sqsh_path": str(root / "sqsh" / "cosmos-framework.sqsh"),
        "ssh_key_path": str(root / "id_cluster"), "container_mount": [f"{root}:/workspace"],
        "write_spec": str(root / "slurm-run" / "config" / "train.toml"),
        "results_dir": str(root / "slurm-run" / "results"), "checkpoint_dir": str(root / "slurm-run" / "checkpoints"),
        "cache_dir": str(root / "slurm-run" / "cache"),
    }
    (root / "docker-request.json").write_text(json.dumps(docker, indent=2) + "\n")
    (root / "slurm-request.json").write_text(json.dumps(slurm, indent=2) + "\n")
    print(root)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python make_tiny_workspace.py DIR")
    main(Path(sys.argv[1]))
