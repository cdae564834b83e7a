"""Firing due schedules: each replica looks every ``schedules.poll_interval_seconds``, and each tick runs once.

A look claims the schedules whose tick has come (see
:mod:`ferryman.storage.domain.schedules`: the claim is one atomic step of the
kernel, so two replicas never take the same one), and for each stores its run
and moves it to its next tick in one batch, then starts the turn as the
schedule's owner, through the same :class:`~ferryman.services.agents.AgentService`
the API uses, under the access policy. The next tick is the first after now: a
schedule whose ticks passed while no replica ran fires once, not once per
missed tick. A run records the turn it started and the status that turn ended
with on this replica (``in_progress`` if the replica stopped first), or why no
turn started (``failed``, the look going on with the next schedule).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from ferryman.api.agents import CreateTurnRequest
from ferryman.api.content import UserMessage
from ferryman.api.schedules import Schedule, ScheduleRun
from ferryman.auth.principal import Principal, acting_as
from ferryman.errors import ConflictError, FerrymanError, ForbiddenError, NotFoundError
from ferryman.metrics.instruments import SCHEDULE_LOOKS, SCHEDULE_RUNS
from ferryman.periodic import Periodic
from ferryman.storage.domain.schedules import Claimed, run_id

from .acting_owner import LIFETIME_SETTING, owner_now, stale
from .agents import AgentService, LiveTurn
from .cron import next_tick, time_zone
from .schedules import ScheduleService

log = logging.getLogger(__name__)


class Scheduler:
    """The loop that fires due schedules, and one look of it (:meth:`fire_due`), which tests call themselves.

    Args:
        schedules: The schedules (their records, settings and clock).
        agents: Starts the runs' turns.
    """

    def __init__(self, schedules: ScheduleService, agents: AgentService) -> None:
        self._schedules = schedules
        self._records = schedules.records
        self._settings = schedules.settings
        self._agents = agents
        self._watching: set[asyncio.Task[None]] = set()
        self._loop = Periodic("schedules", self._look, self._settings.poll_interval_seconds)

    async def start(self) -> None:
        """Look for due schedules now and every ``poll_interval_seconds`` (unless ``schedules.fire`` is off)."""
        if self._settings.fire:
            self._loop.start()

    async def stop(self) -> None:
        """Stop looking; stop following the outcomes of the turns started (the turns themselves go on)."""
        await self._loop.stop()
        for task in list(self._watching):
            task.cancel()
        await asyncio.gather(*self._watching, return_exceptions=True)

    async def settled(self) -> None:
        """Wait until the turns this replica started so far have ended and their runs record how."""
        while self._watching:
            await asyncio.gather(*self._watching, return_exceptions=True)

    async def _look(self) -> None:
        try:
            await self.fire_due()
        finally:
            SCHEDULE_LOOKS.inc()

    async def fire_due(self) -> list[ScheduleRun]:
        """Fire every schedule due by now (the clock's) that this replica claims; the runs made."""
        now = self._schedules.clock()
        batch = self._settings.claim_batch_size
        made: list[ScheduleRun] = []
        while True:
            claimed = await self._records.claim_due(now, now + self._settings.claim_seconds, batch)
            for schedule in claimed:
                try:
                    run = await self._fire(schedule, now)
                except Exception:  # storage failed for this one: its claim ends and it is taken again
                    log.exception("firing schedule %s failed", schedule.value.id)
                    continue
                if run is not None:
                    made.append(run)
            if len(claimed) < batch:
                return made

    async def _fire(self, claimed: Claimed, now: float) -> ScheduleRun | None:
        schedule = claimed.value
        due = schedule.next_run_at
        try:
            tick = next_tick(schedule.cron, time_zone(schedule.timezone), max(now, float(due or 0)))
        except (FerrymanError, ValueError, StopIteration) as exc:  # stored before a rule it breaks: stop it
            log.warning("schedule %s paused: its next tick cannot be found (%s)", schedule.id, exc)
            await self._records.kernel.write([self._records.pause(schedule.id)])
            return None
        if due is None or due > now:  # claimed after a stopped replica's claim ended, before its tick
            await self._records.release(claimed, tick if due is None else due)
            return None
        run = ScheduleRun(
            id=run_id(schedule.id, due),
            schedule_id=schedule.id,
            scheduled_at=due,
            created_at=int(now),
            session_id=schedule.session_id,
        )
        try:
            await self._records.advance(claimed, run, tick)
        except (ConflictError, NotFoundError):  # paused, deleted or claimed by another since: nothing runs
            return None
        return await self._start(claimed, run, now)

    async def _failed(self, run: ScheduleRun, error: str) -> ScheduleRun:
        SCHEDULE_RUNS.labels("failed").inc()
        await self._records.update_run(run.id, {"status": "failed", "error": error})
        return run.model_copy(update={"status": "failed", "error": error})

    async def _start(self, claimed: Claimed, run: ScheduleRun, now: float) -> ScheduleRun:
        schedule = claimed.value
        try:
            with acting_as(await self._principal(claimed, now)):
                session_id, live = await self._start_turn(schedule, run)
        except FerrymanError as exc:
            if isinstance(exc, NotFoundError | ForbiddenError):  # gone, or no longer its owner's to use
                log.warning("schedule %s paused: %s", schedule.id, exc.message)
                await self._records.kernel.write([self._records.pause(schedule.id)])
            return await self._failed(run, exc.message)
        except Exception:  # not one of ours: the run still says it failed, and the look goes on
            log.exception("schedule %s: starting the run of %s failed", schedule.id, _iso(run.scheduled_at))
            return await self._failed(run, "the server failed to start the turn (its log says why)")
        SCHEDULE_RUNS.labels("started").inc()
        started = run.model_copy(update={"session_id": session_id, "turn_id": live.turn_id})
        await self._records.update_run(run.id, {"session_id": session_id, "turn_id": live.turn_id})
        await self._records.prune_runs(schedule.id, self._settings.runs_kept)
        watcher = asyncio.create_task(self._follow(run.id, live), name=f"schedule-run-{run.id}")
        self._watching.add(watcher)
        watcher.add_done_callback(self._watching.discard)
        return started

    async def _start_turn(self, schedule: Schedule, run: ScheduleRun) -> tuple[str, LiveTurn]:
        """Start the run's turn (its session, and the turn), in a session opened for it if the schedule names
        none (deleted again if the turn is refused, so that refused ticks leave no sessions behind)."""
        request = CreateTurnRequest(messages=[UserMessage(content=schedule.message)])
        if schedule.session_id is not None:
            return schedule.session_id, await self._agents.start_turn(schedule.agent_id, schedule.session_id, request)
        name = f"schedule {schedule.id} at {_iso(run.scheduled_at)}"
        session_id = await self._agents.create_session(schedule.agent_id, name)
        try:
            return session_id, await self._agents.start_turn(schedule.agent_id, session_id, request)
        except Exception:
            try:
                await self._agents.delete_session(schedule.agent_id, session_id)
            except Exception:  # the refusal is what the run records; a session left over is only logged
                log.exception("schedule %s: deleting the session its refused run opened failed", schedule.id)
            raise

    async def _follow(self, record_id: str, live: LiveTurn) -> None:
        """Record the status the turn ends its run with (``failed`` if its task failed)."""
        try:
            turn = await live.task
        except asyncio.CancelledError:
            if not live.task.cancelled():
                raise  # this follower was stopped: the turn goes on
            status = "failed"
        except Exception:
            status = "failed"
        else:
            status = str(getattr(turn, "status", "completed"))
        await self._records.update_run(record_id, {"status": status})

    async def _principal(self, claimed: Claimed, now: float) -> Principal | None:
        """Who the schedule's runs act as: its owner (None: the server); an API key as it is now.

        Raises:
            ForbiddenError: the owner is an API key that was revoked or deleted, or a subject whose schedule's
                ``acts_until`` passed.
        """
        owner = claimed.rec.owner
        schedule = claimed.value
        until = schedule.acts_until
        if until is None:  # stored before acts_until: from its creation
            until = schedule.created_at + self._settings.subject_lifetime_seconds
        if stale(owner, until, now):
            raise ForbiddenError(
                f"the schedule acts as its owner only until {_iso(until)} ({LIFETIME_SETTING}); "
                "its owner's resume renews it"
            )
        return await owner_now(self._records.kernel, owner)


def _iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%MZ")
