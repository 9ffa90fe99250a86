"""The experiment's ``requires``: distributions (plugins) it needs, with version specifiers.

Checked before any run is resolved, so a missing plugin is reported by name and with the
command that installs it, rather than as an unknown policy or environment type.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from arena.distributions import install_hint
from arena.errors import ConfigError, short_repr

if TYPE_CHECKING:
    from arena.plugins import PluginManager


def normalize_requires(requires: Any, *, source: str | None = None) -> dict[str, str]:
    """``requires`` as ``{distribution: specifier}`` (``""`` = any version; ``null`` is ``""``).

    Raises:
        ConfigError: not a mapping, a non-string name, or an invalid specifier.
    """
    if requires is None:
        return {}
    if not isinstance(requires, Mapping):
        raise ConfigError(
            f"expected a mapping of distribution to version specifier, e.g. "
            f"{{arena-plugin-openpi: '>=0.1'}}; got {type(requires).__name__}",
            file=source,
            key="requires",
        )
    out: dict[str, str] = {}
    for dist, spec in requires.items():
        if not isinstance(dist, str) or not dist.strip():
            raise ConfigError(f"distribution names are strings; got {short_repr(dist)}", file=source, key="requires")
        if spec is None:
            spec = ""
        if not isinstance(spec, str):
            raise ConfigError(
                f"expected a version specifier string such as '>=0.1' (quote it); got {short_repr(spec)}",
                file=source,
                key=f"requires.{dist}",
            )
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            raise ConfigError(
                f"invalid version specifier {short_repr(spec)}; expected e.g. '>=0.1', '==1.2.*' or '' for any",
                file=source,
                key=f"requires.{dist}",
            ) from None
        out[dist.strip()] = spec.strip()
    return out


def check_requires(
    requires: Mapping[str, str], *, source: str | None = None, manager: PluginManager | None = None
) -> None:
    """Check every required distribution is installed, matches its specifier and loaded.

    Raises:
        ConfigError: for the first distribution that is not installed (with the command that
            installs it, :func:`arena.distributions.install_hint`), whose installed version does not satisfy the specifier (both
            versions named), or whose ``arena`` entry point failed to load (with its error).
    """
    if manager is None:
        from arena.plugins import get_plugin_manager

        manager = get_plugin_manager()
    for dist, spec in normalize_requires(requires, source=source).items():
        wanted = f"{dist}{spec}"
        key = f"requires.{dist}"
        try:
            installed = version(dist)
        except PackageNotFoundError:
            raise ConfigError(
                f"requires {wanted}, which is not installed: {install_hint(wanted)}", file=source, key=key
            ) from None
        if spec and not _satisfies(installed, spec):
            raise ConfigError(
                f"requires {wanted}, but {dist} {installed} is installed: {install_hint(wanted)}",
                file=source,
                key=key,
            )
        for broken in manager.broken:
            if broken.distribution and canonicalize_name(broken.distribution) == canonicalize_name(dist):
                raise ConfigError(
                    f"requires {wanted}; {dist} {installed} is installed but its plugin '{broken.name}' "
                    f"failed to load: {broken.error} (run `arena plugins` for the traceback)",
                    file=source,
                    key=key,
                )


def _satisfies(installed: str, spec: str) -> bool:
    try:
        return SpecifierSet(spec).contains(Version(installed), prereleases=True)
    except InvalidVersion:
        return SpecifierSet(spec).contains(installed, prereleases=True)
