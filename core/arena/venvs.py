"""Benchmark virtual environments: how an environment declares one, where they live, how
``arena venv setup`` creates them.

Benchmarks pin Python and MuJoCo versions that do not agree with each other or with
arena-core's built-in simulators (LIBERO, ALOHA, Isaac Lab on Python 3.12), so a plugin runs
its environment's workers under the interpreter of the benchmark's own venv (the environment
config's ``python`` key, or the venv the class declares). Such a venv holds arena-core
(without the built-in simulators' extras), the plugin itself and the benchmark.

**Declaring.** An environment class declares its venv as data, ``default_venv = VenvSpec(...)``
(:class:`VenvSpec`: name, Python version, the installed distributions and pip requirements,
extra pip steps, set-up options). A servable model whose stack conflicts with arena's (LeRobot's
torch pin) declares one the same way: the factory registered with ``arena_register_servers``
carries ``default_venv``, and the server task that runs it names the venv
(:attr:`arena.servertask.ServerTask.venv`), whose interpreter then fills ``{python}`` of its
``local_command``. Everything else reads the declarations (:func:`declared_venvs`): ``arena
venv setup [NAME...]`` (core's one set-up command, and the ``arena NAME setup`` alias of each,
:mod:`arena.venvcli`), the worker plan (:mod:`arena.envs.workers.layout`), the launch backends'
``{python}``, ``arena doctor`` and the tests' lookup (:func:`arena.testing.venvs.benchmark_python`).

**Location** (:func:`venvs_location`): ``$ARENA_VENVS/<name>`` when set; else, when arena runs
from the ``.venv`` of an arena checkout (the interpreter's ``sys.prefix`` is ``<dir>/.venv`` and
``<dir>/pyproject.toml`` is arena-core's), the checkout's ``.venvs/<name>``, where ``make
test`` (``scripts/setup-env.sh test``) builds them; else ``${XDG_DATA_HOME:-~/.local/share}/
arena/venvs/<name>``.

:func:`ensure_venv` creates or updates one and is cheap when nothing changed: it writes a stamp
(``.arena-stamp``: the base interpreter, the install arguments and the ``pyproject.toml`` of
every source directory installed from) and does nothing while the stamp matches;
:func:`setup_venv` adds the declaration's interpreter choice and extra steps.

arena-core and the plugin are installed the way they are installed in the running
interpreter: an editable install (pip records its source directory in the distribution's
``direct_url.json``, PEP 610) as editable from the same directory, an install from a local
directory or URL from there, anything else as ``NAME==VERSION`` from the package index.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field, field_validator

from arena.errors import ArenaError

VENVS_ENV = "ARENA_VENVS"
STAMP_NAME = ".arena-stamp"
CORE_DISTRIBUTION = "arena-core"
#: Where ``make test`` builds the benchmark venvs, relative to the checkout.
CHECKOUT_VENVS = ".venvs"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class VenvError(ArenaError):
    """A benchmark venv could not be created or updated (the message names the command)."""


class NoPythonError(VenvError):
    """No interpreter satisfies a venv's Python requirement (``--if-possible`` skips it)."""


class PipStep(BaseModel):
    """One more ``pip install`` in the venv after its main install.

    ``args``: the ``pip install`` arguments, e.g. ``["--no-deps", "isaaclab==3.0.0"]``.
    ``unless_installed``: a requirement; the step is skipped while the venv has a distribution
    that satisfies it (checked on every set-up). ``option`` / ``unless_option``: a set-up
    option (:attr:`VenvSpec.options`) that must be given / must not be given for it to run.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    args: tuple[str, ...] = Field(min_length=1)
    unless_installed: str | None = None
    option: str | None = None
    unless_option: str | None = None

    @field_validator("unless_installed")
    @classmethod
    def _requirement(cls, value: str | None) -> str | None:
        if value is not None:
            _requirement(value)
        return value


class VenvSpec(BaseModel):
    """A benchmark venv, as an environment class declares it (``default_venv = VenvSpec(...)``).

    - ``name``: the venv's directory under :func:`venvs_root` (letters, digits, ``_.-``);
    - ``summary``: what it holds and its size, for ``--help`` and ``arena doctor``;
    - ``python``: a PEP 440 specifier the base interpreter's version must satisfy (e.g.
      ``">=3.11,<3.13"``, ``"==3.12.*"``; empty: any), see :func:`find_python`;
    - ``distributions``: distributions installed in arena's interpreter to install the same way
      (:func:`install_args`; editable stays editable), optionally with extras
      (``"arena-plugin-isaaclab[sim]"``); arena-core is always installed, without extras;
    - ``requirements``: pip requirement strings from the package index, with any pins the
      benchmark needs (``"gym-aloha==0.1.5"``, ``"torch==2.13.0"``, ``"numpy<2"``);
    - ``steps``: further ``pip install`` runs (:class:`PipStep`), e.g. one package ``--no-deps``;
    - ``options``: set-up options ``{name: help}`` that steps may depend on (``arena venv setup
      NAME --with NAME``, ``arena NAME setup --NAME``).

    Raises:
        pydantic.ValidationError: a bad name, specifier or requirement, or a step naming an
            undeclared option.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    summary: str = ""
    python: str = ""
    distributions: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    steps: tuple[PipStep, ...] = ()
    options: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"invalid venv name {value!r}: use letters, digits, '_', '.' and '-'")
        return value

    @field_validator("python")
    @classmethod
    def _python(cls, value: str) -> str:
        try:
            SpecifierSet(value)
        except InvalidSpecifier:
            raise ValueError(f"python must be a version specifier such as '>=3.11,<3.13'; got {value!r}") from None
        return value

    @field_validator("distributions", "requirements")
    @classmethod
    def _requirements(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            _requirement(text)
        return value

    def model_post_init(self, __context: Any) -> None:
        for step in self.steps:
            for option in (step.option, step.unless_option):
                if option is not None and option not in self.options:
                    raise ValueError(f"venv {self.name}: a step names the option {option!r}, which `options` does not declare")

    def accepts(self, version: str) -> bool:
        """Whether a Python ``X.Y.Z`` satisfies :attr:`python`."""
        return SpecifierSet(self.python).contains(version, prereleases=True)

    @property
    def python_env(self) -> str:
        """The environment variable naming a base interpreter for this venv:
        ``ARENA_<NAME>_PYTHON`` (e.g. ``ARENA_ISAACLAB_PYTHON``)."""
        return "ARENA_" + re.sub(r"[^A-Za-z0-9]", "_", self.name).upper() + "_PYTHON"

    @property
    def setup_command(self) -> str:
        """The command that creates it: ``arena venv setup NAME``."""
        return f"arena venv setup {self.name}"


def _requirement(text: str) -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        raise ValueError(f"not a pip requirement: {text!r} ({exc})") from None


def declared_venv(env_cls: Any) -> VenvSpec | None:
    """The venv an environment class (or a servable model's factory) declares (its
    ``default_venv``), or ``None``.

    Raises:
        VenvError: ``default_venv`` is set to something other than a :class:`VenvSpec`.
    """
    spec = getattr(env_cls, "default_venv", None)
    if spec is None or isinstance(spec, VenvSpec):
        return spec
    name = getattr(env_cls, "__qualname__", repr(env_cls))
    raise VenvError(f"{name}.default_venv must be an arena.venvs.VenvSpec (or None); got {type(spec).__name__} {spec!r}")


def declared_venvs(
    environments: dict[str, Any] | None = None, servers: dict[str, Any] | None = None
) -> dict[str, tuple[VenvSpec, list[str]]]:
    """``{venv name: (its declaration, what uses it)}``, sorted by name.

    ``environments``: ``{name: class}``, by default every registered environment; ``servers``:
    ``{name: model factory}``, by default every registered servable model (``arena_register_servers``)
    when ``environments`` is not given either, else none. What uses a venv is listed as the
    environment's name, or ``arena serve NAME`` for a servable model.

    Raises:
        VenvError: a ``default_venv`` is not a :class:`VenvSpec`, or two declarations give
            different venvs one name.
    """
    if environments is None:
        from arena.plugins import get_plugin_manager

        registry = get_plugin_manager().registry
        environments = registry.environments
        if servers is None:
            servers = registry.servers
    users = {**environments, **{f"arena serve {name}": factory for name, factory in (servers or {}).items()}}
    found: dict[str, tuple[VenvSpec, list[str]]] = {}
    for user, declarer in users.items():
        spec = declared_venv(declarer)
        if spec is None:
            continue
        if spec.name in found and found[spec.name][0] != spec:
            other = ", ".join(found[spec.name][1])
            raise VenvError(f"{other} and {user} declare different venvs named {spec.name!r}")
        found.setdefault(spec.name, (spec, []))[1].append(user)
    return dict(sorted(found.items()))


def venvs_location() -> tuple[Path, str]:
    """The directory holding benchmark venvs and why it is that one (see the module docstring).

    Returns ``(path, reason)``, e.g. ``(Path("/src/arena/.venvs"), "the checkout's .venvs:
    arena runs from /src/arena/.venv")``.
    """
    explicit = os.environ.get(VENVS_ENV)
    if explicit:
        return Path(explicit).expanduser(), f"${VENVS_ENV}"
    checkout = _checkout_of(Path(sys.prefix))
    if checkout is not None:
        return checkout / CHECKOUT_VENVS, f"the checkout's {CHECKOUT_VENVS}: arena runs from {checkout / '.venv'}"
    data = os.environ.get("XDG_DATA_HOME") or "~/.local/share"
    where = "${XDG_DATA_HOME}" if os.environ.get("XDG_DATA_HOME") else "~/.local/share"
    return Path(data).expanduser() / "arena" / "venvs", f"the default ({where}/arena/venvs; ${VENVS_ENV} chooses another)"


def _checkout_of(prefix: Path) -> Path | None:
    """The arena checkout whose ``.venv`` is ``prefix``, or ``None``."""
    if prefix.name != ".venv":
        return None
    pyproject = prefix.parent / "pyproject.toml"
    try:
        import tomllib

        project = tomllib.loads(pyproject.read_text()).get("project") or {}
    except (OSError, ValueError):
        return None
    return prefix.parent if project.get("name") == CORE_DISTRIBUTION else None


def venvs_root() -> Path:
    """The directory holding benchmark venvs (:func:`venvs_location`): ``$ARENA_VENVS``, else
    the checkout's ``.venvs`` when arena runs from a checkout's ``.venv``, else
    ``${XDG_DATA_HOME:-~/.local/share}/arena/venvs``."""
    return venvs_location()[0]


def venv_dir(name: str) -> Path:
    """``venvs_root() / name``.

    Raises:
        ValueError: ``name`` is not a plain name (letters, digits, ``_.-``).
    """
    if not _NAME.match(name):
        raise ValueError(f"invalid venv name {name!r}: use letters, digits, '_', '.' and '-'")
    return venvs_root() / name


def venv_python(name: str) -> Path:
    """The interpreter of venv ``name`` (``<dir>/bin/python``); it may not exist yet."""
    return venv_dir(name) / "bin" / "python"


def install_args(distribution: str) -> list[str]:
    """pip arguments that install ``distribution`` as it is installed in this interpreter.

    ``["-e", DIR]`` for an editable install, ``[DIR]`` or ``[NAME @ URL]`` for one from a local
    directory or a URL, else ``["NAME==VERSION"]``. ``distribution`` may name extras
    (``"NAME[sim]"``): they are added to what is installed (``DIR[sim]``, ``NAME[sim]==VERSION``).

    Raises:
        VenvError: ``distribution`` is not installed here.
    """
    requirement = _requirement(distribution)
    args = _install_args(requirement.name)
    if not requirement.extras:
        return args
    extras = "[" + ",".join(sorted(requirement.extras)) + "]"
    last = args[-1]
    if " @ " in last:
        name, _, url = last.partition(" @ ")
        args[-1] = f"{name}{extras} @ {url}"
    elif "==" in last and not Path(last).exists():
        name, _, version = last.partition("==")
        args[-1] = f"{name}{extras}=={version}"
    else:
        args[-1] = last + extras
    return args


def _install_args(distribution: str) -> list[str]:
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise VenvError(f"{distribution} is not installed in {sys.executable}") from None
    text = dist.read_text("direct_url.json")
    direct = json.loads(text) if text else None
    if isinstance(direct, dict) and isinstance(direct.get("url"), str):
        url = direct["url"]
        parsed = urlparse(url)
        if parsed.scheme == "file":
            path = unquote(parsed.path)
            if (direct.get("dir_info") or {}).get("editable"):
                return ["-e", path]
            if Path(path).is_dir():
                return [path]
        if "vcs_info" in direct or "archive_info" in direct:
            return [f"{dist.metadata['Name']} @ {url}"]
    return [f"{dist.metadata['Name']}=={dist.version}"]


def ensure_venv(
    name: str,
    *,
    python: str | os.PathLike[str] | None = None,
    packages: Sequence[str] = (),
    requirements: Sequence[str] = (),
    quiet: bool = False,
) -> Path:
    """Create or update venv ``name`` and return its interpreter's path.

    The venv gets arena-core (without extras: no built-in simulators), the installed
    distributions ``packages`` (e.g. ``["arena-plugin-libero"]``, each as it is installed here,
    see :func:`install_args`) and the pip requirement strings ``requirements`` (e.g.
    ``["gym-aloha==0.1.5"]``), in one ``pip install``. ``python`` is the base interpreter
    (default: this one); a venv made from another one is made again. Nothing runs when the
    stamp matches; concurrent calls for one name wait for each other (a lock file).

    Raises:
        VenvError: creating the venv or ``pip install`` failed, or a package is not installed.
    """
    target = venv_dir(name)
    base = str(Path(python).expanduser()) if python is not None else sys.executable
    args: list[str] = []
    for distribution in (CORE_DISTRIBUTION, *packages):
        args += install_args(distribution)
    args += list(requirements)
    base_id = _interpreter_id(base)
    stamp = _stamp(base_id, args)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{name}.lock"):
        stamp_path = target / STAMP_NAME
        if stamp_path.exists() and stamp_path.read_text() == stamp and venv_python(name).exists():
            return venv_python(name)
        recorded = _read_stamp(stamp_path)
        if target.exists() and (recorded is None or recorded.get("base") != base_id):
            if not (target / "pyvenv.cfg").exists():
                raise VenvError(f"{target} exists but is not a venv; move it away or set ${VENVS_ENV}")
            shutil.rmtree(target)  # made from another interpreter: make it again
        if not target.exists():
            _run([base, "-m", "venv", str(target)], quiet)
        _run([str(venv_python(name)), "-m", "pip", "install", *(["-q"] if quiet else []), *args], quiet)
        stamp_path.write_text(stamp)
    return venv_python(name)


def _interpreter_id(python: str) -> str:
    """``PATH (X.Y.Z)`` of an interpreter, asked from the interpreter itself."""
    try:
        done = subprocess.run(
            [python, "-c", "import platform; print(platform.python_version())"],
            capture_output=True, text=True, timeout=60, check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise VenvError(f"cannot run the interpreter {python}: {exc}") from None
    return f"{python} ({done.stdout.strip()})"


def _stamp(base_id: str, args: list[str]) -> str:
    """What a venv was made from: the interpreter, the install arguments and the hash of every
    source directory's ``pyproject.toml`` (its dependencies may change under an editable install)."""
    digest = hashlib.sha256()
    for arg in args:
        pyproject = Path(arg) / "pyproject.toml"
        if pyproject.is_file():
            digest.update(pyproject.read_bytes())
    return json.dumps({"base": base_id, "install": args, "sources": digest.hexdigest()[:16]}, indent=1)


def _read_stamp(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def python_version(python: str | os.PathLike[str]) -> str | None:
    """``X.Y.Z`` of interpreter ``python``, or ``None`` when it does not run."""
    try:
        done = subprocess.run(
            [str(python), "-c", "import platform; print(platform.python_version())"],
            capture_output=True, text=True, timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def python_candidates(spec: VenvSpec) -> list[str]:
    """Where :func:`find_python` looks, in order: ``$ARENA_<NAME>_PYTHON``, this interpreter,
    ``python3.X`` on ``PATH`` for the minor versions the spec allows (newest first), pyenv's
    versions (``$PYENV_ROOT`` or ``~/.pyenv``), ``/usr/bin`` and ``/usr/local/bin``."""
    import glob
    import shutil

    minors = [m for m in range(20, 7, -1) if spec.accepts(f"3.{m}.0") or spec.accepts(f"3.{m}.99")]
    candidates = [os.environ.get(spec.python_env) or "", sys.executable]
    candidates += [shutil.which(f"python3.{m}") or "" for m in minors]
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for m in minors:
        candidates += sorted(glob.glob(os.path.join(pyenv_root, "versions", f"3.{m}.*", "bin", f"python3.{m}")), reverse=True)
    candidates += [f"{d}/python3.{m}" for m in minors for d in ("/usr/bin", "/usr/local/bin")]
    return list(dict.fromkeys(c for c in candidates if c))


def find_python(spec: VenvSpec, explicit: str | os.PathLike[str] | None = None) -> str:
    """The base interpreter of venv ``spec``: ``explicit`` (``--python``) when given, else the
    first of :func:`python_candidates` whose version the spec accepts.

    Raises:
        VenvError: ``explicit`` does not run or its version is not accepted.
        NoPythonError: no candidate is accepted (the message names where it looked).
    """
    if explicit is not None:
        base = str(Path(explicit).expanduser())
        version = python_version(base)
        if version is None or not spec.accepts(version):
            raise VenvError(
                f"{base} is {'Python ' + version if version else 'not a working interpreter'}; "
                f"the {spec.name} venv needs Python {spec.python}"
            )
        return base
    candidates = python_candidates(spec)
    for candidate in candidates:
        version = python_version(candidate)
        if version is not None and spec.accepts(version):
            return candidate
    raise NoPythonError(
        f"the {spec.name} venv needs Python {spec.python} and none was found (looked at ${spec.python_env}, "
        f"this interpreter, python3.X on PATH, pyenv's versions, /usr/bin, /usr/local/bin): install one "
        "(e.g. `pyenv install 3.12`) or pass --python"
    )


def setup_venv(
    spec: VenvSpec, *, python: str | os.PathLike[str] | None = None, options: Iterable[str] = (), quiet: bool = False
) -> Path:
    """Create or update the venv ``spec`` declares; return its interpreter's path.

    The base interpreter is :func:`find_python`'s; :func:`ensure_venv` installs arena-core,
    ``distributions`` and ``requirements`` in one ``pip install`` (nothing when its stamp
    matches); then each :class:`PipStep` runs whose options match ``options`` and whose
    ``unless_installed`` is not satisfied yet.

    Raises:
        NoPythonError: no interpreter satisfies ``spec.python`` (and ``python`` is not given).
        VenvError: ``python`` is not accepted, an option is not declared, or an install failed.
    """
    options = set(options)
    unknown = sorted(options - set(spec.options))
    if unknown:
        known = ", ".join(spec.options) or "none"
        raise VenvError(f"the {spec.name} venv has no set-up option {', '.join(unknown)} (options: {known})")
    base = find_python(spec, python)
    interpreter = ensure_venv(
        spec.name, python=base, packages=list(spec.distributions), requirements=list(spec.requirements), quiet=quiet
    )
    for step in spec.steps:
        if (step.option is not None and step.option not in options) or (step.unless_option in options):
            continue
        if step.unless_installed is not None and _satisfied(interpreter, _requirement(step.unless_installed)):
            continue
        _run([str(interpreter), "-m", "pip", "install", *(["-q"] if quiet else []), *step.args], quiet)
    return interpreter


def _satisfied(python: Path, requirement: Requirement) -> bool:
    """Whether ``python``'s environment has a distribution that satisfies ``requirement``."""
    code = f"import importlib.metadata as m\ntry: print(m.version({requirement.name!r}))\nexcept m.PackageNotFoundError: pass"
    try:
        done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return False
    version = done.stdout.strip()
    return bool(version) and requirement.specifier.contains(version, prereleases=True)


def setup_venvs(
    specs: Sequence[VenvSpec],
    *,
    python: str | None = None,
    options: Iterable[str] = (),
    quiet: bool = False,
    if_possible: bool = False,
    say: Any = None,
    jobs: int = 1,
) -> list[tuple[VenvSpec, Path | None, str | None]]:
    """:func:`setup_venv` for each of ``specs``, going on after a failure; ``jobs`` venvs at a
    time (each its own ``pip`` processes sharing pip's cache, whose writes are atomic: on a
    fresh machine most of the time is downloads, which overlap), results in ``specs`` order.

    Returns ``(spec, interpreter, problem)`` per venv: the interpreter and ``None`` when it is
    ready; ``None`` and the reason when it failed, or when ``if_possible`` and no interpreter
    satisfies its Python requirement (then the reason starts with ``skipped:``). ``say(text)``
    gets progress lines: a venv that does not exist yet (also when ``quiet``: the first set-up
    takes minutes) and, unless ``quiet``, how long each took.
    """
    options = list(options)

    def one(spec: VenvSpec) -> tuple[VenvSpec, Path | None, str | None]:
        began = time.monotonic()
        if say is not None and not venv_python(spec.name).exists():
            say(f"{spec.name}: creating {venv_dir(spec.name)}" + (f" ({spec.summary})" if spec.summary else ""))
        try:
            path = setup_venv(spec, python=python, options=options, quiet=quiet)
        except NoPythonError as exc:
            return spec, None, f"skipped: {exc}" if if_possible else str(exc)
        except VenvError as exc:
            return spec, None, str(exc)
        if say is not None and not quiet:
            say(f"{spec.name}: ready in {time.monotonic() - began:.0f} s")
        return spec, path, None

    stamps = {spec.name: _stamp_time(spec.name) for spec in specs}
    if jobs <= 1 or len(specs) <= 1:
        results = [one(spec) for spec in specs]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(one, specs))
    if any(_stamp_time(spec.name) != stamps[spec.name] for spec in specs):
        saved = share_identical_files([venvs_root(), *([Path(sys.prefix)] if sys.prefix != sys.base_prefix else [])])
        if say is not None and saved:
            say(f"identical files of the venvs hard-linked: {saved} saved")
    return results


def _stamp_time(name: str) -> float | None:
    try:
        return (venv_dir(name) / STAMP_NAME).stat().st_mtime
    except OSError:
        return None


def share_identical_files(dirs: Sequence[Path], *, minimum_size: str = "64K") -> str | None:
    """Hard-link files that are byte-identical, have the same name and mode and lie on one
    filesystem across ``dirs`` (the benchmark venvs and arena's own), with util-linux's
    ``hardlink``; return what it saved (e.g. ``"7.01 GiB"``), or ``None`` when ``hardlink`` is
    missing or failed (nothing is lost then but disk space).

    Several venvs install the same large wheels: the LeRobot and Isaac Lab venvs both hold
    torch 2.11's CUDA build with its nvidia libraries (3.9 GB each), arena's ``.venv`` and the
    ManiSkill venv torch 2.13's CPU build. Linked, ``make test``'s venvs measured 20.4 GB → 13.2 GB
    (a clean clone, 2026-12-02). It is safe because pip never rewrites an installed file in place: an upgrade or
    an uninstall removes the file's name, which leaves the other venv's link intact.
    """
    tool = shutil.which("hardlink")
    existing = [str(d) for d in dirs if d.is_dir()]
    if tool is None or not existing:
        return None
    try:
        done = subprocess.run(
            [tool, "--ignore-owner", "--ignore-time", "--respect-name", "--minimum-size", minimum_size, *existing],
            capture_output=True, text=True, timeout=1800,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"^Saved:\s*(.+?)\s*$", done.stdout, re.MULTILINE)
    return found.group(1) if done.returncode == 0 and found else None


def _run(argv: list[str], quiet: bool) -> None:
    if not quiet:
        print(f"arena: {' '.join(argv)}", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(argv, capture_output=quiet, text=True, check=False)
    except OSError as exc:
        raise VenvError(f"cannot run {argv[0]}: {exc}") from None
    if done.returncode != 0:
        tail = "\n".join(((done.stderr or "") + (done.stdout or "")).strip().splitlines()[-20:])
        raise VenvError(f"`{' '.join(argv)}` failed with exit code {done.returncode}" + (f":\n{tail}" if tail else ""))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
