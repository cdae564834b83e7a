"""``python -m bench.owner_listing``: a caller's page of records among many of another caller, per backend.

Issue #22 asks that, with auth on, a page of 20 among N records of other principals cost at most 1.5x the same page
with auth off. This measures it for agents, files, vector stores, conversations, an agent's sessions and responses
(``--kinds``) on each backend (SQLite always; PostgreSQL and Redis when their URLs are given). Files are listed
through ``FileService.list``, what ``GET /v1/files`` runs (newest first, the caller's filter in the kernel's query);
vector stores through ``VectorStoreService.list``, what ``GET /v1/vector_stores`` runs (the same, then one read of
the page's attachment counts); conversations through ``ConversationService.listing``, what ``GET /v1/conversations``
runs; an agent's sessions through ``SessionReads.page``, the page ``GET /v1/agents/{id}/sessions`` lists before it
reads their turns (every seeded session is one agent's, found by the kind's agent index); responses as
``ResponseReads.list`` reads ``GET /v1/responses``' page before their input items (the records' page filtered in the
query, then the page's responses read whole, newest first: the caller's, made last, are started through the store,
the others' are records alone, which no page of 20 reaches but ``--mine-first``'s with auth off, which then reads no
rows: compare that mode's responses on their auth-on figure alone). Their records are seeded through the kernel,
without the chunk index's, the items' or the sessions' anchors' rows, which a list does not read. Agents are listed
on the ``kernel`` path that ``GET /v1/agents`` runs since slice C: ``storage.domain.agents`` over the backend's
kernel, the caller's access filter passed in the kernel ``Page`` (a ``WHERE`` on the owner terms, a per-term sorted
set on Redis). The ``owned`` path it was compared with (the ``Store`` agent methods behind
``services.owned_store.OwnedStore``, a list filtered in Python in batches of 100) left with those methods; its
figures are in ``docs/design/storage-kernel.md``.

The database holds N records of ``other`` created first, then 20 of ``me`` (``--mine-first``: the other way
round, where a plan that walks records in creation order reads all of ``other``'s); ``on`` lists ``me``'s first page of
20, ``off`` the first page of 20 with no caller. Figures are the median and p95 of ``--repeat`` calls, in
milliseconds, after two warm-up calls. On PostgreSQL the tables are analyzed after seeding (``--no-analyze``
leaves them as a bulk load does): the planner's statistics of a table that grew from empty in seconds make it
drive the filtered page from the wrong index, which autovacuum corrects within a minute or so. Nothing here
runs as a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ferryman.api.agents import Agent, AgentConfig
from ferryman.api.content import UserMessage
from ferryman.api.responses import Response
from ferryman.auth.policy import AccessPolicy
from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.ids import new_id, utcnow
from ferryman.inference.router import ModelRouter
from ferryman.knowledge.blobs import MemoryBlobStore
from ferryman.services.access import Access
from ferryman.services.checked_records import CheckedRecords
from ferryman.services.files import FileService, new_file_id
from ferryman.services.record_guard import RecordGuard
from ferryman.services.responses.conversations import ConversationService
from ferryman.services.session_reads import SessionReads
from ferryman.services.vector_stores import VectorStoreService
from ferryman.storage.base import ConversationRecord, ResponseRecord, ResponseStart, SessionRecord, Store, TurnRecord
from ferryman.storage.domain.agents import agents, sessions
from ferryman.storage.domain.conversations import conversations
from ferryman.storage.domain.files import files
from ferryman.storage.domain.kinds import AGENT
from ferryman.storage.domain.responses import ResponseHead, response_heads
from ferryman.storage.domain.vector_stores import vector_stores
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.knowledge import FileRecord, VectorStoreRecord
from ferryman.storage.sql.seam import rows as statement

from .knowledge_backends import backend_arguments, chosen, report, sites

ME = Principal(PrincipalKind.API_KEY, "me")
OTHER = Principal(PrincipalKind.API_KEY, "other")
PAGE = 20
BATCH = 500
KINDS = ("agent", "file", "vector_store", "conversation", "session", "response")
SHARED_AGENT = "agent_shared"
"""The agent every seeded session belongs to (sessions of callers who may all read it)."""


def _agent() -> Agent:
    config = AgentConfig(model="m", instructions="be brief", toolgroups=["builtin::calculator"])
    return Agent(agent_id=new_id(), agent_config=config, created_at=utcnow())


async def timed(call: Callable[[], Awaitable[Any]], repeat: int) -> dict[str, float]:
    """The median and p95 of ``repeat`` calls, in milliseconds, after two warm-ups."""
    for _ in range(2):
        await call()
    times: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {"median_ms": statistics.median(times), "p95_ms": times[min(len(times) - 1, int(len(times) * 0.95))]}


def _file() -> FileRecord:
    return FileRecord(new_file_id(), "notes.txt", "assistants", 11, int(time.time()), "text/plain")


def _vector_store() -> VectorStoreRecord:
    return VectorStoreRecord(new_id("vs"), "notes", int(time.time()), "m", 3)


def _conversation() -> ConversationRecord:
    return ConversationRecord(f"conv_{new_id()}", new_id(), {"topic": "notes"}, int(time.time()))


def _response_start() -> ResponseStart:
    """A response outside a conversation, in a session of its own, as the responses service starts one."""
    session = SessionRecord(new_id(), None, "response", utcnow())
    turn = TurnRecord(new_id(), session.session_id, None, "in_progress", [UserMessage(content="hi")], utcnow())
    response = Response(id=f"resp_{new_id()}", created_at=int(time.time()), status="in_progress", model="m")
    record = ResponseRecord(response, turn.turn_id, session.session_id)
    return ResponseStart(record, turn, list(turn.input_messages), (), session)


def _put(store: Store, kind: str, owner: Owner | None) -> ops.Put:
    if kind == "response":
        head = ResponseHead(f"resp_{new_id()}", None, int(time.time()))
        return response_heads(store.kernel).put(head, owner=owner)
    if kind == "session":
        return sessions(store.kernel).put(SessionRecord(new_id(), SHARED_AGENT, "talk", utcnow()), owner=owner)
    if kind == "agent":
        return agents(store.kernel).put(_agent(), owner=owner)
    if kind == "file":
        return files(store.kernel).put(_file(), owner=owner)
    if kind == "conversation":
        return conversations(store.kernel).put(_conversation(), owner=owner)
    return vector_stores(store.kernel).put(_vector_store(), owner=owner)


async def _seed_kernel(store: Store, kind: str, others: int, mine_first: bool = False) -> None:
    access = Access(AccessPolicy())
    order = ((ME, PAGE), (OTHER, others)) if mine_first else ((OTHER, others), (ME, PAGE))
    for who, count in order:
        owner = access.owner(who)
        if kind == "response" and who is ME:  # read whole by a page: started as the service starts them
            for _ in range(count):
                await store.start_response(_response_start(), owner=owner)
            continue
        puts = [_put(store, kind, owner) for _ in range(count)]
        for start in range(0, len(puts), BATCH):
            await store.kernel.write(puts[start : start + BATCH])


async def _measure_kernel(store: Store, kind: str, repeat: int) -> dict[str, dict[str, float]]:
    records, access = agents(store.kernel), Access(AccessPolicy())
    uploads = FileService(store.kernel, access, store, MemoryBlobStore())
    stores = VectorStoreService(store, store.kernel, access, ModelRouter([]), uploads)
    talks = ConversationService(store, CheckedRecords(conversations(store.kernel), access), RecordGuard(store, access))
    opened = SessionReads(store.kernel, access)
    started = CheckedRecords(response_heads(store.kernel), access)

    async def listed(who: Principal | None) -> None:
        if kind == "agent":
            page = await records.page(allow=access.filter(who, "read", AGENT), offset=0, limit=PAGE)
            assert len(page.items) == PAGE
            return
        if kind == "session":
            assert len((await opened.page(who, SHARED_AGENT, 0, PAGE)).items) == PAGE
            return
        if kind == "response":
            heads = await started.page(who, None, PAGE, "desc")
            assert len(heads.items) == PAGE
            await store.responses_by_id([head.response_id for head in heads.items])
            return
        with acting_as(who):
            if kind == "file":
                assert len((await uploads.list(None, None, PAGE, "desc")).data) == PAGE
            elif kind == "conversation":
                assert len((await talks.listing(None, PAGE, "desc")).items) == PAGE
            else:
                assert len((await stores.list(None, PAGE, "desc")).data) == PAGE

    return {"on": await timed(lambda: listed(ME), repeat), "off": await timed(lambda: listed(None), repeat)}


async def _analyze(store: Store) -> None:
    """Refresh PostgreSQL's statistics of the store's tables (as autovacuum would, a while after a bulk load)."""
    await store._db.write(statement("ANALYZE"))  # type: ignore[attr-defined]


async def run(
    others: int,
    repeat: int,
    postgres: str | None,
    redis: str | None,
    *,
    only: set[str],
    kinds: tuple[str, ...] = ("agent",),
    analyze: bool = True,
    mine_first: bool = False,
) -> list[dict[str, Any]]:
    """Every figure: one row per backend, kind and auth setting."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend, make_site in sites(Path(tmp), postgres, redis, chosen(only)).items():
            for kind in kinds:
                async with make_site() as site, site.open() as store:
                    await _seed_kernel(store, kind, others, mine_first)
                    if backend == "postgres" and analyze:
                        await _analyze(store)
                    for auth, figures in (await _measure_kernel(store, kind, repeat)).items():
                        rows.append({"backend": backend, "path": kind, "others": others, "auth": auth, **figures})
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| backend | kind | others | auth on (median / p95 ms) | auth off (median / p95 ms) | on/off |",
        "|---|---|---|---|---|---|",
    ]  # noqa: E501
    keyed = {(r["backend"], r["path"], r["others"], r["auth"]): r for r in rows}
    for backend, path, others in dict.fromkeys((r["backend"], r["path"], r["others"]) for r in rows):
        on, off = keyed[(backend, path, others, "on")], keyed[(backend, path, others, "off")]
        ratio = on["median_ms"] / off["median_ms"]
        lines.append(
            f"| {backend} | {path} | {others:,} | {on['median_ms']:.2f} / {on['p95_ms']:.2f} "
            f"| {off['median_ms']:.2f} / {off['p95_ms']:.2f} | {ratio:.1f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table, and write the rows as JSON when ``--out`` is given."""
    parser = argparse.ArgumentParser(prog="python -m bench.owner_listing", description=__doc__.splitlines()[0])
    parser.add_argument("--others", type=int, nargs="+", default=[5000], help="agents of the other caller")
    parser.add_argument("--repeat", type=int, default=50, help="timed calls per figure")
    backend_arguments(parser)
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS, help="what to list")
    parser.add_argument(
        "--mine-first", action="store_true", help="the caller's records are the oldest (others' made after them)"
    )
    parser.add_argument("--no-analyze", action="store_true", help="leave PostgreSQL's statistics stale after seeding")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for others in args.others:
        measured = run(
            others,
            args.repeat,
            args.postgres,
            args.redis,
            only=set(args.only),
            kinds=tuple(args.kinds),
            analyze=not args.no_analyze,
            mine_first=args.mine_first,
        )
        rows += asyncio.run(measured)
    report(_table(rows), rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
