"""Launching a run of an Agents API turn, and queueing its end for the webhook its request named.

A turn runs once from its start, then once more for each resume; each run is
named by the turn and the number of its first event (``run_key``) for its
webhook's delivery.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from ferryman.api.agents import Turn
from ferryman.engine.channel import LiveRun
from ferryman.engine.events import Emit, EngineEvent, TurnAwaitingInput
from ferryman.errors import FerrymanError, NotFoundError
from ferryman.storage.base import TurnRecord
from ferryman.webhooks.outbox import ArmedRun

from .approval_holds import ApprovalHolds
from .host import RunOwner, TurnHost
from .run_metrics import RunMetrics
from .turn_reads import TurnReads, stream
from .turn_stream import turn_event_data
from .usage import RunUsage
from .webhooks import TURN_EVENTS, KeptWebhook

log = logging.getLogger(__name__)

LiveTurn = LiveRun[None]
"""A turn running in the background: its events, and its task, whose result is the turn."""


def run_key(turn_id: str, first_seq: int) -> str:
    """Names one run of a turn (its first, or a resume's from event ``first_seq``) for its webhook's delivery."""
    return f"{turn_id}.{first_seq}"


class TurnRuns:
    """Launches the runs of turns, and queues their ends for their webhooks.

    Args:
        host: Storage, the runner, and the webhooks' outbox.
        holds: The approval inbox, told of the calls a run's pause holds (None: no inbox).
        turns: Reads a turn as its webhook is told of it.
    """

    def __init__(self, host: TurnHost, holds: ApprovalHolds | None, turns: TurnReads) -> None:
        self._host = host
        self._store = host.store  # the run's own events: its start was checked
        self._holds = holds
        self._turns = turns

    def launch(
        self,
        record: TurnRecord,
        first_seq: int,
        run: Callable[[Emit], Awaitable[Turn]],
        counted: RunMetrics | None = None,
        metered: RunUsage | None = None,
        webhook: str | None = None,
    ) -> LiveTurn:
        """Run ``run`` in the background as the run of the turn numbered from event ``first_seq``."""
        turn_id = record.turn_id
        owner = RunOwner()

        async def settle(events: list[str]) -> None:
            try:
                await self._store.save_turn_events(turn_id, first_seq, events)
            except FerrymanError as exc:
                log.warning("events of turn %s not stored: %s", turn_id, exc.message)
            if webhook is not None:
                await self.queue_end(record, KeptWebhook(webhook, run_key(turn_id, first_seq)), owner)

        owners = (record.agent_id or "", record.session_id, turn_id)  # the turn's own id: what interrupts it
        if self._holds is not None:
            run = _holding(run, self._holds, record.agent_id)
        if webhook is not None:
            run = self._host.reading_owner(run, "turn", turn_id, owner)  # after arming: the arm goes first
            run = self._host.armed(run, ArmedRun(kind="turn", run_id=turn_id, run_key=run_key(turn_id, first_seq),
                                                 session_id=record.session_id))  # fmt: skip
        counted = counted or RunMetrics("agents")
        return self._host.launch(
            turn_id, stream(turn_id), run, turn_event_data, settle, owners, first_seq, counted=counted, metered=metered
        )

    async def queue_end(self, record: TurnRecord, hook: KeptWebhook, run_owner: RunOwner | None = None) -> None:
        """Queue the turn's state (its run's end, stored by now) for ``hook``, owned by the turn's owner (as its run
        read it when it started; else read now), whoever ended the run (a run the approval inbox continues has its
        approver, or no one, as the caller); a turn removed by then (a rollback, its session deleted) is told as
        ``turn.failed``, status ``deleted``."""
        # Read before the turn: its owner goes with it.
        owner = await self._host.run_owner(run_owner or RunOwner(), "turn", record.turn_id)
        try:
            turn = await self._turns.get_turn(record.agent_id or "", record.session_id, record.turn_id)
        except NotFoundError:
            gone = {"turn_id": record.turn_id, "session_id": record.session_id, "status": "deleted"}
            await self._host.notify(hook.url, hook.run_key, record.turn_id, "turn.failed", gone, owner)
            return
        except FerrymanError as exc:  # unreadable now: nothing is told
            log.warning("the webhook of turn %s was not queued: %s", record.turn_id, exc.message)
            return
        data = turn.model_dump(mode="json")
        await self._host.notify(hook.url, hook.run_key, turn.turn_id, TURN_EVENTS.get(turn.status), data, owner)


def _holding(
    run: Callable[[Emit], Awaitable[Turn]], holds: ApprovalHolds, agent_id: str | None
) -> Callable[[Emit], Awaitable[Turn]]:
    """The run, the calls its pause holds for approval stored before the pause reaches any client."""

    async def held(emit: Emit) -> Turn:
        async def noting(event: EngineEvent) -> None:
            if isinstance(event, TurnAwaitingInput) and event.turn.approval_requests:
                try:
                    await holds.hold_turn(event.turn, agent_id)
                except FerrymanError as exc:  # the turn paused all the same; its requests are on the turn
                    log.warning("approval requests of turn %s not in the inbox: %s", event.turn.turn_id, exc.message)
            await emit(event)

        return await run(noting)

    return held
