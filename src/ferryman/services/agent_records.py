"""Agents as one caller sees them: the kernel's agent records, with the access step explicit.

Every method takes the caller (``who``; None: the server itself) and applies
:class:`~ferryman.services.access.Access` to the ``agent`` records: a create
stores the caller as owner in the record's own write, a read or an action
checks the policy against the owner stored with the record (an agent the
caller may not read is missing to it, one it may read but not act on is a
``ForbiddenError``), and a page passes the caller's filter to storage, so a
principal's page among many others' agents is one indexed query, not a scan.
Denials, creates and deletes are audited as :class:`Access` does.
"""

from __future__ import annotations

from ferryman.api.agents import Agent
from ferryman.auth.policy import Action
from ferryman.auth.principal import Principal
from ferryman.storage.base import IdempotencyStore, KeySettlement
from ferryman.storage.domain.agents import agents
from ferryman.storage.domain.kinds import AGENT
from ferryman.storage.domain.records import Records, Stored
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.page import Page

from .access import Access
from .checked_records import CheckedRecords
from .idempotency import keyed_write


class AgentRecords:
    """The agents, owned by their creators and read through the access policy.

    Args:
        kernel: Where the agents are stored.
        access: The access policy.
        keyed: Where a create stores its request's idempotency key with the agent, in one write (None: keys are
            not stored with agents here).
    """

    def __init__(self, kernel: Kernel, access: Access, keyed: IdempotencyStore | None = None) -> None:
        self.records: Records[Agent] = agents(kernel)
        self._checked = CheckedRecords(self.records, access)
        self._access = access
        self._keyed = keyed

    async def create(self, who: Principal | None, agent: Agent, settle: KeySettlement | None = None) -> None:
        """Store a new agent as ``who``'s, with ``settle``'s idempotency key outcome in the same write.

        Raises:
            ForbiddenError: the policy does not let ``who`` create it.
            ConflictError: its id is taken.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        self._access.check(who, "create", AGENT, agent.agent_id)
        write = keyed_write(self.records.kernel, self._keyed, settle)
        await self.records.create(agent, owner=self._access.owner(who), write=write)
        self._access.record(who, "create", AGENT, agent.agent_id)

    async def stored(self, who: Principal | None, agent_id: str, action: Action = "read") -> Stored[Agent]:
        """The agent with its record, once ``who`` is allowed ``action`` on it (see :meth:`allow`).

        Raises:
            NotFoundError: it is missing, or ``who`` may not read it.
            ForbiddenError: ``who`` may read it but not do ``action``.
        """
        return await self._checked.stored(who, agent_id, action)

    async def get(self, who: Principal | None, agent_id: str, action: Action = "read") -> Agent:
        """The agent, once ``who`` is allowed ``action`` on it (see :meth:`stored`)."""
        return (await self.stored(who, agent_id, action)).value

    def allow(self, who: Principal | None, found: Stored[Agent], action: Action = "read") -> None:
        """Raise unless ``who`` may do ``action`` on an agent already read (its denial audited).

        Raises:
            NotFoundError: ``who`` may not read it.
            ForbiddenError: it may read it but not do ``action``.
        """
        self._access.check(who, action, AGENT, found.value.agent_id, found.rec.owner)

    async def page(self, who: Principal | None, start_index: int, limit: int | None) -> Page[Agent]:
        """The agents ``who`` may read, in creation order, from ``start_index`` (filtered in storage's query)."""
        allow = self._access.filter(who, "read", AGENT)
        found = await self.records.page(allow=allow, offset=start_index, limit=limit)
        return Page(found.items, found.has_more)

    async def delete(self, who: Principal | None, agent_id: str) -> bool:
        """Delete the agent record (its deletion by ``who`` checked already, with :meth:`stored`); whether it
        existed. What lives under it elsewhere (its sessions) is the caller's to delete."""
        existed = await self.records.delete(agent_id)
        if existed:
            self._access.record(who, "delete", AGENT, agent_id)
        return existed
