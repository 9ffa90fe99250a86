"""What a shareable report leaves out: host names, the kernel and local paths.

``index.html`` is made to be sent around (mailed, attached to a pull request, put on a web
page), so by default it does not name the machines an experiment ran on (the submitting host,
cluster nodes, a server's address other than loopback), the kernel release (``platform`` is
cut to the operating system's name, e.g. ``Linux``) or local paths (the git checkout, the
working directory, the output directory, the home directory, a model's local checkpoint, shown
by its last two path components), wherever they appear: the
provenance table, per-run machines, the command line, error messages and the resolved
experiment. ``arena report DIR --no-redact`` writes them in. ``provenance.json``,
``experiment_result.json`` and each ``run_result.json`` always keep them.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any, Callable

#: Server addresses that name no machine: kept in a redacted report.
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", "::"})

#: What may follow a path that is hidden: a separator, a quote or punctuation, or the end.
_PATH_END = r"""(?=[/\\\s'":,;)\]}]|$)"""

#: What replaces each kind of hidden text.
HOST = "<host>"
CHECKOUT = "<checkout>"
CWD = "<cwd>"
OUTPUT = "<output>"
HOME = "~"


def operating_system(platform: Any) -> Any:
    """``Linux`` of ``Linux-6.8.0-45-generic-x86_64-with-glibc2.39`` (``platform.platform()``)."""
    return platform.split("-", 1)[0] if isinstance(platform, str) and platform else platform


def _hosts(result: dict[str, Any]) -> set[str]:
    prov = result.get("provenance") or {}
    hosts = {prov.get("hostname")}
    hosts.update(r.get("hostname") for r in prov.get("resumes") or [] if isinstance(r, dict))
    for run in (result.get("runs") or {}).values():
        hosts.add((run.get("machine") or {}).get("hostname"))
        hosts.add((run.get("server") or {}).get("host"))
    return {h for h in hosts if isinstance(h, str) and len(h) > 1 and h not in LOOPBACK}


def _paths(result: dict[str, Any], output_dir: Path) -> list[tuple[str, str]]:
    prov = result.get("provenance") or {}
    pairs = [
        ((prov.get("git") or {}).get("root"), CHECKOUT),
        (str(output_dir.resolve()), OUTPUT),
        (str(output_dir.absolute()), OUTPUT),
        (prov.get("cwd"), CWD),
        (os.path.expanduser("~"), HOME),
    ]
    # Local checkpoints (a model's absolute path): by their last components, as the labels name them.
    for run in (result.get("runs") or {}).values():
        checkpoint = (run.get("model") or {}).get("checkpoint") if isinstance(run.get("model"), dict) else None
        if isinstance(checkpoint, str) and (checkpoint.startswith("/") or checkpoint.startswith("file://")):
            parts = [p for p in checkpoint.split("/") if p]
            pairs.append((checkpoint, "…/" + "/".join(parts[-2:])))
    seen: dict[str, str] = {}
    for path, placeholder in pairs:
        if isinstance(path, str) and len(path) > 1 and path not in seen:
            seen[path] = placeholder
    # The longest first: the output directory inside the checkout inside the home directory.
    return sorted(seen.items(), key=lambda item: -len(item[0]))


def scrubber(result: dict[str, Any], output_dir: str | os.PathLike[str]) -> Callable[[str], str]:
    """A function that hides, in a text, the hosts and local paths ``result`` knows of.

    Paths are replaced where they start a path (``/home/ada/arena/x`` -> ``<checkout>/x``),
    host names where they stand as a word (``node-7`` but not ``node-70``).
    """
    paths = _paths(result, Path(output_dir))
    hosts = sorted(_hosts(result), key=len, reverse=True)
    path_re = re.compile("|".join(re.escape(p) + _PATH_END for p, _ in paths)) if paths else None
    replacement = dict(paths)
    host_re = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, hosts)) + r")(?![\w-])") if hosts else None

    def scrub(text: str) -> str:
        if path_re is not None:
            text = path_re.sub(lambda m: replacement[m.group(0)], text)
        if host_re is not None:
            text = host_re.sub(HOST, text)
        return text

    return scrub


def _scrub_all(value: Any, scrub: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_scrub_all(v, scrub) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_all(v, scrub) for k, v in value.items()}
    return value


def redact_for_sharing(
    result: dict[str, Any],
    episodes: dict[str, list[dict[str, Any]]],
    config_text: str | None,
    output_dir: str | os.PathLike[str],
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]], str | None]:
    """Copies of what the report shows, with hosts, the kernel and local paths left out.

    ``result``: an experiment result (:func:`arena.results.aggregate.build_experiment_result`),
    ``episodes``: each run's records as dicts, ``config_text``: the snapshot's text. The
    inputs are not changed. Fields that only name a machine (``hostname``, ``cwd``, the git
    root) are removed; ``platform`` keeps the operating system's name; a server's address
    stays only when it is loopback; every other string has hosts and paths replaced by
    ``<host>``, ``<checkout>``, ``<cwd>``, ``<output>`` and ``~``.
    """
    scrub = scrubber(result, output_dir)
    result = copy.deepcopy(result)
    prov = result.get("provenance")
    if isinstance(prov, dict):
        prov.pop("hostname", None)
        prov.pop("cwd", None)
        prov["platform"] = operating_system(prov.get("platform"))
        if isinstance(prov.get("git"), dict):
            prov["git"].pop("root", None)
        if isinstance(prov.get("argv"), list) and prov["argv"]:
            prov["argv"] = [os.path.basename(str(prov["argv"][0])), *prov["argv"][1:]]
        for resume in prov.get("resumes") or []:
            if isinstance(resume, dict):
                resume.pop("hostname", None)
    for run in (result.get("runs") or {}).values():
        machine = run.get("machine")
        if isinstance(machine, dict):
            machine.pop("hostname", None)
            machine["platform"] = operating_system(machine.get("platform"))
        server = run.get("server")
        if isinstance(server, dict) and server.get("host") not in LOOPBACK:
            server["host"] = None
    return _scrub_all(result, scrub), _scrub_all(episodes, scrub), scrub(config_text) if config_text else config_text
