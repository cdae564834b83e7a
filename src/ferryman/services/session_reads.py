"""Sessions of agents as one caller sees them: the kernel's session records, with the access step explicit.

A session's own fields and owner are its ``session`` record; a read checks the
policy against that owner (a session the caller may not read, or one of another
agent, is missing to it, in the same words), and an agent's page of sessions
passes the caller's filter into the kernel's query, indexed by agent, so a
caller's page among many others' sessions is one query, not a scan.
"""

from __future__ import annotations

from ferryman.auth.policy import Action
from ferryman.auth.principal import Principal
from ferryman.errors import NotFoundError
from ferryman.storage.base import SessionRecord
from ferryman.storage.domain.agents import sessions
from ferryman.storage.domain.kinds import SESSION
from ferryman.storage.domain.records import Records
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.page import Page

from .access import Access


class SessionReads:
    """The sessions' records, read through the access policy.

    Args:
        kernel: Where the sessions' records are stored.
        access: The access policy.
    """

    def __init__(self, kernel: Kernel, access: Access) -> None:
        self.records: Records[SessionRecord] = sessions(kernel)
        self._access = access

    async def get(
        self, who: Principal | None, agent_id: str, session_id: str, action: Action = "read"
    ) -> SessionRecord:
        """The agent's session, once ``who`` is allowed ``action`` on it.

        Raises:
            NotFoundError: the agent has no such session, or ``who`` may not read it (its denial audited).
            ForbiddenError: ``who`` may read it but not do ``action``.
        """
        found = await self.records.find(session_id)
        try:
            if found is None or found.value.agent_id != agent_id:
                raise self._access.missing(who, action, SESSION, session_id)
            self._access.check(who, action, SESSION, session_id, found.rec.owner)
        except NotFoundError:  # one answer for another's session and none: the caller cannot tell them apart
            raise NotFoundError(f"session '{session_id}' of agent '{agent_id}' not found") from None
        return found.value

    async def page(
        self, who: Principal | None, agent_id: str, start_index: int, limit: int | None
    ) -> Page[SessionRecord]:
        """The agent's sessions ``who`` may read, in creation order, from ``start_index`` (filtered in the query)."""
        allow = self._access.filter(who, "read", SESSION)
        found = await self.records.page(
            allow=allow, parent=None, where=("agent_id", agent_id), offset=start_index, limit=limit
        )
        return Page(found.items, found.has_more)
