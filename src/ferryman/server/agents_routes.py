"""Routes of the Agents API, served under ``/v1`` and ``/v1alpha``."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.agents import (
    Agent,
    AgentCreated,
    CreateAgentRequest,
    CreateSessionRequest,
    CreateTurnRequest,
    ForkSessionRequest,
    PaginatedResponse,
    ResumeTurnRequest,
    Session,
    SessionCreated,
    StepResponse,
    Turn,
    TurnStreamChunk,
    TurnStreamError,
)
from ferryman.errors import InvalidRequestError
from ferryman.services.agents import LiveTurn
from ferryman.services.turn_stream import failed_turn

from .contract import LAST_EVENT_ID, PROVIDER_DATA, Endpoint, EventStream, NonNegative, Param, Positive
from .http import (
    JSONModelResponse,
    event_stream,
    last_event_id,
    parse_body,
    provider_data,
    query_int,
    query_list,
    services,
)
from .idempotent_routes import run_ended, take_key


async def _answer(request: Request, live: LiveTurn, stream: bool | None) -> Response:
    if stream:
        return event_stream(live.channel.read())
    turn: Turn = await asyncio.shield(live.task)
    run_ended(request)
    if turn.status == "failed" and turn.error is not None:
        raise failed_turn(turn.turn_id, turn.error.code, turn.error.message)
    return JSONModelResponse(turn)


def _page(request: Request) -> tuple[int, int]:
    """``start_index`` and ``limit``: at most ``server.max_page_items``, which is also the page asked without one.

    Raises:
        InvalidRequestError: ``limit`` is larger.
    """
    most = services(request).max_page_items
    limit = query_int(request, "limit", most, minimum=1) or most
    if limit > most:
        raise InvalidRequestError(f"limit must be at most {most} (server.max_page_items)", "limit")
    return query_int(request, "start_index", 0) or 0, limit


async def create_agent(request: Request) -> Response:
    """Create an agent (its request's key claimed by the write that stores it)."""
    key = await take_key(request)  # first: a refused body is kept for a repeat, as any client error is
    body = await parse_body(request, CreateAgentRequest)
    return _agent_created(await services(request).agents.create_agent(body.agent_config, key))


def _agent_created(agent_id: str) -> Response:
    return JSONModelResponse(AgentCreated(agent_id=agent_id))


async def list_agents(request: Request) -> Response:
    """One page of agents."""
    page = await services(request).agents.list_agents(*_page(request))
    data = [agent.model_dump(mode="json") for agent in page.items]
    return JSONModelResponse(PaginatedResponse(data=data, has_more=page.has_more))


async def get_agent(request: Request) -> Response:
    """One agent."""
    return JSONModelResponse(await services(request).agents.get_agent(request.path_params["agent_id"]))


async def delete_agent(request: Request) -> Response:
    """Delete an agent with its sessions."""
    await services(request).agents.delete_agent(request.path_params["agent_id"])
    return Response(status_code=200)


async def create_session(request: Request) -> Response:
    """Open a session with an agent (its request's key claimed by the write that stores it)."""
    key = await take_key(request)
    body = await parse_body(request, CreateSessionRequest)
    agents = services(request).agents
    return _session_created(await agents.create_session(request.path_params["agent_id"], body.session_name, key))


def _session_created(session_id: str) -> Response:
    return JSONModelResponse(SessionCreated(session_id=session_id))


async def list_sessions(request: Request) -> Response:
    """One page of an agent's sessions."""
    page = await services(request).agents.list_sessions(request.path_params["agent_id"], *_page(request))
    data = [session.model_dump(mode="json") for session in page.items]
    return JSONModelResponse(PaginatedResponse(data=data, has_more=page.has_more))


async def get_session(request: Request) -> Response:
    """A session with its turns."""
    p = request.path_params
    agents = services(request).agents
    return JSONModelResponse(await agents.get_session(p["agent_id"], p["session_id"], query_list(request, "turn_ids")))


async def delete_session(request: Request) -> Response:
    """Delete a session."""
    await services(request).agents.delete_session(request.path_params["agent_id"], request.path_params["session_id"])
    return Response(status_code=200)


async def fork_session(request: Request) -> Response:
    """A new session whose history is the session's up to and including a turn (its request's key claimed by the
    write that stores the new session)."""
    key = await take_key(request)
    body = await parse_body(request, ForkSessionRequest)
    p = request.path_params
    agents = services(request).agents
    return _session_created(
        await agents.fork_session(p["agent_id"], p["session_id"], body.turn_id, body.session_name, key)
    )


async def create_turn(request: Request) -> Response:
    """Run a turn: the ``Turn``, or its events as they happen."""
    body = await parse_body(request, CreateTurnRequest)
    p = request.path_params
    agents = services(request).agents
    # The key is claimed by the write that stores the run: a repeat reads that run again (streamed or not).
    key = await take_key(request)
    live = await agents.start_turn(p["agent_id"], p["session_id"], body, provider_data(request), replayed_by=key)
    return await _answer(request, live, body.stream)


async def resume_turn(request: Request) -> Response:
    """Continue a turn that waits for client tool results."""
    body = await parse_body(request, ResumeTurnRequest)
    p = request.path_params
    agents = services(request).agents
    # The key is claimed by the write that resumes the run (a repeat finding the turn no longer awaiting input
    # then claims it at once, and is answered with the run the first call resumed).
    key = await take_key(request)
    live = await agents.resume_turn(
        p["agent_id"], p["session_id"], p["turn_id"], body, provider_data(request), replayed_by=key
    )
    return await _answer(request, live, body.stream)


async def get_turn(request: Request) -> Response:
    """One turn."""
    p = request.path_params
    return JSONModelResponse(await services(request).agents.get_turn(p["agent_id"], p["session_id"], p["turn_id"]))


async def turn_events(request: Request) -> Response:
    """A turn's events from the start (or after ``Last-Event-ID``), live until it ends or pauses."""
    p = request.path_params
    after = last_event_id(request)
    agents = services(request).agents
    events = await agents.turn_events(p["agent_id"], p["session_id"], p["turn_id"], -1 if after is None else after)
    return event_stream(events)


async def get_step(request: Request) -> Response:
    """One step of a turn."""
    p = request.path_params
    step = await services(request).agents.get_step(p["agent_id"], p["session_id"], p["turn_id"], p["step_id"])
    return JSONModelResponse(StepResponse(step=step))


_PAGE = (
    Param("start_index", NonNegative, "Index of the first item of the page."),
    Param(
        "limit",
        Positive,
        "Most items on the page: up to the server's `server.max_page_items` (1,000 by "
        "default), which is also the page when absent; `has_more` says whether more follow.",
    ),
)
_TURN_EVENTS = EventStream(data=(TurnStreamChunk, TurnStreamError))
_TURN_ERRORS = (400, 404, 409, 500, 502)
_SESSION = "/agents/{agent_id}/session/{session_id}"
_TAG = "Agents"

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("POST", "/agents", create_agent, "Create an agent", _TAG, CreateAgentRequest, AgentCreated,
             errors=(400,), creates=True, replay_record=_agent_created),
    Endpoint("GET", "/agents", list_agents, "List agents", _TAG, response=PaginatedResponse, query=_PAGE,
             errors=(400,)),
    Endpoint("GET", "/agents/{agent_id}", get_agent, "Get an agent", _TAG, response=Agent),
    Endpoint("DELETE", "/agents/{agent_id}", delete_agent, "Delete an agent", _TAG),
    Endpoint("POST", "/agents/{agent_id}/session", create_session, "Create a session", _TAG, CreateSessionRequest,
             SessionCreated, creates=True, replay_record=_session_created),
    Endpoint("GET", "/agents/{agent_id}/sessions", list_sessions, "List an agent's sessions", _TAG,
             response=PaginatedResponse, query=_PAGE),
    Endpoint("GET", _SESSION, get_session, "Get a session", _TAG, response=Session,
             query=(Param("turn_ids", list[str], "Only these turns (repeated, or comma-separated)."),)),
    Endpoint("DELETE", _SESSION, delete_session, "Delete a session", _TAG),
    Endpoint("POST", f"{_SESSION}/fork", fork_session, "Fork a session at a turn", _TAG, ForkSessionRequest,
             SessionCreated, errors=(400, 404, 409), creates=True, replay_record=_session_created),
    Endpoint("POST", f"{_SESSION}/turn", create_turn, "Create a turn", _TAG, CreateTurnRequest, Turn,
             stream=_TURN_EVENTS, headers=(PROVIDER_DATA,), errors=_TURN_ERRORS, creates=True, key_with_run=True,
             example={"messages": [{"role": "user", "content": "What is 2+2?"}], "stream": True}),
    Endpoint("GET", f"{_SESSION}/turn/{{turn_id}}", get_turn, "Get a turn", _TAG, response=Turn),
    Endpoint("POST", f"{_SESSION}/turn/{{turn_id}}/resume", resume_turn, "Resume a turn with tool results", _TAG,
             ResumeTurnRequest, Turn, stream=_TURN_EVENTS, headers=(PROVIDER_DATA,), errors=_TURN_ERRORS,
             creates=True, key_with_run=True),
    Endpoint("GET", f"{_SESSION}/turn/{{turn_id}}/step/{{step_id}}", get_step, "Get a step", _TAG,
             response=StepResponse),
    Endpoint("GET", f"{_SESSION}/turn/{{turn_id}}/events", turn_events, "Follow a turn's events", _TAG,
             stream=EventStream(data=_TURN_EVENTS.data, only=True), headers=(LAST_EVENT_ID,)),
)  # fmt: skip
"""The Agents API: served under ``/v1`` and again under ``/v1alpha``."""
