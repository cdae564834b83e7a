"""The CLI's ``chat --webhook`` and ``responses compact``, against a server process that may post to loopback."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from cli_support import cli

from ferryman.testing import ScriptedReply, ScriptedServerClient
from ferryman.webhooks.signing import new_secret
from support import Proc, ferryman_server, running
from webhook_receiver import receiving

SECRET = new_secret()
SUMMARY = "The user is Ada."


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, scripted_proc: tuple[Proc, str]) -> Iterator[str]:
    """A server whose webhooks may go to loopback, signed with :data:`SECRET`."""
    tmp = tmp_path_factory.mktemp("hooked")
    config = tmp / "ferryman.yaml"
    config.write_text(f'fetch:\n  allowed_hosts: ["127.0.0.1"]\nwebhooks:\n  secret: "{SECRET}"\n')
    proc, base = ferryman_server(tmp, scripted_proc[1], tmp / "ferryman.db", "--config", str(config))
    with running(proc):
        yield base


def test_chat_names_a_webhook_for_each_turn(
    capsys: pytest.CaptureFixture[str], base_url: str, served_model: ScriptedServerClient
) -> None:
    served_model.enqueue(ScriptedReply(text="Hello."))
    with receiving() as receiver:
        ran = cli(capsys, base_url, "chat", "--model", "scripted-model", "--webhook", receiver.url, "Hi", "--json")
        (turn,) = ran.json()["turns"]
        (posted,) = receiver.wait_for(1)
    event = posted.verified(SECRET)
    assert event["type"] == "turn.completed"
    assert (event["data"]["turn_id"], event["data"]["status"]) == (turn["turn_id"], "completed")

    refused = cli(capsys, base_url, "chat", "--model", "scripted-model", "--webhook", "ftp://example.com/h", "Hi")
    assert refused.code != 0 and "webhook" in refused.err


def test_responses_compact_prints_the_compacted_conversation(
    capsys: pytest.CaptureFixture[str], base_url: str, served_model: ScriptedServerClient
) -> None:
    served_model.enqueue(ScriptedReply(text="Hello, Ada."), ScriptedReply(text=SUMMARY), ScriptedReply(text=SUMMARY))
    with httpx.Client(base_url=base_url, timeout=30) as http:
        made = http.post("/v1/responses", json={"model": "scripted-model", "input": "I am Ada."})
        assert made.status_code == 200, made.text
    response_id = made.json()["id"]

    compacted = cli(capsys, base_url, "responses", "compact", "--previous-response", response_id, "--json").json()
    assert compacted["object"] == "response.compaction"
    assert [(i["type"], i.get("role")) for i in compacted["output"]] == [("message", "user"), ("compaction", None)]
    assert compacted["output"][-1]["encrypted_content"] and SUMMARY not in str(compacted)

    table = cli(capsys, base_url, "responses", "compact", "--previous-response", response_id, "--input", "And?")
    assert table.code == 0, table.err
    assert "I am Ada." in table.out and "And?" in table.out and "sealed summary" in table.out

    unnamed = cli(capsys, base_url, "responses", "compact")
    assert unnamed.code != 0 and "--previous-response" in unnamed.err
    modelless = cli(capsys, base_url, "responses", "compact", "--input", "Hi")
    assert modelless.code != 0 and "--model" in modelless.err
