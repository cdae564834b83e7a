"""Agents and their sessions as records of the kernel, each a :class:`Records`.

An agent is a root record whose body is its wire form (``Agent``, every field
kept, as the tables it replaces kept its config); it never changes once made.
A session is a record under its agent, or a root (parent "") when the
Responses or Conversations API opened it for its turns; deleting an agent
deletes its sessions in the same batch. Owners ride in each record's own write,
so a caller's page of agents or sessions is filtered in the query.
"""

from __future__ import annotations

from typing import Literal

from ferryman.api.agents import Agent

from .. import codec
from ..base import SessionRecord
from ..kernel import ops
from ..kernel.model import Json, Owner
from ..kernel.protocol import Kernel
from .kinds import AGENT, SESSION
from .records import Records


class AgentCodec:
    """An agent as its whole JSON-mode dump (null fields kept: a config reads back equal)."""

    def dump(self, value: Agent) -> Json:
        """The agent's body."""
        return value.model_dump(mode="json")

    def load(self, body: Json) -> Agent:
        """The agent ``dump`` stored."""
        return Agent.model_validate(body)


class SessionCodec:
    """A session's own fields (its turns are stored apart)."""

    def dump(self, value: SessionRecord) -> Json:
        """The session's body."""
        return {
            "session_id": value.session_id,
            "agent_id": value.agent_id,
            "session_name": value.session_name,
            "started_at": codec.dump_time(value.started_at),
        }

    def load(self, body: Json) -> SessionRecord:
        """The session ``dump`` stored."""
        started_at = codec.load_time(body["started_at"])
        if started_at is None:
            raise ValueError(f"session {body['session_id']} has no start time")
        return SessionRecord(body["session_id"], body.get("agent_id"), body["session_name"], started_at)


class SessionRecords(Records[SessionRecord]):
    """Sessions, each stored under its agent (parent "" for a session of no agent).

    Args:
        kernel: The backend.
    """

    def __init__(self, kernel: Kernel) -> None:
        super().__init__(kernel, SESSION, SessionCodec(), lambda session: session.session_id)

    def put(
        self,
        value: SessionRecord,
        *,
        owner: Owner | None = None,
        parent: str = "",
        mode: Literal["create", "upsert"] = "create",
        at: float | None = None,
        lease_until: float | None = None,
    ) -> ops.Put:
        """The operation storing a session under its agent (``parent``, when given, must be that agent)."""
        agent = value.agent_id or ""
        if parent and parent != agent:
            raise ValueError(f"session '{value.session_id}' belongs to agent '{agent}', not '{parent}'")
        return super().put(value, owner=owner, parent=agent, mode=mode, at=at, lease_until=lease_until)


def agents(kernel: Kernel) -> Records[Agent]:
    """Agents, by id, in creation order."""
    return Records(kernel, AGENT, AgentCodec(), lambda agent: agent.agent_id)


def sessions(kernel: Kernel) -> SessionRecords:
    """Sessions, by id, under their agents."""
    return SessionRecords(kernel)
