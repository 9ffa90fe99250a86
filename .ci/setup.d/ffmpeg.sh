#!/usr/bin/env bash
# Debian's FFmpeg (its shared libraries libavutil, libavcodec, libavformat, …) for decoding the
# videos of a LeRobotDataset: torchcodec, LeRobot's video decoder, loads them from the system
# (without them: `OSError: libavutil.so.5x`). Used by plugins/lerobot's export tests with
# videos (`arena export lerobot --videos`); encoding needs none of it (PyAV's wheel carries its
# own FFmpeg). Idempotent: does nothing when the binary and libavutil are already there. Needs
# root (CI runs as root); otherwise it says how to install it and those tests skip.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../apt.sh"
if command -v ffmpeg >/dev/null 2>&1 && ldconfig -p 2>/dev/null | grep -q 'libavutil\.so\.'; then
  echo "ffmpeg: already installed ($(dpkg-query -W -f='${Version}' ffmpeg 2>/dev/null || command -v ffmpeg))"
  exit 0
fi
root_or_hint ffmpeg "sudo apt-get install ffmpeg (the LeRobot video-export tests skip meanwhile)" "${1:-}"
apt-get update -qq
apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null
echo "ffmpeg: installed $(dpkg-query -W -f='${Version}' ffmpeg)"
