"""The statements of turns and their resumes that vary by shape or by database, built with SQLAlchemy Core.

Each function returns the :class:`~.dialects.Compiled` text of one statement for a dialect, compiled once per
shape (see :mod:`.dialects`); parameters are bound by name when it runs. The statuses a statement fixes stay
literal SQL (``status IN ('in_progress', 'queued')``), never parameters: PostgreSQL uses a partial index
(``live_turns``, ``live_turn_leases``, ``one_running_turn``) only where the query's predicate implies the
index's, which a parameter's value cannot.
"""

from __future__ import annotations

import sqlalchemy as sa

from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.domain_tables import messages, responses, sessions, steps, turns

T = turns.c
TURN_COLUMNS = (
    T.turn_id,
    T.session_id,
    T.agent_id,
    T.status,
    T.input_messages,
    T.output_message,
    T.overrides,
    T.infer_iters,
    T.error_code,
    T.error_message,
    T.started_at,
    T.completed_at,
)
"""A turn's own columns, in the order :func:`~ferryman.storage.rows.turn_record` reads them."""

IN_PROGRESS: sa.ColumnClause[str] = sa.literal_column("'in_progress'")
QUEUED: sa.ColumnClause[str] = sa.literal_column("'queued'")
FAILED: sa.ColumnClause[str] = sa.literal_column("'failed'")
INTERRUPTED: sa.ColumnClause[str] = sa.literal_column("'interrupted'")
ONE: sa.ColumnClause[int] = sa.literal_column("1")


def _live() -> sa.ColumnElement[bool]:
    """The running and queued turns (what ``live_turns`` and ``live_turn_leases`` index alone)."""
    return T.status.in_([IN_PROGRESS, QUEUED])


def get_turn(d: SqlDialect) -> Compiled:
    """The turn ``:turn_id`` of session ``:session_id``: its :data:`TURN_COLUMNS`."""
    return d.compiled(
        "turns.get",
        lambda: sa.select(*TURN_COLUMNS).where(T.turn_id == p("turn_id"), T.session_id == p("session_id")),
    )


def session_anchor(d: SqlDialect) -> Compiled:
    """The history epoch of session ``:session_id`` of agent ``:agent_id`` (None: of no agent), its row held
    until the write unit ends (PostgreSQL)."""
    s = sessions.c
    return d.compiled(
        "turns.session_anchor",
        lambda: (
            sa.select(s.history_epoch)
            .where(
                s.session_id == p("session_id"),
                sa.or_(s.agent_id == p("agent_id"), sa.and_(s.agent_id.is_(None), p("agent_id").is_(None))),
            )
            .with_for_update(key_share=True)
        ),
    )


def queued(d: SqlDialect) -> Compiled:
    """A row when session ``:session_id`` has a queued turn."""
    return d.compiled(
        "turns.queued",
        lambda: (
            sa.select(ONE)
            .select_from(turns)
            .where(T.session_id == p("session_id"), _live(), T.status == QUEUED)
            .limit(1)
        ),
    )


def finish(d: SqlDialect, *, overrides: bool) -> Compiled:
    """End a running or queued turn ``:turn_id``: its status, output, error and completion time (``overrides``:
    and ``:overrides``)."""

    def build() -> sa.Update:
        values = {
            "status": p("status"),
            "output_message": p("output"),
            "infer_iters": p("infer_iters"),
            "error_code": p("code"),
            "error_message": p("message"),
            "completed_at": p("completed_at"),
        }
        if overrides:
            values["overrides"] = p("overrides")
        return sa.update(turns).where(T.turn_id == p("turn_id"), _live()).values(values)

    return d.compiled(("turns.finish", overrides), build)


def owners(d: SqlDialect) -> Compiled:
    """The ids and owners of the turns in list ``:ids`` that have an owner."""
    return d.compiled(
        "turns.owners",
        lambda: sa.select(T.turn_id, T.owner).where(d.one_of(T.turn_id, "ids"), T.owner.is_not(None)),
    )


def session_queue(d: SqlDialect) -> Compiled:
    """The ids and statuses of session ``:session_id``'s running and queued turns, oldest first."""
    return d.compiled(
        "turns.session_queue",
        lambda: sa.select(T.turn_id, T.status).where(T.session_id == p("session_id"), _live()).order_by(T.id),
    )


def turn_messages(d: SqlDialect) -> Compiled:
    """The turn id, id and body of session ``:session_id``'s messages of the turns in list ``:turns``, in order."""
    m = messages.c
    return d.compiled(
        "turns.messages",
        lambda: (
            sa.select(m.turn_id, m.id, m.body)
            .where(m.session_id == p("session_id"), d.one_of(m.turn_id, "turns"))
            .order_by(m.id)
        ),
    )


def _of_sessions(d: SqlDialect, *, some: bool) -> sa.ColumnElement[bool]:
    """The turns of the sessions in list ``:sessions`` (``some``: and in list ``:turns``)."""
    where = d.one_of(T.session_id, "sessions")
    return sa.and_(where, d.one_of(T.turn_id, "turns")) if some else where


def listed_turns(d: SqlDialect, *, some: bool) -> Compiled:
    """The :data:`TURN_COLUMNS` of the turns of the sessions in list ``:sessions`` (``some``: and in list
    ``:turns``), in the order they started."""
    return d.compiled(
        ("turns.listed", some),
        lambda: sa.select(*TURN_COLUMNS).where(_of_sessions(d, some=some)).order_by(T.id),
    )


def listed_steps(d: SqlDialect, *, some: bool) -> Compiled:
    """The turn id and body of the completed steps of the turns :func:`listed_turns` reads, in order."""
    s = steps.c
    return d.compiled(
        ("turns.listed_steps", some),
        lambda: (
            sa.select(s.turn_id, s.body)
            .join_from(steps, turns, T.turn_id == s.turn_id)
            .where(_of_sessions(d, some=some), sa.not_(s.pending))
            .order_by(s.id)
        ),
    )


def renew_leases(d: SqlDialect) -> Compiled:
    """Move the lease end of the running and queued turns in list ``:ids`` to ``:until``; returns their ids."""
    return d.compiled(
        "turns.renew_leases",
        lambda: (
            sa.update(turns)
            .where(_live(), d.one_of(T.turn_id, "ids"))
            .values(lease_until=p("until"))
            .returning(T.turn_id)
        ),
    )


def expired(d: SqlDialect) -> Compiled:
    """The id, response id and session id of the running and queued turns whose lease ended before ``:now``;
    on PostgreSQL the turns are locked, and those another sweep locked are skipped."""
    r = responses.c
    return d.compiled(
        "turns.expired",
        lambda: (
            sa.select(T.turn_id, r.response_id, T.session_id)
            .outerjoin_from(turns, responses, r.turn_id == T.turn_id)
            .where(_live(), sa.or_(T.lease_until.is_(None), T.lease_until < p("now")))
            .with_for_update(of=turns, skip_locked=True)
        ),
    )


def fail_responses(d: SqlDialect) -> Compiled:
    """Mark the responses of the turns in list ``:expired`` failed; returns their ids and bodies."""
    r = responses.c
    return d.compiled(
        "turns.fail_responses",
        lambda: (
            sa.update(responses)
            .where(d.one_of(r.turn_id, "expired"))
            .values(status=FAILED)
            .returning(r.response_id, r.body)
        ),
    )


def fail_turns(d: SqlDialect) -> Compiled:
    """Fail the turns in list ``:expired`` as interrupted, with error message ``:message``, at
    ``:completed_at``."""
    return d.compiled(
        "turns.fail_turns",
        lambda: (
            sa.update(turns)
            .where(d.one_of(T.turn_id, "expired"))
            .values(status=FAILED, error_code=INTERRUPTED, error_message=p("message"), completed_at=p("completed_at"))
        ),
    )


def resume(d: SqlDialect, *, overrides: bool, pending: bool) -> Compiled:
    """Move turn ``:turn_id`` of session ``:session_id`` to running under lease ``:lease_until`` if its status
    is ``:expected`` (``overrides``: with ``:overrides``; ``pending``: only while it waits on step
    ``:pending``); returns its :data:`TURN_COLUMNS`."""

    def build() -> sa.Update:
        where = [T.turn_id == p("turn_id"), T.session_id == p("session_id"), T.status == p("expected")]
        if pending:
            s = steps.c
            waits = sa.select(ONE).where(s.turn_id == p("turn_id"), s.step_id == p("pending"), s.pending)
            where.append(waits.exists())
        values = {"status": IN_PROGRESS, "lease_until": p("lease_until")}
        if overrides:
            values["overrides"] = p("overrides")
        return sa.update(turns).where(*where).values(values).returning(*TURN_COLUMNS)

    return d.compiled(("turns.resume", overrides, pending), build)
