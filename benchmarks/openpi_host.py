"""Serve :class:`benchmarks.vla_model.VlaModel` with openpi's own ``WebsocketPolicyServer``.

openpi's server is not part of this repository: pass the path of its
``src/openpi/serving/websocket_policy_server.py`` (it needs only ``openpi-client`` and
``websockets``, both installed with arena's test set-up)::

    python -m benchmarks.openpi_host --server-file PATH --port 8000 --size vit-l

The model loads first (openpi's ``serve_policy.py`` does the same), then the server binds and
prints ``listening on ws://HOST:PORT``; it runs until killed.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path


def load_server_class(path: Path) -> type:
    """``WebsocketPolicyServer`` from openpi's server file at ``path``."""
    spec = importlib.util.spec_from_file_location("openpi_websocket_policy_server", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WebsocketPolicyServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server-file", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--size", default="vit-l")
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)

    from benchmarks.vla_model import VlaModel

    server_class = load_server_class(args.server_file)
    model = VlaModel(args.size, device=args.device)
    model.load()
    server = server_class(model, host=args.host, port=args.port, metadata=model.metadata())
    print(f"listening on ws://{args.host}:{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
