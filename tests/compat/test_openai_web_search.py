"""The Responses ``web_search`` tool with the real ``openai`` SDK, on a SearXNG-compatible stand-in.

Its ``web_search_call`` items and stream events parse, and the answer cites
the pages found with ``url_citation`` annotations.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import openai
import pytest
from hosted_support import sdk, served_locally
from openai.types.responses import ResponseFunctionWebSearch, ResponseOutputMessage
from openai.types.responses.response_output_text import AnnotationURLCitation

from ferryman.testing import ScriptedReply, ScriptedToolCall
from ferryman.websearch_settings import WebSearchSettings
from inprocess import Served, check_script

MODEL = "scripted-model"
PAGE = "https://ferries.example/timetable"


class _SearxngStandIn(BaseHTTPRequestHandler):
    """``GET /search?q=…&format=json`` as SearXNG answers it; a query of ``down`` is a 500."""

    def do_GET(self) -> None:
        query = parse_qs(urlsplit(self.path).query).get("q", [""])[0]
        if query == "down":
            self.send_response(500)
            self.end_headers()
            return
        results = [{"title": "Ferry timetable", "url": PAGE, "content": f"Ferries for {query} leave at nine."}]
        body = json.dumps({"query": query, "results": results}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Ferryman searching the stand-in, for this module."""
    stand_in = ThreadingHTTPServer(("127.0.0.1", 0), _SearxngStandIn)
    thread = threading.Thread(target=stand_in.serve_forever, daemon=True)
    thread.start()
    settings = WebSearchSettings(provider="searxng", base_url=f"http://127.0.0.1:{stand_in.server_port}")
    try:
        with served_locally(tmp_path_factory.mktemp("web") / "ferryman.db", websearch=settings) as server:
            yield server
    finally:
        stand_in.shutdown()
        stand_in.server_close()
        thread.join()


@pytest.fixture()
def model(local_server: Served, request: pytest.FixtureRequest) -> Iterator[Served]:
    """The scripted model, emptied before each test and checked after it."""
    local_server.reset()
    yield local_server
    check_script(request, local_server.script)


@pytest.fixture()
def oai(model: Served) -> Iterator[openai.OpenAI]:
    """The SDK on the local server."""
    with sdk(model) as client:
        yield client


def _search(query: str, answer: str) -> list[ScriptedReply]:
    return [
        ScriptedReply(tool_calls=[ScriptedToolCall(name="web_search", arguments={"query": query})]),
        ScriptedReply(text=answer),
    ]


@pytest.mark.parametrize("kind", ["web_search", "web_search_preview"])
def test_the_sdk_reads_the_search_and_the_url_citation(oai: openai.OpenAI, model: Served, kind: str) -> None:
    model.enqueue(*_search("ferry times", "They leave at nine [1]."))

    response = oai.responses.create(model=MODEL, input="When do ferries leave?", tools=[{"type": kind}])  # type: ignore[list-item]

    search, message = response.output
    assert isinstance(search, ResponseFunctionWebSearch) and search.status == "completed"
    assert search.action.type == "search" and search.action.query == "ferry times"
    assert isinstance(message, ResponseOutputMessage)
    (cited,) = message.content[0].annotations  # type: ignore[union-attr]
    assert isinstance(cited, AnnotationURLCitation) and cited.url == PAGE and cited.title == "Ferry timetable"
    text = response.output_text
    assert text[cited.start_index : cited.end_index] == "[1]"
    tool_message = next(m for m in model.requests()[1]["messages"] if m["role"] == "tool")
    assert PAGE in tool_message["content"]


def test_the_sdk_streams_the_search(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue(*_search("ferry times", "At nine, see https://ferries.example/timetable."))

    events = list(oai.responses.create(model=MODEL, input="When?", tools=[{"type": "web_search"}], stream=True))
    types = [event.type for event in events]

    assert [e.sequence_number for e in events] == list(range(len(events)))
    order = [
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_text.annotation.added",
        "response.completed",
    ]
    assert [types.index(kind) for kind in order] == sorted(types.index(kind) for kind in order)
    annotation: Any = next(e for e in events if e.type == "response.output_text.annotation.added")
    assert annotation.annotation.type == "url_citation" and annotation.annotation.url == PAGE


def test_a_failed_search_is_a_failed_item_and_the_response_completes(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue(*_search("down", "The search failed."))

    response = oai.responses.create(model=MODEL, input="Search", tools=[{"type": "web_search"}])

    search, message = response.output
    assert response.status == "completed"
    assert isinstance(search, ResponseFunctionWebSearch) and search.status == "failed"
    assert isinstance(message, ResponseOutputMessage) and message.content[0].annotations == []  # type: ignore[union-attr]
