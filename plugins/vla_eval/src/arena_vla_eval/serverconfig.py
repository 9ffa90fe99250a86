"""vla-eval's model-server YAMLs (``policy.server_config``) as shipped, run from any directory.

vla-eval 0.8.0 reads such a file with ``vla_eval/cli/config_loader.py`` ``load_config``
(l.11-40: ``extends:`` names a base YAML relative to the file, merged under it) and
``cmd_serve`` (``cli/main.py`` l.290-317) resolves its ``script:`` against the **current
directory** (``Path(config["script"]).resolve()``, l.300), then runs ``uv run SCRIPT
--port/--host=... --args.KEY=VALUE ... --address HOST:PORT`` (``_build_serve_cmd``,
l.255-290; ``port`` and ``host`` of ``args:`` are server-level keys, l.241). The configs it
ships (``configs/model_servers/...``) name their script relative to the checkout's root
(``script: "src/vla_eval/model_servers/lerobot.py"``), so they run only from that root.

arena resolves ``script:`` the way a user expects of a file they point at: as written when
absolute; else against the directory the file is in and each directory above it (the
checkout's root is found from the config, wherever arena runs), then the current directory
(vla-eval's own rule). It then builds ``cmd_serve``'s command itself with the script's
absolute path, so the server starts in any working directory; the address is arena's
(``args.port`` / ``args.host`` are dropped: ``--address`` sets them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from arena.errors import ConfigError

__all__ = ["ServerConfig", "load_server_config", "stringify"]

#: ``_SERVER_LEVEL_KEYS`` of vla-eval's ``cli/main.py`` (l.241): ``--KEY`` rather than ``--args.KEY``.
SERVER_LEVEL_KEYS = ("port", "host")


@dataclass(frozen=True)
class ServerConfig:
    """A model-server YAML, read: its absolute ``path``, the ``script`` it resolves to and
    the server class's ``args`` (``extends`` merged, ``port``/``host`` removed)."""

    path: Path
    script: Path
    args: dict[str, Any]

    def checkpoint(self, overrides: dict[str, Any] | None = None) -> str | None:
        """The model the server loads: ``args.checkpoint`` (or ``model_path``), after ``overrides``."""
        args = {**self.args, **(overrides or {})}
        value = args.get("checkpoint") or args.get("model_path")
        return None if value is None else str(value)


def _merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """OmegaConf.merge of two mappings as vla-eval uses it: the child's keys win, maps merge."""
    out = dict(base)
    for key, value in child.items():
        out[key] = _merge(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def _read(path: Path, seen: tuple[Path, ...], key: str) -> dict[str, Any]:
    if path in seen:
        raise ConfigError(f"vla-eval server config {path} extends itself ({' -> '.join(map(str, seen))})", key=key)
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"vla-eval server config {path} does not exist", key=key) from None
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"vla-eval server config {path} cannot be read: {exc}", key=key) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"vla-eval server config {path} is not a mapping", key=key)
    extends = raw.pop("extends", None)
    if extends is None:
        return raw
    return _merge(_read((path.parent / str(extends)).resolve(), (*seen, path), key), raw)


def _find_script(script: str, config_path: Path, key: str) -> Path:
    given = Path(script).expanduser()
    if given.is_absolute():
        candidates = [given]
    else:
        candidates = [d / given for d in (config_path.parent, *config_path.parent.parents)] + [Path.cwd() / given]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise ConfigError(
        f"the script {script!r} of vla-eval server config {config_path} is not found: looked in {config_path.parent} "
        "and each directory above it, and the current directory (point server_config at the file inside a "
        "vla-evaluation-harness checkout, or set an absolute script:)",
        key=key,
    )


def load_server_config(path: str | Path, key: str = "policy.server_config") -> ServerConfig:
    """Read ``path`` (relative paths: against the current directory) and resolve its ``script``.

    Raises:
        ConfigError: the file (or a file it ``extends``) is missing or not YAML, it has no
            ``script:``, or the script is not found (the message names where arena looked).
    """
    config_path = Path(path).expanduser().resolve()
    data = _read(config_path, (), key)
    script = data.get("script")
    if not isinstance(script, str) or not script:
        raise ConfigError(f"vla-eval server config {config_path} has no script: (the model-server script to run)", key=key)
    args = dict(data.get("args") or {})
    for name in SERVER_LEVEL_KEYS:
        args.pop(name, None)
    return ServerConfig(path=config_path, script=_find_script(script, config_path, key), args=args)


def stringify(value: Any) -> str:
    """One argv value exactly as vla-eval's ``_stringify_arg`` writes it (``cli/main.py``
    l.244-252: lists and maps as JSON, ``None`` as ``null``, the rest through ``str``)."""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    if value is None:
        return "null"
    return str(value)
