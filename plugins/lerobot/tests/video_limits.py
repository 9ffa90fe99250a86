"""Which frame sizes LeRobot 0.6's default video encoder takes (run in the lerobot venv):

    python video_limits.py [SIZE ...]        # sizes as HxW, default: a sweep

Each size is encoded in its own child process the way ``lerobot.datasets.video_utils.
encode_video_frames`` encodes (``rgb_encoder_defaults()``: codec, pixel format and options, 4
random frames at 10 fps, through PyAV), because a size the encoder cannot take kills the process
natively (SIGFPE) instead of raising. Prints one JSON line per size: ``size``, ``returncode``
(negative: the signal), ``ok``. The measured limits are in ``arena_lerobot.export``
(``MIN_VIDEO_SIDE``) and plugins/lerobot/README.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

CHILD = """
import sys, numpy as np, av
from lerobot.datasets.video_utils import rgb_encoder_defaults
h, w = int(sys.argv[1]), int(sys.argv[2])
enc = rgb_encoder_defaults()
with av.open(sys.argv[3], "w") as out:
    stream = out.add_stream(enc.vcodec, 10, options=enc.get_codec_options(None, as_strings=True))
    stream.pix_fmt = enc.pix_fmt
    stream.width, stream.height = w, h
    for i in range(4):
        frame = av.VideoFrame.from_ndarray(np.random.default_rng(i).integers(0, 256, (h, w, 3), dtype=np.uint8), format="rgb24")
        for packet in stream.encode(frame):
            out.mux(packet)
    for packet in stream.encode():
        out.mux(packet)
"""

SWEEP = ["8x8", "15x15", "16x16", "17x17", "18x18", "24x24", "31x31", "32x32", "33x33", "34x34", "48x48", "63x63", "64x64", "15x64", "64x15", "65x64"]


def main(sizes: list[str]) -> None:
    for size in sizes or SWEEP:
        h, w = (int(v) for v in size.split("x"))
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run([sys.executable, "-c", CHILD, str(h), str(w), f"{tmp}/v.mp4"], capture_output=True, text=True, timeout=120)
        print(json.dumps({"size": size, "returncode": done.returncode, "ok": done.returncode == 0,
                          "error": done.stderr.strip().splitlines()[-1] if done.returncode and done.stderr.strip() else None}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
