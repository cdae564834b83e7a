"""Every kind of record the kernel stores: the whole schema, as declarations.

A new kind is one :class:`~ferryman.storage.kernel.model.Kind` here, listed in
:data:`SCHEMA`, and a :class:`~ferryman.storage.domain.records.Records` over it;
no backend changes.
"""

from __future__ import annotations

from ferryman.storage.kernel.model import Kind, Schema

MODEL = Kind("model")
"""A model registered at run time (``POST /v1/models``); its id is the caller's identifier."""
TOOLGROUP = Kind("toolgroup")
"""A toolgroup registered at run time (an MCP server)."""
SHIELD = Kind("shield")
"""A shield registered at run time."""
AGENT = Kind("agent")
"""An agent (``POST /v1/agents``): its config, never changed once created."""
SESSION = Kind("session", indexes=("agent_id",))
"""A session's own fields (``SessionRecord``), owned by its creator; a root, listed by agent (none when the
Responses or Conversations API opened it, ``HELD_AGENT`` for a holder of forks' shared turns). Its turns and
running state are the turn store's, under its anchor of the same id, created and deleted with the record; an
agent's deletion deletes them one by one, as it always has, so a session opened beside it is not orphaned."""
API_KEY = Kind("api_key", noun="API key", indexes=("key_hash",))
"""An API key, by its name; found by the hash of the key on every request."""
USAGE = Kind("usage")
"""The tokens one run of a turn or response used, owned by its caller (a root: it outlives its agent)."""

AUDIT = Kind("audit", noun="audit record", indexes=("principal", "resource", "outcome"))
"""An audit record (a create, a delete, a denial), owned by whoever acted; listed by its most selective fields."""
MEMORY_BLOCK = Kind("memory_block", noun="memory block", indexes=("agent_id",))
"""A block of an agent's memory (``<agent_id>/<label>``), owned by whoever wrote it first; listed by agent."""
WEBHOOK_DELIVERY = Kind("webhook_delivery", noun="webhook delivery", indexes=("run_id", "session_id"))
"""An event on its way to a run's webhook (the outbox): owned by the run's caller, leased by the replica posting it
(status ``pending`` while attempts remain, its lease ending when the next one is due); listed by run, deleted
with its run (by run, or by a turn's session)."""

WEBHOOK_ARM = Kind("webhook_arm", noun="armed webhook")
"""A run's webhook delivery to come, by its delivery id, written when the run starts and deleted when its delivery
is written: the server's own, never listed. Its lease ends when a replica should check that the run's end was not
lost (the process died between storing the run's outcome and its delivery)."""

SERVER_SECRET = Kind("server_secret", noun="server secret")
"""A secret the server generated for one use (``webhooks`` signing when ``webhooks.secret`` is unset,
``compaction`` when ``context.secret`` is), written once and shared by every replica of the store; the
server's own, never listed or returned (see :mod:`.server_secrets`)."""

APPROVAL = Kind("approval", indexes=("scope", "agent_id", "source"))
"""A server tool call held for approval (a paused turn's, or a response's ``mcp_approval_request``), owned like
the session or response that holds it; its status is ``pending`` until decided. ``scope`` is the turn's session,
the conversation's session of a response made in one, or else the response, whose deletion deletes it. A decided
call is leased until its run is continued: one whose lease ran out is claimed by the sweep that continues it."""

SCHEDULE = Kind("schedule", indexes=("agent_id",))
"""A cron schedule starting an agent's turns, owned by its creator; listed by agent. Its status is ``active`` or
``paused``, and its lease ends at its next tick (none while paused), so replicas claim it when due."""
SCHEDULE_RUN = Kind("schedule_run", noun="schedule run", parents=("schedule",))
"""One tick a schedule fired (the turn it started), under its schedule, whose deletion deletes it."""
FILE = Kind("file", indexes=("purpose",))
"""An uploaded file's metadata (its bytes are in the blob store under its id), owned by its uploader; listed by
purpose. Its attachments to vector stores and their chunks are the knowledge store's, deleted with it."""
VECTOR_STORE = Kind("vector_store", noun="vector store")
"""A vector store's settings (``VectorStoreRecord``), owned by its creator; a root, listed in creation order. What
the chunk index keeps of it (its attachments, chunks, their versions) is the knowledge store's, under
the same id, created and deleted with the record."""
FILE_BATCH = Kind("file_batch", noun="file batch", parents=("vector_store",))
"""A batch of files attached together (``FileBatchRecord``), under its vector store, whose deletion deletes it; no
owner of its own: it is reached through its store. Its files are the knowledge store's attachments, each naming
the batch, attached in the same write as the record; its status and counts come from them."""
CONVERSATION = Kind("conversation")
"""A conversation (``ConversationRecord``), owned by its creator; a root, listed in creation order; the record is
all there is of it (a response's start holds it). Its items are records under it (``ITEM``)."""
RESPONSE = Kind("response", indexes=("conversation_id",), logs=("events",))
"""A stored response's listing record (``ResponseHead``: its id, its conversation, its creation time), owned by its
creator; a root, listed in creation order, or by conversation. Its ``events`` log holds its stream's events (their
JSON data, numbered from 0) once it ended, for replay; its input items are records under it. The response itself
(its wire form and turn) is the responses store's, under the same id, written and deleted with the record."""
ITEM = Kind("item", parents=("conversation", "response", "fork"))
"""An item of a conversation, of a response's input, or of a fork's holder (see :mod:`.items`), under its
container, in the order it was added; its id is ``<container id>/<item id>``, so an item id may stand in several
containers. It has no owner of its own: it is reached through its container, whose deletion deletes it. A
fork's lineage has its conversation's id, so deleting a lineage deletes that conversation's items too: a lineage
goes only once its conversation is gone or was never written (``services/conversation_forks.py``)."""
FORK = Kind("fork", indexes=("source",))
"""A fork's lineage, by the fork's id (a session's, a conversation's, or a holder's of a deleted original's kept
part): the session or conversation it shares history with (``source``) and the last turn or item it shares;
owned by the fork's creator, listed by source (see :mod:`.forks`)."""

SCHEMA = Schema(
    [
        MODEL,
        TOOLGROUP,
        SHIELD,
        AGENT,
        SESSION,
        API_KEY,
        USAGE,
        AUDIT,
        MEMORY_BLOCK,
        WEBHOOK_DELIVERY,
        WEBHOOK_ARM,
        SERVER_SECRET,
        APPROVAL,
        SCHEDULE,
        SCHEDULE_RUN,
        FORK,
        FILE,
        VECTOR_STORE,
        FILE_BATCH,
        CONVERSATION,
        RESPONSE,
        ITEM,
    ]
)
"""The kinds every backend's kernel stores."""
