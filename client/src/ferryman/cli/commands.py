"""The ``ferryman`` command's commands: ferryman-client's own, and those other distributions add.

A command is known by its help line until it is run: only then is its module imported (and
its arguments added), so ``ferryman --help`` and each command load none of the others'
modules. ferryman-client's commands are :data:`BUILTIN`; another distribution (the server,
``ferryman``) adds its own as entry points of the :data:`GROUP` group, each an entry named by
the command's path (``serve``; ``models.pull`` for ``ferryman models pull``) whose object is a
:class:`Command`. Reading the entry points imports only the (small) modules holding those
objects.

A command's module defines the function :attr:`Command.function` names, which adds the
command's arguments to its parser and sets one of two defaults: ``handler`` (a command on a
running server: ``(client, args, out) -> int``, run by :func:`ferryman.cli.remote.run`) or
``local`` (a command without a server: ``(args) -> int``, its own errors handled).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

GROUP = "ferryman.commands"
"""The entry-point group through which a distribution adds commands to ``ferryman``."""


@dataclass(frozen=True)
class Command:
    """A command of ``ferryman``: its help line, and where its arguments are added from.

    Attributes:
        help: The line ``ferryman --help`` (or its group's ``--help``) shows for it.
        module: The module imported when the command is run or its own help is asked for.
        function: The module's function that adds the command's arguments to its parser.
    """

    help: str
    module: str
    function: str = "add_arguments"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Import the command's module and add its arguments to ``parser``."""
        adder: Callable[[argparse.ArgumentParser], None] = getattr(importlib.import_module(self.module), self.function)
        adder(parser)


BUILTIN: Mapping[str, Command] = {
    "chat": Command("chat with an agent on a running server", "ferryman.cli.chat"),
    "agents": Command("list, show, create and delete agents", "ferryman.cli.agents", "add_agents"),
    "sessions": Command("list, show and fork an agent's sessions", "ferryman.cli.agents", "add_sessions"),
    "conversations": Command("list conversations, and fork one at one of its items", "ferryman.cli.conversations"),
    "responses": Command("list stored responses; compact a conversation", "ferryman.cli.responses"),
    "turns": Command("show a turn's step timeline, or replay its events", "ferryman.cli.turns"),
    "models": Command("list, register and unregister a server's models (the server adds pull)", "ferryman.cli.models"),
    "files": Command("upload and list files", "ferryman.cli.files"),
    "vector-stores": Command("create, fill and search vector stores", "ferryman.cli.vector_stores"),
    "memory": Command("list, show, set and delete an agent's memory blocks", "ferryman.cli.memory"),
    "usage": Command("show the tokens and turns used per agent, principal or model", "ferryman.cli.usage"),
    "audit": Command("list the audit records: creates, deletes and denials", "ferryman.cli.audit"),
    "schedules": Command("create, list, pause, resume and delete cron schedules", "ferryman.cli.schedules"),
    "approvals": Command("list the calls waiting for approval, and approve or deny them", "ferryman.cli.approvals"),
    "webhooks": Command("list the events posted to runs' webhooks (the server adds secret)", "ferryman.cli.webhooks"),
}
"""ferryman-client's commands, all on a running server, in the order ``ferryman --help`` lists them."""


def installed() -> dict[tuple[str, ...], Command]:
    """The commands the installed distributions add, by path (``("models", "pull")``), in their declared order.

    Raises:
        TypeError: An entry of :data:`GROUP` is no :class:`Command`.
    """
    found: dict[tuple[str, ...], Command] = {}
    for entry in entry_points(group=GROUP):
        command: Any = entry.load()
        if not isinstance(command, Command):
            raise TypeError(f"the entry point {entry.name} = {entry.value} of {GROUP} is no {Command.__qualname__}")
        found[tuple(entry.name.split("."))] = command
    return found
