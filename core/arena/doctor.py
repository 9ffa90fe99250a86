"""``arena doctor``: is this machine ready to run experiments? Each failed check says how to fix it.

Checks: the Python version; versions of arena-core and the packages it runs on (the built-in
simulators' and video's are extras: missing ones are ``info`` with the ``pip install``);
plugins (loaded and broken, with their errors); headless rendering (MuJoCo's OpenGL platform,
EGL or OSMesa, and who chose it; one Meta-World frame rendered in a child process, so a
crashing OpenGL driver cannot take arena down); video encoding (PyAV); the benchmark venvs
that registered environments run in (``default_venv``: created? the same arena-core? what the
environment checks there, ``venv_checks``: e.g. ManiSkill's Vulkan device);
``sbatch`` / ``osmo`` on ``PATH`` (needed only by those backends); free TCP ports on
127.0.0.1 (an ephemeral one, and the policy servers' usual defaults).

Status per check: ``ok``, ``info`` (nothing to do), ``warn`` (works, with a caveat) and
``fail`` (``arena doctor`` then exits 1).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from arena.checks import Check

#: Packages arena-core runs on: (distribution, why, the extra that installs it or None).
PACKAGES = (
    ("numpy", "arrays on the wire and in the simulators", None),
    ("pydantic", "configs", None),
    ("pluggy", "plugins", None),
    ("websockets", "policy client and server", None),
    ("msgpack", "wire format", None),
    ("gymnasium", "action spaces", None),
    ("jinja2", "the HTML report", None),
    ("rich", "terminal output", None),
    ("mujoco", "physics and rendering of the built-in simulators", "sim"),
    ("metaworld", "the metaworld environment", "metaworld"),
    ("gymnasium-robotics", "the franka_kitchen environment", "kitchen"),
    ("av", "episode videos", "video"),
)
#: Ports policy servers listen on by default (openpi/Cosmos 8000, GR00T 5555, DreamZero 5000).
DEFAULT_SERVER_PORTS = (8000, 5555, 5000)
RENDER_TIMEOUT_S = 120.0


def check_python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info < (3, 11):
        return Check("python", "fail", f"Python {version} at {sys.executable}", "use Python 3.11 or newer")
    return Check("python", "ok", f"Python {version} at {sys.executable}")


def check_packages() -> list[Check]:
    checks = []
    try:
        core = metadata.version("arena-core")
        checks.append(Check("arena-core", "ok", core))
    except metadata.PackageNotFoundError:
        checks.append(Check("arena-core", "fail", "not installed as a distribution", "pip install -e . (from the arena checkout)"))
    for dist, why, extra in PACKAGES:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            if extra is None:
                checks.append(Check(f"package {dist}", "fail", f"missing ({why})", f"pip install '{dist}'"))
            else:
                checks.append(
                    Check(f"package {dist}", "info", f"not installed: needed only for {why}", f"pip install 'arena-core[{extra}]'")
                )
            continue
        check = Check(f"package {dist}", "ok", version)
        if dist == "numpy" and int(version.split(".")[0]) >= 2:
            try:
                metadata.version("openpi-client")
                check = Check(
                    "package numpy", "warn", f"{version}, but openpi-client pins numpy<2", "pip install 'numpy<2'"
                )
            except metadata.PackageNotFoundError:
                pass
        checks.append(check)
    return checks


def check_plugins() -> list[Check]:
    from arena.plugins import get_plugin_manager

    manager = get_plugin_manager()
    try:
        registry = manager.describe()  # imports every plugin's code: a broken one shows here
    except Exception as exc:
        return [Check("plugins", "fail", f"{type(exc).__name__}: {exc}", "uninstall or fix the plugin named above")]
    plugins = [i for i in manager.infos.values() if not i.builtin]
    names = ", ".join(f"{i.name} {i.version or ''}".strip() for i in plugins) or "none besides the built-ins"
    checks = [
        Check(
            "plugins",
            "ok",
            f"{names}; {_count(len(registry.policies), 'policy', 'policies')}, "
            f"{_count(len(registry.environments), 'environment')}, "
            f"{_count(len(registry.launch_backends), 'launch backend')}",
        )
    ]
    for broken in manager.broken:
        checks.append(
            Check(
                f"plugin {broken.name}",
                "fail",
                f"failed to load ({broken.distribution}): {broken.error}",
                f"reinstall or upgrade {broken.distribution or broken.name} (pip install -U ...), or uninstall it; "
                "`arena plugins` shows its traceback",
            )
        )
    return checks


_RENDER_SNIPPET = """
import numpy as np
from arena.envs.metaworld import MetaWorldConfig, MetaWorldEnvironment
env = MetaWorldEnvironment(MetaWorldConfig(task="reach-v3", image_size=64), num_envs=1)
env.reset_envs([0], [0])
frame = env.render(0)
env.close()
assert frame.shape == (64, 64, 3) and frame.dtype == np.uint8, frame.shape
print("frame", frame.shape, int(frame.std() > 0))
"""


def check_rendering(timeout_s: float = RENDER_TIMEOUT_S) -> Check:
    from arena.rendering import configure_headless_rendering, rendering_info

    configure_headless_rendering()
    info = rendering_info()
    gl = info["mujoco_gl"] or "unset (MuJoCo's default)"
    if info["chosen_by"] == "user":
        gl += " (set by you)"
    elif info["chosen_by"] == "arena":
        gl += f" (chosen by arena: {info['reason']})"
    try:
        metadata.version("metaworld")
    except metadata.PackageNotFoundError:
        return Check("headless rendering", "info", f"MUJOCO_GL={gl}; not tried: Meta-World is not installed",
                     "pip install 'arena-core[metaworld]'")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _RENDER_SNIPPET], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return Check("headless rendering", "fail", f"MUJOCO_GL={gl}: no frame after {timeout_s:g} s", _render_fix())
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Check("headless rendering", "fail", f"MUJOCO_GL={gl}: {last}", _render_fix())
    blank = done.stdout.strip().endswith(" 0")
    if blank:
        return Check("headless rendering", "warn", f"MUJOCO_GL={gl}: the frame is blank", _render_fix())
    return Check("headless rendering", "ok", f"MUJOCO_GL={gl}: rendered a 64x64 Meta-World frame")


def check_venvs() -> list[Check]:
    """Where benchmark venvs are looked for (``info``: the directory and why,
    :func:`arena.venvs.venvs_location`), then one check per venv a registered environment
    or servable model declares (:attr:`arena.envs.base.Environment.default_venv`, :func:`arena.venvs.declared_venvs`):
    ``info`` when it was never created (needed only for that environment), ``warn`` when it is
    incomplete or holds another arena-core than this interpreter, else ``ok`` with its
    interpreter and Python version. The fix is ``arena venv setup NAME``."""
    from arena.plugins import get_plugin_manager
    from arena.venvs import STAMP_NAME, VenvError, declared_venvs, venv_dir, venv_python, venvs_location

    try:
        registry = get_plugin_manager().registry
        environments, servers = registry.environments, getattr(registry, "servers", {})
    except Exception:  # noqa: BLE001 - check_plugins reports a broken plugin manager
        return []
    root, why = venvs_location()
    checks = [Check("benchmark venvs", "info", f"looked in {root} ({why})")]
    try:
        declared = declared_venvs(environments, servers)
    except VenvError as exc:
        return [*checks, Check("benchmark venvs", "fail", str(exc), "fix the plugin's default_venv declarations")]
    for venv, (spec, envs) in declared.items():
        name, fix = f"venv {venv}", spec.setup_command
        python = venv_python(venv)
        if not python.exists():
            checks.append(Check(name, "info", f"not created ({venv_dir(venv)}): needed only for {_users(envs)}", fix))
            continue
        if not (venv_dir(venv) / STAMP_NAME).exists():
            checks.append(Check(name, "warn", f"{venv_dir(venv)} is incomplete (its set-up did not finish)", fix))
            continue
        probe = _venv_versions(python)
        if probe is None:
            checks.append(Check(name, "warn", f"{python} does not run", fix))
            continue
        py_version, core_version = probe
        from arena import __version__ as here

        if core_version != here:
            checks.append(Check(name, "warn", f"{python}: arena-core {core_version or 'missing'}, this interpreter has {here}", fix))
            continue
        checks.append(Check(name, "ok", f"Python {py_version} at {python}, arena-core {core_version}"))
        checks.extend(_environment_checks(environments, envs, python))
    return checks


def _environment_checks(environments: dict, names: list[str], python: Path) -> list[Check]:
    """What the environments running in a venv check there: each class's
    :meth:`arena.envs.base.Environment.venv_checks` (e.g. ManiSkill's Vulkan device, which only
    the venv's SAPIEN can probe; none by default); a check that raises is a ``fail`` naming the
    error."""
    from arena.envs.base import Environment

    checks: list[Check] = []
    for env_name in names:
        env_cls = environments.get(env_name)
        if not (isinstance(env_cls, type) and issubclass(env_cls, Environment)):
            continue  # not an Environment: it has no such contract
        try:
            checks.extend(env_cls.venv_checks(python))
        except Exception as exc:  # noqa: BLE001 - a broken check is reported, never raised
            checks.append(Check(f"{env_name} in its venv", "fail", f"{type(exc).__name__}: {exc}", "fix the plugin's venv_checks"))
    return checks


def _users(users: list[str]) -> str:
    """What needs a venv, in words: ``the pusht environment``, ``arena serve lerobot``."""
    envs = [u for u in users if not u.startswith("arena serve ")]
    words = [f"the {', '.join(envs)} environment"] if envs else []
    return " and ".join(words + [u for u in users if u.startswith("arena serve ")])


def _venv_versions(python: Path) -> tuple[str, str | None] | None:
    """(Python version, arena-core version or None) of a venv's interpreter; None if it fails."""
    code = (
        "import sys, importlib.metadata as m\n"
        "try: core = m.version('arena-core')\n"
        "except m.PackageNotFoundError: core = ''\n"
        "print(sys.version.split()[0], core)"
    )
    try:
        done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    fields = done.stdout.split()
    if done.returncode != 0 or not fields:
        return None
    return fields[0], (fields[1] if len(fields) > 1 else None)


def _render_fix() -> str:
    return (
        "CPU: install OSMesa (apt-get install libosmesa6) and set MUJOCO_GL=osmesa PYOPENGL_PLATFORM=osmesa; "
        "GPU node: arena uses EGL when it finds /dev/nvidiactl and libEGL_nvidia; if EGL fails, "
        "set MUJOCO_GL=osmesa (or fix the driver's EGL libraries)"
    )


def check_video() -> Check:
    try:
        metadata.version("av")
    except metadata.PackageNotFoundError:
        return Check("video encoding", "info", "PyAV is not installed: needed only for recording",
                     "pip install 'arena-core[video]'")
    try:
        import numpy as np

        from arena.rollout.recording import VideoWriter

        with tempfile.TemporaryDirectory() as tmp:
            writer = VideoWriter(Path(tmp) / "probe.mp4", fps=10)
            for value in (0, 255):
                writer.add(np.full((16, 16, 3), value, np.uint8))
            writer.close()
            size = (Path(tmp) / "probe.mp4").stat().st_size
    except Exception as exc:
        return Check("video encoding", "fail", f"{type(exc).__name__}: {exc}", "pip install 'arena-core[video]'  (PyAV bundles FFmpeg with H.264)")
    return Check("video encoding", "ok", f"H.264 MP4 via PyAV ({size} bytes for 2 frames)")


def _count(n: int, singular: str, plural: str | None = None) -> str:
    """``1 launch backend``, ``2 launch backends``."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def check_tools() -> list[Check]:
    checks = []
    where = {
        "slurm": "run on a Slurm login node, or add sbatch to PATH",
        "osmo": "install the OSMO CLI and `osmo login` to your OSMO service, or add osmo to PATH",
    }
    for tool, backend in (("sbatch", "slurm"), ("osmo", "osmo")):
        path = shutil.which(tool)
        if path:
            checks.append(Check(f"{tool} on PATH", "ok", path))
        else:
            checks.append(
                Check(
                    f"{tool} on PATH",
                    "info",
                    f"not found: needed only for --backend {backend}",
                    where[backend],
                )
            )
    uv = shutil.which("uv")  # what `uv run` servers need on this machine (vla-eval's scripts and configs, openpi)
    checks.append(
        Check("uv on PATH", "ok", uv)
        if uv
        else Check(
            "uv on PATH",
            "info",
            "not found: needed only by managed servers started with `uv run` (vla-eval model-server scripts and "
            "configs, openpi's server); `arena validate` names the runs",
            "install uv (https://docs.astral.sh/uv/) or put it on PATH",
        )
    )
    return checks


def check_ports(host: str = "127.0.0.1") -> list[Check]:
    checks = []
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = sock.getsockname()[1]
        checks.append(Check("free ports", "ok", f"{host} can bind (e.g. ephemeral port {port}); the local backend picks free ports"))
    except OSError as exc:
        checks.append(Check("free ports", "fail", f"cannot bind {host}: {exc}", "check the loopback interface and local firewall rules"))
        return checks
    busy = []
    for port in DEFAULT_SERVER_PORTS:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                busy.append(port)
    if busy:
        checks.append(
            Check(
                "default server ports",
                "warn",
                f"in use on {host}: {', '.join(map(str, busy))}",
                "stop what listens there, or give `arena serve --port` another port (the local backend is unaffected)",
            )
        )
    else:
        checks.append(Check("default server ports", "ok", f"free on {host}: {', '.join(map(str, DEFAULT_SERVER_PORTS))}"))
    return checks


def run_checks(*, render: bool = True) -> list[Check]:
    """All checks, in the order shown by ``arena doctor``."""
    checks = [check_python(), *check_packages(), *check_plugins()]
    if render:
        checks.append(check_rendering())
    checks.append(check_video())
    checks.extend(check_venvs())
    checks.extend(check_tools())
    checks.extend(check_ports())
    return checks
