"""Help text in the usual shape: ``Usage: arena validate [OPTIONS] EXPERIMENT [OVERRIDES]...``.

Recent typer releases show a type after every option (``--dry-run <bool>``), a Python type
for repeatable ones (``--set <list[str]>``) and wrap a required argument in braces
(``{experiment}``) in usage lines. :class:`ArenaGroup`, the class of the ``arena`` command
group, adjusts every command it hands out, plugin commands included: flags show no type,
repeatable options and arguments show the type of one value (``--set <str>``), and usage lines
name arguments in capitals, optional ones in brackets. Typer versions that already print help
this way are left as they are.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup

# Parameters and commands are handled by duck typing: recent typer releases vendor click
# (``typer._click``), older ones use the ``click`` distribution.


class ArenaGroup(TyperGroup):
    """The ``arena`` group: every sub-command it returns has conventional help (see module)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            conventional_help(command)
        return command

    def get_help_option(self, ctx: Any) -> Any:
        for param in self.params:  # the group's own flags (--version)
            if param.param_type_name == "option" and getattr(param, "is_flag", False):
                _flag_without_type(param)
        return _flag_without_type(super().get_help_option(ctx))


def conventional_help(command: Any) -> Any:
    """Adjust ``command`` (and a group's sub-commands) in place; returns it. Idempotent."""
    if getattr(command, "_arena_conventional_help", False):
        return command
    command._arena_conventional_help = True
    for param in command.params:
        if param.param_type_name == "argument":
            param.get_usage_pieces = _usage_pieces(param)
        elif param.param_type_name == "option" and (param.is_flag or param.count):
            _flag_without_type(param)
        if callable(getattr(param, "display_type", None)):
            param.display_type = _one_value_type(param.display_type)
    original = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        return _flag_without_type(original(ctx))

    command.get_help_option = get_help_option
    if isinstance(getattr(command, "commands", None), dict):  # a group: its sub-commands too
        for sub in command.commands.values():
            conventional_help(sub)
    return command


def _flag_without_type(option: Any) -> Any:
    if option is not None and getattr(option, "metavar", None) is None:
        option.metavar = ""
    return option


def _usage_pieces(argument: Any) -> Any:
    def pieces(ctx: Any) -> list[str]:
        name = (argument.metavar or argument.name or "").upper()
        shown = name if argument.required else f"[{name}]"
        return [shown + ("..." if argument.nargs != 1 else "")]

    return pieces


def _one_value_type(display_type: Any) -> Any:
    """``<str>`` for typer's ``<list[str]>``: the type of each value a repeatable takes."""

    def one(ctx: Any) -> Any:
        shown = display_type(ctx)
        if isinstance(shown, str) and shown.startswith("<list[") and shown.endswith("]>"):
            return "<" + shown[len("<list[") : -len("]>")] + ">"
        return shown

    return one
