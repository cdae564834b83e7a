"""Routes of the Agents API, served under ``/v1`` and ``/v1alpha``."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ferryman.api.agents import (
    AgentCreated,
    CreateAgentRequest,
    CreateSessionRequest,
    CreateTurnRequest,
    PaginatedResponse,
    ResumeTurnRequest,
    SessionCreated,
    StepResponse,
    Turn,
)
from ferryman.errors import error_for_code
from ferryman.services.agents import AgentService, LiveTurn

from .http import JSONModelResponse, last_event_id, parse_body, provider_data, query_int, query_list, sse_response


async def _answer(live: LiveTurn, stream: bool | None) -> Response:
    if stream:
        return sse_response(live.channel.read())
    turn: Turn = await asyncio.shield(live.task)
    if turn.status == "failed" and turn.error is not None:
        raise error_for_code(turn.error.code, f"turn {turn.turn_id} failed: {turn.error.message}")
    return JSONModelResponse(turn)


def _page(request: Request) -> tuple[int, int | None]:
    return query_int(request, "start_index", 0) or 0, query_int(request, "limit", None, minimum=1)


def agent_routes(service: AgentService) -> list[BaseRoute]:
    """The Agents API routes over one service."""

    async def create_agent(request: Request) -> Response:
        body = await parse_body(request, CreateAgentRequest)
        return JSONModelResponse(AgentCreated(agent_id=await service.create_agent(body.agent_config)))

    async def list_agents(request: Request) -> Response:
        page = await service.list_agents(*_page(request))
        data = [agent.model_dump(mode="json") for agent in page.items]
        return JSONModelResponse(PaginatedResponse(data=data, has_more=page.has_more))

    async def get_agent(request: Request) -> Response:
        return JSONModelResponse(await service.get_agent(request.path_params["agent_id"]))

    async def delete_agent(request: Request) -> Response:
        await service.delete_agent(request.path_params["agent_id"])
        return Response(status_code=200)

    async def create_session(request: Request) -> Response:
        body = await parse_body(request, CreateSessionRequest)
        session_id = await service.create_session(request.path_params["agent_id"], body.session_name)
        return JSONModelResponse(SessionCreated(session_id=session_id))

    async def list_sessions(request: Request) -> Response:
        page = await service.list_sessions(request.path_params["agent_id"], *_page(request))
        data = [session.model_dump(mode="json") for session in page.items]
        return JSONModelResponse(PaginatedResponse(data=data, has_more=page.has_more))

    async def get_session(request: Request) -> Response:
        p = request.path_params
        session = await service.get_session(p["agent_id"], p["session_id"], query_list(request, "turn_ids"))
        return JSONModelResponse(session)

    async def delete_session(request: Request) -> Response:
        await service.delete_session(request.path_params["agent_id"], request.path_params["session_id"])
        return Response(status_code=200)

    async def create_turn(request: Request) -> Response:
        body = await parse_body(request, CreateTurnRequest)
        p = request.path_params
        live = await service.start_turn(p["agent_id"], p["session_id"], body, provider_data(request))
        return await _answer(live, body.stream)

    async def resume_turn(request: Request) -> Response:
        body = await parse_body(request, ResumeTurnRequest)
        p = request.path_params
        live = await service.resume_turn(p["agent_id"], p["session_id"], p["turn_id"], body, provider_data(request))
        return await _answer(live, body.stream)

    async def get_turn(request: Request) -> Response:
        p = request.path_params
        return JSONModelResponse(await service.get_turn(p["agent_id"], p["session_id"], p["turn_id"]))

    async def turn_events(request: Request) -> Response:
        p = request.path_params
        after = last_event_id(request)
        frames = await service.turn_events(p["agent_id"], p["session_id"], p["turn_id"], -1 if after is None else after)
        return sse_response(frames)

    async def get_step(request: Request) -> Response:
        p = request.path_params
        step = await service.get_step(p["agent_id"], p["session_id"], p["turn_id"], p["step_id"])
        return JSONModelResponse(StepResponse(step=step))

    session = "/agents/{agent_id}/session/{session_id}"
    routes: list[BaseRoute] = [
        Route("/agents", create_agent, methods=["POST"]),
        Route("/agents", list_agents, methods=["GET"]),
        Route("/agents/{agent_id}", get_agent, methods=["GET"]),
        Route("/agents/{agent_id}", delete_agent, methods=["DELETE"]),
        Route("/agents/{agent_id}/session", create_session, methods=["POST"]),
        Route("/agents/{agent_id}/sessions", list_sessions, methods=["GET"]),
        Route(session, get_session, methods=["GET"]),
        Route(session, delete_session, methods=["DELETE"]),
        Route(f"{session}/turn", create_turn, methods=["POST"]),
        Route(f"{session}/turn/{{turn_id}}", get_turn, methods=["GET"]),
        Route(f"{session}/turn/{{turn_id}}/resume", resume_turn, methods=["POST"]),
        Route(f"{session}/turn/{{turn_id}}/step/{{step_id}}", get_step, methods=["GET"]),
        Route(f"{session}/turn/{{turn_id}}/events", turn_events, methods=["GET"]),
    ]
    return routes
