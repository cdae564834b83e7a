"""The scripted model fails a test that leaves replies unused or gets a call nothing was scripted for."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from ferryman.api.content import UserMessage
from ferryman.inference.base import ChatRequest
from ferryman.testing import Script, ScriptedModel, ScriptedReply, ScriptMismatchError
from ferryman.testing.scripted import ScriptedError
from ferryman.testing.server import build_app


def _request() -> ChatRequest:
    return ChatRequest(model="scripted-model", messages=[UserMessage(content="hi")])


async def _ask(model: ScriptedModel) -> None:
    async for _ in model.stream_chat(_request()):
        pass


def test_an_unused_reply_fails_unless_allowed() -> None:
    script = Script()
    script.enqueue(ScriptedReply(text="never asked for"))
    with pytest.raises(ScriptMismatchError, match="unused reply.*never asked for"):
        script.check()
    script.check(allow_unused=True)


@pytest.mark.anyio
async def test_a_call_with_nothing_scripted_fails_even_when_unused_replies_are_allowed() -> None:
    model = ScriptedModel()
    with pytest.raises(Exception, match="no reply queued"):
        await _ask(model)
    with pytest.raises(ScriptMismatchError, match="unexpected call"):
        model.check(allow_unused=True)


@pytest.mark.anyio
async def test_a_script_used_as_scripted_passes() -> None:
    model = ScriptedModel()
    model.enqueue_text("hello")
    await _ask(model)
    model.check()


def test_the_server_reports_both_to_its_client() -> None:
    script = Script()
    with TestClient(build_app(script, ["scripted-model"])) as http:
        script.enqueue(ScriptedReply(text="left"))
        assert http.post("/v1/chat/completions", json={"model": "scripted-model", "messages": []}).status_code == 200
        assert http.post("/v1/chat/completions", json={"model": "scripted-model", "messages": []}).status_code == 500
        problems = http.get("/scripted/problems").json()["problems"]
        assert len(problems) == 1 and problems[0].startswith("unexpected call")
        script.enqueue(ScriptedReply(text="unused"))
        assert len(http.get("/scripted/problems").json()["problems"]) == 2
        assert len(http.get("/scripted/problems", params={"allow_unused": "true"}).json()["problems"]) == 1


def test_a_scripted_upstream_error_asks_clients_to_retry_at_once_unless_told_otherwise() -> None:
    """``retry-after-ms`` spares tests of retried failures the client's back-off (about 1.5 s each)."""
    script = Script()
    script.enqueue(
        ScriptedReply(error=ScriptedError(status_code=503)),
        ScriptedReply(error=ScriptedError(status_code=500, retry_after_ms=None)),
    )
    body = {"model": "scripted-model", "messages": [{"role": "user", "content": "hi"}]}
    with TestClient(build_app(script, ["scripted-model"])) as http:
        soon, plain = (http.post("/v1/chat/completions", json=body) for _ in range(2))
    assert (soon.status_code, soon.headers["retry-after-ms"]) == (503, "1.0")
    assert plain.status_code == 500 and "retry-after-ms" not in plain.headers
