"""Agents and their sessions as records of the kernel, each a :class:`Records`.

An agent is a root record whose body is its wire form (``Agent``, every field
kept, as the tables it replaces kept its config); it never changes once made.
A session is a root record indexed by its agent (none when the Responses or
Conversations API opened it for its turns); its anchor, where its turns and
running state hang, is the turn store's and is written and deleted in the same
transaction as the record. Owners ride in each record's own write, so a
caller's page of agents or an agent's sessions is filtered in the query.
"""

from __future__ import annotations

from ferryman.api.agents import Agent
from ferryman.storage import codec
from ferryman.storage.base import SessionRecord
from ferryman.storage.domain.kinds import AGENT, SESSION
from ferryman.storage.domain.records import Records
from ferryman.storage.kernel.model import Json
from ferryman.storage.kernel.protocol import Kernel


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


def agents(kernel: Kernel) -> Records[Agent]:
    """Agents, by id, in creation order."""
    return Records(kernel, AGENT, AgentCodec(), lambda agent: agent.agent_id)


def sessions(kernel: Kernel) -> Records[SessionRecord]:
    """Sessions, by id, in creation order (their start), listed by agent (``where=("agent_id", ...)``)."""
    return Records(
        kernel,
        SESSION,
        SessionCodec(),
        lambda session: session.session_id,
        lambda session: session.started_at.timestamp(),
    )
