"""The client's retries never run a call with effects twice, and its options never show the API key."""

from __future__ import annotations

import httpx
import pytest

from ferryman.client import Client

TOOL_RESULT = {"content": "done", "error_message": None, "error_code": None, "metadata": None}


def test_options_never_show_the_api_key() -> None:
    client = Client(base_url="http://ferryman.test", api_key="sk-very-secret", default_headers={"X-Trace": "t"})
    assert "sk-very-secret" not in repr(client.options)
    assert "sk-very-secret" not in str(client.options)
    assert client.options.request_headers()["Authorization"] == "Bearer sk-very-secret"


def test_a_retried_tool_invocation_sends_the_same_idempotency_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ferryman.client._transport.time.sleep", lambda seconds: None)
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            raise httpx.ReadError("connection reset after the request was sent")
        return httpx.Response(200, json=TOOL_RESULT)

    http = httpx.Client(transport=httpx.MockTransport(handle))
    with Client(base_url="http://ferryman.test", max_retries=1, http_client=http) as client:
        result = client.tools.invoke("launch", n=1)
    assert result.content == "done"
    keys = [r.headers.get("Idempotency-Key") for r in seen]
    assert len(keys) == 2 and keys[0] and keys[0] == keys[1]
