"""The schedules API's operations: cron schedules owned by their creators, read through the access policy.

Every method takes the caller (``who``; None: the server itself). A schedule the
caller may not read is missing to it (404), one it may read but not change a
403; creates are checked and audited by :class:`~ferryman.services.access.Access`.
What a schedule names is checked when it is made: its cron expression (and how
often it fires) and time zone, its message's size, and that its agent (and
session) exist and are the caller's to use (one the caller may not read is
missing to it: 404). A schedule a signed-in subject makes acts as that subject
(with its attributes then) for ``schedules.subject_lifetime_seconds``
(``acts_until``), which the subject's resume renews. Firing them is :mod:`ferryman.services.scheduler`'s.
"""

from __future__ import annotations

from collections.abc import Callable

from ferryman.api.schedules import (
    CreateScheduleRequest,
    Schedule,
    ScheduleDeleted,
    ScheduleList,
    ScheduleRunList,
)
from ferryman.auth.principal import Principal
from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError
from ferryman.ids import new_id
from ferryman.schedule_settings import ScheduleSettings
from ferryman.storage.base import Store
from ferryman.storage.domain.kinds import SCHEDULE
from ferryman.storage.domain.records import Stored
from ferryman.storage.domain.schedules import ScheduleRecords
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import UNOWNED, Owner, principal_term

from .access import Access
from .acting_owner import acts_for_a_while
from .agent_records import AgentRecords
from .cron import check_cron, check_interval, next_tick, time_zone
from .idempotency import Claim, answered, keyed_write, settlement, stored_record
from .session_reads import SessionReads

Clock = Callable[[], float]
"""The time now, in seconds since the epoch (``time.time``; a test's own clock)."""


def new_schedule_id() -> str:
    """A new schedule's id."""
    return new_id("sched")


class ScheduleService:
    """Create, list, read, pause, resume and delete schedules, and list their runs.

    Args:
        records: The schedules and runs.
        access: The access policy.
        store: Where the agents and sessions a schedule names are read (its kernel), and where a create stores
            its request's idempotency key with the schedule.
        settings: The ``schedules:`` settings.
        clock: The time now.
    """

    def __init__(
        self, records: ScheduleRecords, access: Access, store: Store, settings: ScheduleSettings, clock: Clock
    ) -> None:
        self.records = records
        self.settings = settings
        self.clock = clock
        self._access = access
        self._store = store
        self._agents = AgentRecords(store.kernel, access)
        self._sessions = SessionReads(store.kernel, access)

    async def create(self, who: Principal | None, request: CreateScheduleRequest, key: Claim | None = None) -> Schedule:
        """Check and store a schedule as ``who``'s; active at its next tick unless ``paused``. ``key`` (the
        request's idempotency key) is claimed by the write that stores it, answered with the schedule.

        Raises:
            IdempotencyKeyHeldError: an earlier call with the key holds it (nothing is stored).
            InvalidRequestError: a field is invalid (it is named), or ``who`` holds ``max_per_principal``.
            NotFoundError: the agent or session is missing, or ``who`` may not read it.
            ForbiddenError: the policy does not let ``who`` create a schedule, or start turns in the session.
        """
        now = self.clock()
        zone = time_zone(request.timezone)
        first = check_cron(request.cron, zone, now)
        check_interval(request.cron, zone, first, self.settings.min_interval_seconds)
        if len(request.message) > self.settings.max_message_chars:
            raise InvalidRequestError(
                f"message must be at most {self.settings.max_message_chars} characters (schedules.max_message_chars)",
                "message",
            )
        await self._check_targets(who, request.agent_id, request.session_id)
        schedule_id = new_schedule_id()
        self._access.check(who, "create", SCHEDULE, schedule_id)
        owner = self._access.owner(who)
        await self._check_count(owner)
        schedule = Schedule(
            id=schedule_id,
            created_at=int(now),
            agent_id=request.agent_id,
            cron=request.cron,
            timezone=request.timezone,
            message=request.message,
            session_id=request.session_id,
            paused=request.paused,
            next_run_at=None if request.paused else first,
            acts_until=int(now) + self.settings.subject_lifetime_seconds if acts_for_a_while(owner) else None,
        )
        write = keyed_write(self.records.kernel, self._store, settlement(key, answered(schedule)))
        await write([self.records.put(schedule, owner)])
        stored_record(key)
        self._access.record(who, "create", SCHEDULE, schedule_id)
        return schedule

    async def _check_targets(self, who: Principal | None, agent_id: str, session_id: str | None) -> None:
        """The agent (and session) exist and ``who`` may use them.

        Raises:
            NotFoundError: the agent or session is missing, or the caller may not read it (as any such record).
            ForbiddenError: the caller may read the session but not add turns to it.
        """
        await self._agents.get(who, agent_id)
        if session_id is None:
            return
        await self._sessions.get(who, agent_id, session_id, "update")  # each run adds a turn to it

    async def _check_count(self, owner: Owner | None) -> None:
        """``owner`` holds fewer than ``max_per_principal`` (its own: not those of others sharing an attribute)."""
        most = self.settings.max_per_principal
        own = Terms(frozenset({UNOWNED if owner is None else principal_term(owner.key)}))
        held = await self.records.schedules.page(allow=own, limit=most)
        if len(held.items) >= most:
            raise InvalidRequestError(
                f"at most {most} schedules per principal (schedules.max_per_principal); delete one first"
            )

    async def get(self, who: Principal | None, schedule_id: str) -> Schedule:
        """One schedule.

        Raises:
            NotFoundError: it is missing, or ``who`` may not read it.
        """
        return (await self._find(who, schedule_id)).value

    async def _find(self, who: Principal | None, schedule_id: str) -> Stored[Schedule]:
        allow = self._access.filter(who, "read", SCHEDULE)
        found = await self.records.schedules.find(schedule_id, allow=allow)
        if found is None:
            self._access.denied(who, "read", SCHEDULE, schedule_id, status=404)
            raise NotFoundError(f"schedule '{schedule_id}' not found")
        return found

    async def list(
        self, who: Principal | None, *, agent_id: str | None, after: str | None, limit: int, order: str
    ) -> ScheduleList:
        """One page of the schedules ``who`` may read (of one agent, if named), newest first unless ``asc``.

        Raises:
            NotFoundError: ``after`` names no schedule.
        """
        page = await self.records.schedules.page(
            allow=self._access.filter(who, "read", SCHEDULE),
            where=None if agent_id is None else ("agent_id", agent_id),
            after=after,
            limit=limit,
            desc=order != "asc",
        )
        items = page.items
        return ScheduleList(
            data=items,
            first_id=items[0].id if items else None,
            last_id=items[-1].id if items else None,
            has_more=page.has_more,
        )

    async def set_paused(self, who: Principal | None, schedule_id: str, paused: bool) -> Schedule:
        """Pause a schedule, or resume a paused one from its first tick after now (an active one keeps its tick).

        A resume by the schedule's owner also renews how long it acts as that owner (``acts_until``).

        Raises:
            NotFoundError: it is missing, or ``who`` may not read it.
            ForbiddenError: it may read it but not update it.
        """
        found = await self._find(who, schedule_id)
        schedule = found.value
        renewal = {} if paused else self._renewal(found, self._access.owner(who))
        changes = []
        if paused:
            changes.append(self.records.pause(schedule_id))
        elif schedule.paused:
            tick = next_tick(schedule.cron, time_zone(schedule.timezone), self.clock())
            changes.append(self.records.resume(schedule_id, tick, renewal))
        elif renewal:
            changes.append(self.records.renew(schedule_id, renewal["acts_until"]))
        guard = self._access.guard(who, "update", SCHEDULE, schedule_id)
        with self._access.audited(who, "update", SCHEDULE, schedule_id):
            await self.records.kernel.write([guard, *changes])
        return await self.get(who, schedule_id)

    def _renewal(self, found: Stored[Schedule], caller: Owner | None) -> dict[str, int]:
        """What a resume by ``caller`` renews: ``acts_until``, when the caller is the subject that owns it.

        Raises:
            ConflictError: the caller owns it, but its attributes changed since it made it (the schedule would
                go on acting with the old ones).
        """
        owner = found.rec.owner
        if owner is None or caller is None or not acts_for_a_while(owner) or owner.key != caller.key:
            return {}
        if _attributes(owner) != _attributes(caller):
            raise ConflictError(
                f"schedule '{found.value.id}' acts with the attributes its owner had when it was made, which "
                "changed since; delete it and make it again"
            )
        return {"acts_until": int(self.clock()) + self.settings.subject_lifetime_seconds}

    async def delete(self, who: Principal | None, schedule_id: str) -> ScheduleDeleted:
        """Delete a schedule and its runs (the turns they started stay).

        Raises:
            NotFoundError: it is missing, or ``who`` may not read it.
            ForbiddenError: it may read it but not delete it.
        """
        guard = self._access.guard(who, "delete", SCHEDULE, schedule_id)
        with self._access.audited(who, "delete", SCHEDULE, schedule_id):
            await self.records.schedules.delete(schedule_id, before=(guard,))
        self._access.record(who, "delete", SCHEDULE, schedule_id)
        return ScheduleDeleted(id=schedule_id)

    async def runs(
        self, who: Principal | None, schedule_id: str, *, after: str | None, limit: int, order: str
    ) -> ScheduleRunList:
        """One page of a schedule's runs, newest first unless ``asc``.

        Raises:
            NotFoundError: the schedule is missing or ``who`` may not read it; ``after`` names no run.
        """
        await self.get(who, schedule_id)
        page = await self.records.runs.page(parent=schedule_id, after=after, limit=limit, desc=order != "asc")
        items = page.items
        return ScheduleRunList(
            data=items,
            first_id=items[0].id if items else None,
            last_id=items[-1].id if items else None,
            has_more=page.has_more,
        )


def _attributes(owner: Owner) -> dict[str, frozenset[str]]:
    return {category: frozenset(values) for category, values in owner.attributes.items() if values}
