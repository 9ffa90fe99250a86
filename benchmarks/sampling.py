"""What a server costs while a benchmark runs: CPU per process and thread (/proc), GPU (NVML).

:class:`CpuSampler` reads ``utime + stime`` of a process tree and of each of its threads from
``/proc`` at the start and the end of the measured window, so the figures are CPU seconds
spent in the window divided by its wall time (100 % = one core busy). :class:`GpuSampler`
polls NVML's utilization (``pynvml`` when importable, else ``nvidia-smi``) every 100 ms in a
thread; without a GPU it reports nothing.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(path: Path) -> tuple[str, list[str]] | None:
    """(comm, fields after comm) of a /proc stat file, or None when it vanished."""
    try:
        text = path.read_text()
    except OSError:
        return None
    left, right = text.find("("), text.rfind(")")
    return text[left + 1 : right], text[right + 2 :].split()


def _cpu_s(fields: list[str]) -> float:
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        todo += _children(current)
    return pids


class CpuSampler:
    """CPU of a process tree between :meth:`start` and :meth:`stop` (Linux ``/proc``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._begin: dict[tuple[int, int], tuple[str, float]] = {}
        self._t0 = 0.0

    def _threads(self) -> dict[tuple[int, int], tuple[str, float]]:
        found = {}
        for pid in _tree(self.pid):
            for task in Path(f"/proc/{pid}/task").glob("*"):
                parsed = _stat_fields(task / "stat")
                if parsed is not None:
                    found[(pid, int(task.name))] = (parsed[0], _cpu_s(parsed[1]))
        return found

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._begin = self._threads()

    def stop(self) -> dict[str, Any]:
        """``{"cpu_pct": total, "processes": n, "threads": [(name, pct), ...] busiest first}``."""
        wall = max(time.perf_counter() - self._t0, 1e-9)
        end = self._threads()
        threads = []
        for key, (name, cpu) in end.items():
            before = self._begin.get(key, (name, 0.0))[1]
            threads.append((name, 100.0 * (cpu - before) / wall))
        threads.sort(key=lambda item: -item[1])
        return {
            "cpu_pct": sum(pct for _, pct in threads),
            "processes": len({pid for pid, _ in end}),
            "threads": [(name, round(pct, 1)) for name, pct in threads if pct >= 1.0][:6],
        }


class GpuSampler:
    """Mean GPU utilization (%) of GPU ``index`` while running; ``None`` without a GPU."""

    def __init__(self, index: int = 0, period_s: float = 0.1) -> None:
        self.index = index
        self.period_s = period_s
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._read = self._reader()

    def _reader(self) -> Any:
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            return lambda: float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except Exception:  # noqa: BLE001 - no pynvml or no driver: try nvidia-smi
            pass
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return None
        query = [smi, f"--id={self.index}", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]

        def read() -> float | None:
            try:
                out = subprocess.run(query, capture_output=True, text=True, timeout=5).stdout
                return float(out.strip().splitlines()[0])
            except Exception:  # noqa: BLE001
                return None

        return read if read() is not None else None

    @property
    def available(self) -> bool:
        return self._read is not None

    def start(self) -> None:
        if self._read is None:
            return
        self._samples = []
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(self.period_s):
                value = self._read()
                if value is not None:
                    self._samples.append(value)

        self._thread = threading.Thread(target=loop, name="gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> float | None:
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join(5)
        self._thread = None
        return statistics.fmean(self._samples) if self._samples else None
