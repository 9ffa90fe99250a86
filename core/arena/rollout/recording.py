"""Episode videos: one file per recorded episode, encoded with PyAV (FFmpeg's libraries).

Opt-in per run (``recording: {enabled, camera, fps, max_episodes}``). Only the envs running a
recorded episode are rendered — through ``env.render(env_id)``, or from
``observation["camera_obs"][camera]`` when the env already produces that camera — so turning
recording on never switches cameras on for every env. Cameras an environment lists in its
``upside_down_cameras`` attribute (LIBERO renders upside down) are rotated upright.

Which episodes: those with ``episode_index < max_episodes`` (all when ``max_episodes`` is
null). The choice depends only on the work item, so a resume records the same episodes.

Files: ``<run dir>/videos/ep<index:05d>_seed<seed>_<outcome>.mp4`` (H.264, ``yuv420p``, odd
frame sizes padded by one pixel). A name that exists already (a retried episode, a resume) is
never overwritten: the new file gets ``_2``, ``_3``, … A video is written to a hidden
``.partial`` file while the episode runs and renamed when it ends; an episode left unfinished
(abort, kill) leaves no video, only its partial file, which the next recorder of the same
directory deletes.
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from arena.errors import ObservationError
from arena.images import to_uint8

from arena.errors import ArenaError
from arena.extras import import_extra
from arena.outputs.layout import VIDEOS_DIR, episode_file_stem, partial_path, remove_partials, unique_path

_WHAT = "recording episode videos"
_PARTIAL_SUFFIX = ".partial.mp4"


class VideoError(ArenaError):
    """A frame could not be rendered or encoded (the episode itself is unaffected)."""


class VideoWriter:
    """Encode ``uint8 (H, W, 3)`` RGB frames into an H.264 MP4 file at ``fps`` frames per second.

    The stream is opened on the first frame (its size fixes the video's size; later frames of
    another size are resized by FFmpeg's scaler). Odd sizes are padded to even ones, which
    ``yuv420p`` needs. Use :meth:`add` then :meth:`close`.

    Raises:
        VideoError: a frame is not ``uint8 (H, W, 3)``, or encoding failed.
    """

    codec = "libx264"

    def __init__(self, path: str | os.PathLike[str], fps: int) -> None:
        self.path = Path(path)
        self.fps = int(fps)
        self.frames = 0
        self._container: Any = None
        self._stream: Any = None
        self._size: tuple[int, int] | None = None

    def add(self, frame: np.ndarray) -> None:
        av = import_extra("av", "video", _WHAT)

        frame = np.asarray(frame)
        if frame.ndim != 3 or frame.shape[2] != 3:
            raise VideoError(f"a video frame must be (H, W, 3), got shape {frame.shape}")
        try:
            frame = to_uint8(frame, "video frame")
        except ObservationError as exc:
            raise VideoError(str(exc)) from None
        height, width = frame.shape[:2]
        if self._container is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._size = (width + width % 2, height + height % 2)
            try:
                self._container = av.open(str(self.path), mode="w", format="mp4")
                self._stream = self._container.add_stream(self.codec, rate=self.fps)
                self._stream.width, self._stream.height = self._size
                self._stream.pix_fmt = "yuv420p"
            except Exception as exc:
                raise VideoError(f"cannot open {self.path} for writing: {exc}") from exc
        if (width, height) != self._size:
            padded = np.zeros((self._size[1], self._size[0], 3), np.uint8)
            h, w = min(height, self._size[1]), min(width, self._size[0])
            padded[:h, :w] = frame[:h, :w]
            frame = padded
        video_frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
        for packet in self._stream.encode(video_frame):
            self._container.mux(packet)
        self.frames += 1

    def close(self) -> None:
        """Flush the encoder and close the file. Idempotent."""
        if self._container is None:
            return
        try:
            for packet in self._stream.encode():
                self._container.mux(packet)
        finally:
            self._container.close()
            self._container = None


class EpisodeRecorder:
    """Videos of the recorded episodes of one rollout (see the module docstring).

    ``config`` is a :class:`arena.config.models.RecordingConfig`; ``work_dir`` the directory
    whose ``videos/`` receives the files; ``relative_to`` the directory record paths are
    relative to (the run directory, above a shard's directory). The rollout calls
    :meth:`begin` after an env is reset, :meth:`capture` after every step and :meth:`end`
    when an episode ends. Rendering or encoding problems are reported once on stderr and
    the episode goes on without its video.
    """

    def __init__(self, config: Any, work_dir: str | os.PathLike[str], relative_to: str | os.PathLike[str] | None = None) -> None:
        self.config = config
        self.directory = Path(work_dir) / VIDEOS_DIR
        self.relative_to = Path(relative_to) if relative_to is not None else Path(work_dir)
        self._writers: dict[int, tuple[Any, VideoWriter]] = {}
        self._warned = False
        self._render_takes_camera: bool | None = None
        if config.enabled:
            import_extra("av", "video", _WHAT)  # fail before the first episode, not at its end
        remove_partials(self.directory, _PARTIAL_SUFFIX)

    def wants(self, item: Any) -> bool:
        """Whether work item ``item`` is recorded."""
        limit = self.config.max_episodes
        return bool(self.config.enabled) and (limit is None or item.episode_index < limit)

    def begin(self, env: Any, env_id: int, item: Any, observation: Any) -> None:
        """Start the video of ``item`` on ``env_id`` with the frame after its reset."""
        self.discard(env_id)
        if not self.wants(item):
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = partial_path(self.directory, item.episode_index, _PARTIAL_SUFFIX)
        self._writers[env_id] = (item, VideoWriter(partial, self.config.fps))
        self._add(env, env_id, observation)

    def capture(self, env: Any, env_ids: Any, observation: Any) -> None:
        """Add the current frame of each of ``env_ids`` that is being recorded."""
        for env_id in env_ids:
            if env_id in self._writers:
                self._add(env, env_id, observation)

    def end(self, env_id: int, outcome: str) -> str | None:
        """Finish ``env_id``'s video; return its path relative to ``relative_to``, or ``None``."""
        entry = self._writers.pop(env_id, None)
        if entry is None:
            return None
        item, writer = entry
        try:
            writer.close()
        except Exception as exc:
            self._warn(f"could not finish the video of episode {item.episode_index}: {exc}")
            writer.path.unlink(missing_ok=True)
            return None
        if writer.frames == 0 or not writer.path.exists():
            writer.path.unlink(missing_ok=True)
            return None
        final = unique_path(self.directory, episode_file_stem(item.episode_index, item.seed, outcome), ".mp4")
        os.replace(writer.path, final)
        return os.path.relpath(final, self.relative_to)

    def discard(self, env_id: int) -> None:
        """Drop ``env_id``'s unfinished video, if any."""
        entry = self._writers.pop(env_id, None)
        if entry is not None:
            try:
                entry[1].close()
            except Exception:
                pass
            entry[1].path.unlink(missing_ok=True)

    def close(self) -> None:
        """Drop every unfinished video (episodes left without a record get no video)."""
        for env_id in list(self._writers):
            self.discard(env_id)

    # -- frames ----------------------------------------------------------------------------
    def _add(self, env: Any, env_id: int, observation: Any) -> None:
        entry = self._writers.get(env_id)
        if entry is None:
            return
        try:
            entry[1].add(self._frame(env, env_id, observation))
        except Exception as exc:
            self._warn(f"no video for episode {entry[0].episode_index}: {type(exc).__name__}: {exc}")
            self.discard(env_id)

    def _frame(self, env: Any, env_id: int, observation: Any) -> np.ndarray:
        camera = self.config.camera
        if camera:
            cams = observation.get("camera_obs") if isinstance(observation, dict) else None
            if isinstance(cams, dict) and camera in cams:
                frame = np.asarray(cams[camera][env_id])
                # A simulator that renders a camera upside down (LIBERO) says so; videos are upright.
                return frame[::-1, ::-1] if camera in getattr(env, "upside_down_cameras", ()) else frame
            if self._render_takes_camera is None:
                try:
                    self._render_takes_camera = "camera" in inspect.signature(env.render).parameters
                except (TypeError, ValueError):
                    self._render_takes_camera = False
            if self._render_takes_camera:
                return np.asarray(env.render(env_id, camera=camera))
        return np.asarray(env.render(env_id))

    def _warn(self, text: str) -> None:
        if not self._warned:
            self._warned = True
            print(f"arena: recording: {text} (further video problems of this run are not shown)", file=sys.stderr)

