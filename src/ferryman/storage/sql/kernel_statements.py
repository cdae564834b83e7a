"""The SQL kernel's statements, built with SQLAlchemy Core once per shape (see :mod:`.dialects`).

Each function returns the :class:`~.dialects.Compiled` text of one statement for a dialect; parameters are
bound by name when the statement runs. A shape is whatever changes the text (which options a page uses, the
structure of a filter); values never do, so the cache holds one entry per shape.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.elements import ClauseElement

from ferryman.storage.kernel.filters import All, And, Filter, IdIn, Not, Or, Terms
from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.tables import record_logs, record_terms, records

R = records.c
REC_COLUMNS = (R.kind, R.id, R.parent, R.seq, R.at, R.owner, R.body, R.status, R.lease_until)
"""A record's columns in the order :func:`~.kernel_rows.record` reads them."""
INDEX_COLUMNS = (R.k1, R.k2, R.k3)
MAX_TERM_ARMS = 8
"""A filter of up to this many terms reads each term's index in order (more: one lookup of them all, sorted)."""


def _this(kind_param: str = "kind", id_param: str = "id") -> sa.ColumnElement[bool]:
    return sa.and_(R.kind == p(kind_param), R.id == p(id_param))


def _seq_of(id_param: str) -> sa.ScalarSelect[Any]:
    """The seq of the record of ``:kind`` with id ``:<id_param>`` (NULL when missing)."""
    inner = records.alias("mark")
    return sa.select(inner.c.seq).where(inner.c.kind == p("kind"), inner.c.id == p(id_param)).scalar_subquery()


# -- records ---------------------------------------------------------------------------------------------------


def get_record(d: SqlDialect, *, lock: bool = False) -> Compiled:
    """The record ``(:kind, :id)``; ``lock``: locked for the rest of the write unit (PostgreSQL), against
    other writes of it but not against a unit that holds it as a key (``FOR KEY SHARE``: a response's start
    holds its conversation). A write that moves its exclusive ``slot`` (a unique key) takes the stronger lock
    itself when it updates the row."""

    def build() -> ClauseElement:
        query = sa.select(*REC_COLUMNS).where(_this())
        return query.with_for_update(of=records, key_share=True) if lock else query

    return d.compiled(("get", lock), build)


def get_many(d: SqlDialect) -> Compiled:
    """The records of ``:kind`` whose ids are in list ``:ids``."""
    return d.compiled("get_many", lambda: sa.select(*REC_COLUMNS).where(R.kind == p("kind"), d.one_of(R.id, "ids")))


def find_parent(d: SqlDialect) -> Compiled:
    """The seqs of the records with id ``:parent`` of the kinds in list ``:kinds`` (one each at most)."""
    # Unordered: ordered by seq, a plan made for any id (a prepared statement's generic plan) can walk every record
    # in creation order to the first match; by kind and id, each is one lookup of the unique key.
    return d.compiled("parent", lambda: sa.select(R.seq).where(R.id == p("parent"), d.one_of(R.kind, "kinds")))


def slot_holder(d: SqlDialect) -> Compiled:
    """Another record of ``:kind`` holding slot ``:slot`` (not ``:id``)."""
    return d.compiled(
        "slot",
        lambda: sa.select(R.id, R.status).where(R.kind == p("kind"), R.slot == p("slot"), R.id != p("id")).limit(1),
    )


INSERTED = ("kind", "id", "parent", "parent_seq", "owner_key", "owner", "body", "status", "lease_until", "at")
"""A new record's columns but its index values and slot."""


def insert_record(d: SqlDialect) -> Compiled:
    """A new record, unless ``(:kind, :id)`` is taken; returns its seq (no row when taken)."""

    def build() -> ClauseElement:
        values = {name: p(name) for name in (*INSERTED, "k1", "k2", "k3", "slot")}
        return d.insert(records).values(values).on_conflict_do_nothing(index_elements=["kind", "id"]).returning(R.seq)

    return d.compiled("insert", build)


def insert_records(d: SqlDialect, count: int) -> Compiled:
    """``count`` new records in order, their columns ``:<name>_<n>`` for row ``n``, each unless its
    ``(kind, id)`` is taken; returns the seq and id of each inserted."""

    def build() -> ClauseElement:
        names = (*INSERTED, "k1", "k2", "k3", "slot")
        rows = [{name: p(f"{name}_{n}") for name in names} for n in range(count)]
        insert = d.insert(records).values(rows).on_conflict_do_nothing(index_elements=["kind", "id"])
        return insert.returning(R.seq, R.id)

    return d.compiled(("insert_many", count), build)


def update_record(d: SqlDialect) -> Compiled:
    """Replace the body, status, lease, index values and slot of record ``:seq``."""

    def build() -> ClauseElement:
        names = ("body", "status", "lease_until", "k1", "k2", "k3", "slot")
        return sa.update(records).where(R.seq == p("seq")).values({name: p(name) for name in names})

    return d.compiled("update", build)


def insert_terms(d: SqlDialect) -> Compiled:
    """One owner term of record ``:seq`` (run once per term)."""
    return d.compiled("terms", lambda: sa.insert(record_terms).values(kind=p("kind"), term=p("term"), seq=p("seq")))


def delete_record(d: SqlDialect) -> Compiled:
    """Delete ``(:kind, :id)``; its children, logs and terms go with it (foreign keys cascade)."""
    return d.compiled("delete", lambda: sa.delete(records).where(_this()))


def children_of(d: SqlDialect) -> Compiled:
    """The ids of the records of ``:kind`` whose parent is one of list ``:ids``."""
    return d.compiled(
        "children_of", lambda: sa.select(R.id).where(R.kind == p("kind"), d.one_of(R.parent, "ids")).order_by(R.id)
    )


def delete_many(d: SqlDialect) -> Compiled:
    """Delete the records of ``:kind`` whose ids are in list ``:ids`` (what is below them cascades)."""
    return d.compiled("delete_many", lambda: sa.delete(records).where(R.kind == p("kind"), d.one_of(R.id, "ids")))


def renew(d: SqlDialect) -> Compiled:
    """Move to ``:until`` the leases of the records of ``:kind`` in list ``:ids`` that hold one."""
    return d.compiled(
        "renew",
        lambda: (
            sa.update(records)
            .where(R.kind == p("kind"), d.one_of(R.id, "ids"), R.lease_until.is_not(None))
            .values(lease_until=p("until"))
            .returning(R.id)
        ),
    )


def expired(d: SqlDialect) -> Compiled:
    """Up to ``:limit`` records of ``:kind`` after ``:after_seq`` whose lease ended before ``:now``, locked."""
    return d.compiled(
        "expired",
        lambda: (
            sa.select(*REC_COLUMNS)
            .where(R.kind == p("kind"), R.lease_until < p("now"), R.seq > p("after_seq"))
            .order_by(R.seq)
            .limit(p("limit"))
            .offset(0)
            .with_for_update(of=records, skip_locked=True)
        ),
    )


def claim(d: SqlDialect, *, with_status: bool) -> Compiled:
    """Set record ``:seq``'s lease to ``:lease_until`` (and its ``:status`` and ``:slot``)."""

    def build() -> ClauseElement:
        values = {"lease_until": p("lease_until")}
        if with_status:
            values |= {"status": p("status"), "slot": p("slot")}
        return sa.update(records).where(R.seq == p("seq")).values(values)

    return d.compiled(("claim", with_status), build)


def count_status(d: SqlDialect, where: int | None) -> Compiled:
    """Records of ``:kind`` under ``:parent`` (with index ``where`` equal to ``:value``) per status."""

    def build() -> ClauseElement:
        conditions = [R.kind == p("kind"), R.parent == p("parent"), R.status.is_not(None)]
        if where is not None:
            conditions.append(INDEX_COLUMNS[where] == p("value"))
        return sa.select(R.status, sa.func.count()).where(*conditions).group_by(R.status)

    return d.compiled(("count_status", where), build)


def chain(d: SqlDialect, via: int) -> Compiled:
    """Record ``(:kind, :id)`` and those its index ``via`` points to, nearest first, at most ``:limit``."""

    def build() -> ClauseElement:
        pointer = INDEX_COLUMNS[via]
        start = (
            sa.select(R.seq, pointer.label("next"), sa.literal_column("1", sa.Integer()).label("depth"))
            .where(_this())
            .cte("chain", recursive=True)
        )
        step = records.alias("step")
        follow = sa.select(
            step.c.seq, step.c[pointer.name], start.c.depth + sa.literal_column("1", sa.Integer())
        ).where(step.c.kind == p("kind"), step.c.id == start.c.next, start.c.depth < p("limit"))
        walk = start.union_all(follow)
        return sa.select(*REC_COLUMNS).join(walk, walk.c.seq == R.seq).order_by(walk.c.depth)

    return d.compiled(("chain", via), build)


# -- logs ------------------------------------------------------------------------------------------------------

L = record_logs.c


def log_head(d: SqlDialect) -> Compiled:
    """Record ``(:kind, :id)``'s seq and the last number of its log ``:channel`` (NULL: empty), locked."""

    def build() -> ClauseElement:
        last = sa.select(sa.func.max(L.n)).where(L.rec_seq == R.seq, L.channel == p("channel")).scalar_subquery()
        return sa.select(R.seq, last).where(_this()).with_for_update(of=records, key_share=True)

    return d.compiled("log_head", build)


def insert_entry(d: SqlDialect) -> Compiled:
    """One log entry (run once per entry)."""
    return d.compiled(
        "entry",
        lambda: sa.insert(record_logs).values(rec_seq=p("seq"), channel=p("channel"), n=p("n"), body=p("body")),
    )


def clear_log(d: SqlDialect) -> Compiled:
    """Every entry of record ``:seq``'s log ``:channel``."""
    return d.compiled(
        "clear_log", lambda: sa.delete(record_logs).where(L.rec_seq == p("seq"), L.channel == p("channel"))
    )


def events(d: SqlDialect) -> Compiled:
    """Entries of ``(:kind, :id)``'s log ``:channel`` numbered above ``:after``, at most ``:limit``."""
    # The record's seq first, then a range of the log's primary key: joined instead, a plan made for any record
    # (a prepared statement's generic plan) can scan every record's log for the order it asks for.
    return d.compiled(
        "events",
        lambda: (
            sa.select(L.n, L.body)
            .where(L.rec_seq == _seq_of("id"), L.channel == p("channel"), L.n > p("after"))
            .order_by(L.n)
            .limit(p("limit"))
            .offset(0)
        ),
    )


def log_count(d: SqlDialect) -> Compiled:
    """How many entries ``(:kind, :id)``'s log ``:channel`` holds."""
    return d.compiled(
        "log_count",
        lambda: (
            sa.select(sa.func.count())
            .select_from(record_logs)
            .where(L.rec_seq == _seq_of("id"), L.channel == p("channel"))
        ),
    )


def history(d: SqlDialect, *, through: bool) -> Compiled:
    """Log ``:channel`` of ``:kind``'s records under ``:parent`` with a status in ``:statuses``, in order.

    With ``through``: record ``:through`` too, and nothing created after it (nothing when it is missing).
    """

    def build() -> ClauseElement:
        wanted: sa.ColumnElement[bool] = d.one_of(R.status, "statuses")
        conditions = [R.kind == p("kind"), R.parent == p("parent")]
        if through:
            mark = records.alias("mark")
            last = sa.select(mark.c.seq).where(
                mark.c.kind == p("kind"), mark.c.id == p("through"), mark.c.parent == p("parent")
            )
            wanted = sa.or_(wanted, R.id == p("through"))
            conditions.append(R.seq <= last.scalar_subquery())
        return (
            sa.select(R.id, L.n, L.body)
            .join(record_logs, sa.and_(L.rec_seq == R.seq, L.channel == p("channel")))
            .where(*conditions, wanted)
            .order_by(R.seq, L.n)
        )

    return d.compiled(("history", through), build)


# -- filtered pages --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PageShape:
    """What changes a page's text: which options it uses, and its filter's structure."""

    any_parent: bool
    where: int | None
    statuses: bool
    since: bool
    until: bool
    after: bool
    desc: bool
    allow: Any


def filter_shape(flt: Filter) -> tuple[Any, dict[str, Any]]:
    """The structure of ``flt`` (a cache key) and its values by parameter name (``f0``, ``f1`` …)."""
    values: dict[str, Any] = {}

    def walk(node: Filter) -> Any:
        name = f"f{len(values)}"
        if isinstance(node, Terms) and 1 <= len(node.terms) <= MAX_TERM_ARMS:
            arms = []
            for term in sorted(node.terms):
                arms.append(("term", f"f{len(values)}"))
                values[arms[-1][1]] = term
            return arms[0] if len(arms) == 1 else ("or", tuple(arms))
        if isinstance(node, Terms | IdIn):
            values[name] = node.terms if isinstance(node, Terms) else node.ids
            return ("terms" if isinstance(node, Terms) else "ids", name)
        if isinstance(node, Not):
            return ("not", walk(node.inner))
        if isinstance(node, And | Or):
            return ("and" if isinstance(node, And) else "or", tuple(walk(part) for part in node.parts))
        return ("all",) if isinstance(node, All) else ("nothing",)

    return walk(flt), values


def _arms(shape: Any) -> list[Any] | None:
    """The parts of a filter that is terms or ids, or a union of them; None for any other shape."""
    if shape[0] in ("term", "terms", "ids"):
        return [shape]
    if shape[0] == "or":
        parts = [_arms(part) for part in shape[1]]
        if all(part is not None for part in parts):
            return [arm for part in parts if part is not None for arm in part]
    return None


def _seqs(d: SqlDialect, arm: Any) -> sa.Select[Any]:
    """The seqs of the records of ``:kind`` one arm (see :func:`_arms`) admits, read from an index."""
    if arm[0] == "ids":
        named = records.alias("named")
        return sa.select(named.c.seq).where(named.c.kind == p("kind"), d.one_of(named.c.id, arm[1]))
    term = record_terms.c.term
    held = term == p(arm[1]) if arm[0] == "term" else d.one_of(term, arm[1])
    return sa.select(record_terms.c.seq).where(record_terms.c.kind == p("kind"), held)


def _condition(d: SqlDialect, shape: Any) -> sa.ColumnElement[bool]:
    """The filter as a condition on ``records`` (what a page uses where its filter has no arms)."""
    tag = shape[0]
    if tag in ("term", "terms", "ids"):
        return R.seq.in_(_seqs(d, shape))
    if tag == "not":
        return sa.not_(_condition(d, shape[1]))
    if tag in ("and", "or"):
        parts = [_condition(d, part) for part in shape[1]]
        return sa.and_(*parts) if tag == "and" else sa.or_(*parts)
    return sa.true() if tag == "all" else sa.false()


def _conditions(d: SqlDialect, shape: PageShape, order: sa.ColumnElement[Any]) -> list[sa.ColumnElement[bool]]:
    """The page's conditions but its filter (``order``: the seq column it is read in order of)."""
    conditions: list[sa.ColumnElement[bool]] = [R.kind == p("kind")]
    if not shape.any_parent:
        conditions.append(R.parent == p("parent"))
    if shape.where is not None:
        conditions.append(INDEX_COLUMNS[shape.where] == p("value"))
    if shape.statuses:
        conditions.append(d.one_of(R.status, "statuses"))
    if shape.since:
        conditions.append(R.at >= p("since"))
    if shape.until:
        conditions.append(R.at < p("until"))
    return conditions + _after(shape, order)


def _after(shape: PageShape, order: sa.ColumnElement[Any]) -> list[sa.ColumnElement[bool]]:
    """The cursor's condition, if the page has one: past the ``:after`` record, in the page's direction."""
    if not shape.after:
        return []
    return [order < _seq_of("after") if shape.desc else order > _seq_of("after")]


def _arm_page(d: SqlDialect, shape: PageShape, arm: Any, limit: str, offset: str) -> sa.Select[Any]:
    """The page of the records one arm admits, read from its index: one term in the order of its index."""
    if arm[0] == "term":
        order: sa.ColumnElement[Any] = record_terms.c.seq
        where = [record_terms.c.kind == p("kind"), record_terms.c.term == p(arm[1])]
        if not d.is_sqlite:
            return _looked_up(d, shape, where, limit, offset)
        query = sa.select(*REC_COLUMNS).select_from(record_terms).join(records, R.seq == record_terms.c.seq)
    else:
        order, query, where = R.seq, sa.select(*REC_COLUMNS), [R.seq.in_(_seqs(d, arm))]
    ordered = order.desc() if shape.desc else order.asc()
    conditions = [*_conditions(d, shape, order), *where]
    return query.where(*conditions).order_by(ordered).limit(p(limit)).offset(p(offset))


def _looked_up(
    d: SqlDialect, shape: PageShape, where: list[sa.ColumnElement[bool]], limit: str, offset: str
) -> sa.Select[Any]:
    """A term's page on PostgreSQL: its rows in the order of ``record_terms``'s primary key, each record looked up.

    PostgreSQL may plan a prepared statement once for any term (its generic plan), guessing that a term holds a
    share of every record; it then merges the term's rows with all records in creation order, reading everyone
    else's records up to the caller's oldest. A lateral subquery, which ``OFFSET 0`` keeps from being flattened
    into a join, leaves it one plan: a lookup of each record from its term's row (and ``record_terms``'s index on
    ``seq`` is a hash, so the term's rows come in order from the primary key alone).
    """
    order = record_terms.c.seq
    record = _conditions(d, dataclasses.replace(shape, after=False), order)
    looked_up = sa.select(*REC_COLUMNS).where(R.seq == order, *record).offset(sa.literal_column("0")).lateral("found")
    # The cursor bounds the scan of the term's rows, outside: inside, it would only filter what was read.
    bound = _after(shape, order)
    ordered = order.desc() if shape.desc else order.asc()
    query = sa.select(*looked_up.c).select_from(record_terms).join(looked_up, sa.true()).where(*where, *bound)
    return query.order_by(ordered).limit(p(limit)).offset(p(offset))


def page(d: SqlDialect, shape: PageShape) -> Compiled:
    """A page of ``:kind`` in creation order: ``:limit`` rows after skipping ``:offset``, as ``shape`` says.

    Parameters by option: ``:parent``, ``:value`` (the index), ``:statuses``, ``:since``, ``:until``,
    ``:after`` (an id of the kind), ``:window`` (limit + offset), and the filter's ``f0``… A filter of terms
    and ids (an owner's, or a policy's grants) is read from their indexes, one term in the order of
    ``record_terms``'s primary key (kind, term, seq): the page costs about its own size, whatever others own.
    Several arms each read their first ``:window`` records, and the page is taken from their union.
    """

    def build() -> ClauseElement:
        arms = _arms(shape.allow)
        if arms is None:
            conditions = _conditions(d, shape, R.seq)
            if shape.allow != ("all",):
                conditions.append(_condition(d, shape.allow))
            ordered = R.seq.desc() if shape.desc else R.seq.asc()
            query = sa.select(*REC_COLUMNS).where(*conditions)
            return query.order_by(ordered).limit(p("limit")).offset(p("offset"))
        if len(arms) == 1:
            return _arm_page(d, shape, arms[0], "limit", "offset")
        union = sa.union(*(sa.select(_arm_page(d, shape, arm, "window", "zero").subquery()) for arm in arms))
        merged = union.subquery("merged")
        ordered = merged.c.seq.desc() if shape.desc else merged.c.seq.asc()
        return sa.select(merged).order_by(ordered).limit(p("limit")).offset(p("offset"))

    return d.compiled(("page", shape), build)
