"""How to install arena's own distributions, for the hints arena prints.

arena-core, its plugins and its launch backends live in one repository, one folder each
(:data:`FOLDERS`). Until they are published on PyPI (:data:`ON_PYPI`), ``pip install
arena-plugin-openpi`` finds nothing, so a hint names the folder of a checkout and a VCS URL
with ``#subdirectory=`` instead; other distributions get a plain ``pip install``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, metadata

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

#: Distribution -> its folder in the arena repository. tests/test_distributions.py checks
#: that every package of the checkout is here.
FOLDERS: dict[str, str] = {
    "arena-core": ".",
    "arena-plugin-openpi": "plugins/openpi",
    "arena-plugin-cosmos": "plugins/cosmos",
    "arena-plugin-gr00t": "plugins/gr00t",
    "arena-plugin-dreamzero": "plugins/dreamzero",
    "arena-plugin-tao-cosmos-reason": "plugins/tao_cosmos_reason",
    "arena-plugin-isaaclab": "plugins/isaaclab",
    "arena-plugin-libero": "plugins/libero",
    "arena-plugin-aloha": "plugins/aloha",
    "arena-plugin-maniskill": "plugins/maniskill",
    "arena-plugin-lerobot": "plugins/lerobot",
    "arena-plugin-kinetix": "plugins/kinetix",
    "arena-plugin-vla-eval": "plugins/vla_eval",
    "arena-plugin-wandb": "plugins/wandb",
    "arena-plugin-mlflow": "plugins/mlflow",
    "arena-backend-slurm": "backends/slurm",
    "arena-backend-osmo": "backends/osmo",
    "arena-backend-ray": "backends/ray",
}

#: Whether :data:`FOLDERS`' distributions can be installed from PyPI by name: turn it on in
#: the release that first publishes them (.github/workflows/release.yml).
ON_PYPI = False


def repository_url() -> str | None:
    """The repository's URL, from arena-core's ``Source`` project URL (None if unknown)."""
    try:
        urls = metadata("arena-core").get_all("Project-URL") or []
    except PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "source":
            return url.strip()
    return None


def install_hint(requirement: str) -> str:
    """The command(s) that install ``requirement`` (e.g. ``arena-plugin-openpi>=0.1``).

    For a distribution of this repository before it is on PyPI: ``pip install
    ./plugins/openpi`` from a checkout, or ``pip install 'arena-plugin-openpi @
    git+URL#subdirectory=plugins/openpi'``. Otherwise ``pip install 'REQUIREMENT'``.
    """
    try:
        name = Requirement(requirement).name
    except InvalidRequirement:
        return f"pip install '{requirement}'"
    folder = FOLDERS.get(canonicalize_name(name))
    if folder is None or ON_PYPI:
        return f"pip install '{requirement}'"
    local = "pip install ." if folder == "." else f"pip install ./{folder}"
    url = repository_url()
    if url is None:
        return f"{local} (from an arena checkout; {name} is not on PyPI yet)"
    subdirectory = "" if folder == "." else f"#subdirectory={folder}"
    return f"{local} (from an arena checkout), or pip install '{name} @ git+{url}{subdirectory}'"
