"""Ids given by a unique prefix (the short ids ``ferryman chat`` prints), resolved by listing what they name.

An id that is complete (it ends in a UUID) is used as it is, without listing. Otherwise
the candidates are listed: an id found among them, or the one id it begins, is the answer;
several is an error naming a few of them; none leaves the id as given, for the server to
answer (``not_found``) in its own words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ferryman.client import Client

from .remote import UsageError

_COMPLETE = re.compile(r"(?:^|.*[-_])(?:[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")
"""Ids the server makes: a UUID, or a prefix and 32 hex digits (``file-…``, ``vs_…``)."""
_SHOWN = 3
"""Candidates an ambiguity error names."""


def unique(kind: str, given: str, candidates: Iterable[str]) -> str:
    """The one candidate ``given`` is, or begins; ``given`` itself when it begins none.

    Raises:
        UsageError: ``given`` begins several candidates (and is none of them).
    """
    matches = []
    for candidate in candidates:
        if candidate == given:
            return given
        if candidate.startswith(given):
            matches.append(candidate)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        return given
    shown = ", ".join(sorted(matches)[:_SHOWN]) + (", …" if len(matches) > _SHOWN else "")
    raise UsageError(f"{kind} id prefix '{given}' is ambiguous: {len(matches)} {kind}s begin with it ({shown})")


def complete(given: str) -> bool:
    """Whether ``given`` is a whole id as the server makes them (nothing to look up)."""
    return _COMPLETE.fullmatch(given) is not None


def agent(client: Client, given: str) -> str:
    """The agent id ``given`` is, or begins."""
    if complete(given):
        return given
    return unique("agent", given, (a.agent_id for a in client.agents.list()))


def session(client: Client, agent_id: str, given: str) -> str:
    """The id of the session of ``agent_id`` that ``given`` is, or begins."""
    if complete(given):
        return given
    return unique("session", given, (s.session_id for s in client.agents.sessions.list(agent_id)))


def turn(client: Client, agent_id: str, session_id: str, given: str) -> str:
    """The id of the turn of that session that ``given`` is, or begins."""
    if complete(given):
        return given
    turns = client.agents.sessions.retrieve(agent_id, session_id).turns
    return unique("turn", given, (t.turn_id for t in turns))


def file(client: Client, given: str) -> str:
    """The file id ``given`` is, or begins."""
    if complete(given):
        return given
    return unique("file", given, (f.id for f in client.files.list()))


def vector_store(client: Client, given: str) -> str:
    """The vector store id ``given`` is, or begins."""
    if complete(given):
        return given
    return unique("vector store", given, (s.id for s in client.vector_stores.list()))


def agent_session(client: Client, agent_given: str, session_given: str) -> tuple[str, str]:
    """The agent and session ids given by their prefixes (the session among the agent's)."""
    agent_id = agent(client, agent_given)
    return agent_id, session(client, agent_id, session_given)
