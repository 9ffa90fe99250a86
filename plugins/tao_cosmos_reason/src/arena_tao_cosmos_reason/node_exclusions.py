"""SLURM node exclusions from a live ``scontrol show nodes -o`` inventory (spec §7.10)."""

from __future__ import annotations

import re
from pathlib import Path

from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.hashing import sha256_bytes

NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
BAD_STATES = ("DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILED", "FAILING", "NOT_RESPONDING", "POWER_DOWN")
BAD_STATE = re.compile(r"(?:^|[+,_])(" + "|".join(sorted(BAD_STATES, key=len, reverse=True)) + r")(?=$|[+,_])")
DIAGNOSTIC = re.compile(
    r"network\s+diagnostic|hardware\s+diagnostic|diagnostics?|quarantin|do\s+not\s+schedule|unhealthy|pyxis|enroot|"
    r"mount\s*fail|i/?o[\s_-]*error|lustre\s*error|node\s*fail|gpu\s*(?:fail|xid)|\bxid\s*\d+", re.IGNORECASE)
NULL_COMMENTS = {"(null)", "none", "n/a", ""}
FIELD = re.compile(r"(\w+)=((?:(?!\s\w+=).)*)")


def _fields(line: str) -> dict:
    return {m.group(1): m.group(2).strip() for m in FIELD.finditer(line)}


def parse_inventory(text: str) -> list[dict]:
    """One ``{NodeName, State, Partitions, Gres, Comment}`` dict per node line (or bare names)."""
    nodes = [_fields(line) for line in text.splitlines() if "NodeName=" in line]
    if not nodes:
        nodes = [{"NodeName": tok} for tok in text.split() if NODE_NAME.match(tok)]
    if not nodes:
        raise CosmosPlanError("SLURM node inventory contains no node names")
    return nodes


def node_exclusions(requested: list[str], auto: bool, inventory_file: str, partition: str) -> dict:
    """Validate requested exclusions and add automatic ones from the inventory."""
    names = list(dict.fromkeys(n.strip() for n in requested if n.strip()))
    if not names and not auto:
        return {"requested": [], "validated": [], "retired_or_missing": [], "auto_excluded": [],
                "auto_exclusion_reasons": {}, "inventory": None}
    bad = [n for n in names if not NODE_NAME.match(n)]
    if bad:
        raise CosmosPlanError(f"invalid SLURM node exclusion names: {bad} (exclude_node)")
    if not inventory_file:
        raise CosmosPlanError("--slurm-node-inventory-file is required when node exclusions are requested")
    path = Path(inventory_file)
    if not path.is_file():
        raise CosmosPlanError(f"SLURM node inventory is inaccessible: slurm_node_inventory_file={inventory_file!r}")
    raw = path.read_bytes()
    nodes = parse_inventory(raw.decode("utf-8", "replace"))
    known = {n["NodeName"] for n in nodes}
    wanted = {p.strip() for p in partition.split(",") if p.strip()}
    reasons: dict[str, str] = {}
    if auto:
        for node in nodes:
            if "State" not in node:
                continue
            parts = {p.strip() for p in node.get("Partitions", "").split(",") if p.strip()}
            if wanted and not parts & wanted:
                continue
            if "gpu:" not in node.get("Gres", ""):
                continue
            state = node.get("State", "").upper()
            comment = node.get("Comment", "")
            if BAD_STATE.search(state):
                reasons[node["NodeName"]] = f"scheduler_state={node.get('State')}"
            elif comment.casefold() not in NULL_COMMENTS and DIAGNOSTIC.search(comment):
                reasons[node["NodeName"]] = "scheduler_diagnostic_comment"
    present = [n for n in names if n in known]
    auto_sorted = sorted(reasons)
    return {
        "requested": names,
        "validated": list(dict.fromkeys(present + auto_sorted)),
        "retired_or_missing": [n for n in names if n not in known],
        "auto_excluded": auto_sorted,
        "auto_exclusion_reasons": {k: reasons[k] for k in auto_sorted},
        "inventory": {"path": str(inventory_file), "sha256": sha256_bytes(raw), "node_count": len(nodes)},
    }
