"""Minimal stand-in for draccus's command line (``draccus.wrap``), used only where draccus is not
installed: ``--field value`` (or ``--field=value``) for each field of the config dataclass,
converted by the field's default type (bools from "True"/"False" as draccus parses them); an
unknown option or a bad value exits with status 2 as an argparse parser does."""

import dataclasses
import functools
import sys
import typing


def _convert(name, text, default):
    if isinstance(default, bool):
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"--{name}: not a bool: {text!r}")
    if isinstance(default, int):
        return int(text)
    if isinstance(default, float):
        return float(text)
    return text


def wrap():
    def decorator(fn):
        cls = next(iter(typing.get_type_hints(fn).values()))

        @functools.wraps(fn)
        def main():
            fields = {f.name: f for f in dataclasses.fields(cls)}
            values, args = {}, list(sys.argv[1:])
            while args:
                arg = args.pop(0)
                key, _, value = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
                if key not in fields:
                    print(f"error: unrecognized argument {arg}", file=sys.stderr)
                    sys.exit(2)
                if not value:
                    value = args.pop(0)
                try:
                    values[key] = _convert(key, value, fields[key].default)
                except ValueError as exc:
                    print(f"error: {exc}", file=sys.stderr)
                    sys.exit(2)
            return fn(cls(**values))

        return main

    return decorator
