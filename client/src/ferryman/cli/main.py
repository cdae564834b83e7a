"""The ``ferryman`` command: its parser, built along the command asked for only, and its entry point.

``ferryman --help`` imports the modules of no command; ``ferryman agents list`` those of
``agents`` (and the client) only. The commands are ferryman-client's own and those the
installed distributions add (:mod:`ferryman.cli.commands`): with the server installed,
``serve``, ``stop``, ``keys`` and ``models pull|pulled``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from .commands import BUILTIN, Command, installed
from .exits import EPILOG, EXIT_INTERRUPTED, closed_stdout

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""What an error line must not hold as it is: a typed argument may carry terminal escapes or line breaks."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block, control characters escaped) and exit 2."""

    def error(self, message: str) -> NoReturn:
        """Print the error in one line and exit 2."""
        shown = _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", message)
        self.exit(2, f"{self.prog}: {shown} (see '{self.prog} --help')\n")


def parser_for(argv: Sequence[str] = (), every: bool = False) -> argparse.ArgumentParser:
    """The parser of ``argv``: every command listed, but only the one ``argv`` names built (with its module).

    Args:
        argv: The arguments (without the program's name); the words that are no flags name the command
            (``["models", "pull", ...]``). Without any, no command is built: the whole help.
        every: Build every command, whatever ``argv`` names (the tests' and the docs' view of all of them).
    """
    path = [arg for arg in argv if not arg.startswith("-")]
    parser = OneLineParser(
        prog="ferryman",
        description="A durable agent server.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    added = installed()
    top = {name[0]: command for name, command in added.items() if len(name) == 1}
    nested = {name: command for name, command in added.items() if len(name) > 1}
    _add_commands(parser, {**top, **BUILTIN}, nested, None if every else path, ())
    return parser


def _add_commands(
    parser: argparse.ArgumentParser,
    commands: Mapping[str, Command],
    nested: Mapping[tuple[str, ...], Command],
    path: Sequence[str] | None,
    at: tuple[str, ...],
) -> None:
    """Add ``commands`` (those under the command ``at``) to ``parser``, building only the one ``path`` names.

    Each command's help line is all ``--help`` needs; a command is built (its module imported, its
    arguments added) when ``path`` names it, or always when ``path`` is ``None``.
    """
    depth = len(at)
    actions = _subcommands(parser) or parser.add_subparsers(dest="_".join(("command", *at)), required=True)
    for name, command in commands.items():
        sub = actions.add_parser(name, help=command.help)
        if path is None or (depth < len(path) and path[depth] == name):
            command.add_arguments(sub)
            here = (*at, name)
            below = {key[-1]: item for key, item in nested.items() if key[:-1] == here}
            if below:
                _add_commands(sub, below, nested, path, here)


def _subcommands(parser: argparse.ArgumentParser) -> Any:
    """The subcommands ``parser`` has been given already (a command's own, before the added ones), if any."""
    return next((action for action in parser._actions if isinstance(action, argparse._SubParsersAction)), None)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ferryman`` command: its exit status (see :data:`~ferryman.cli.exits.EPILOG`).

    A closed stdout (``| head``) and Ctrl-C end it quietly, here for every command.
    """
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:
        return closed_stdout()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _main(argv: list[str]) -> int:
    args = parser_for(argv).parse_args(argv)
    if getattr(args, "handler", None) is not None:  # a command on a running server, through ferryman.client
        from . import remote  # lazy, as the commands that need it

        return remote.run(args.handler, args)
    return int(args.local(args))  # a command without a server: it reports its own errors


if __name__ == "__main__":
    sys.exit(main())
