"""The ``encrypted_content`` of compaction items: sealed with the server's key, opened only by it, never forged;
a response's item, opened, stands for every item before it."""

from __future__ import annotations

import base64

import pytest
from pydantic import SecretStr

from ferryman.api.content import CompletionMessage, Message, TextContentItem, UserMessage
from ferryman.api.limits import MAX_MESSAGE_CHARS
from ferryman.api.responses import CompactionItem, Item, MessageItem
from ferryman.context_settings import ContextSettings
from ferryman.engine.context_fit import summary_message
from ferryman.errors import ConfigurationError, InvalidRequestError
from ferryman.services.responses.compaction import KEY_NAME, Sealer, Sealing
from ferryman.services.responses.items import items_to_messages, message_positions, read_window, with_ids
from ferryman.storage.domain.kinds import SCHEMA, SERVER_SECRET
from ferryman.storage.domain.server_secrets import stored_secret
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.memory import MemoryKernel

SUMMARY = "Ada keeps the ferries; she asked for the timetable."


def test_a_sealed_summary_opens_with_its_key_only_and_hides_its_text() -> None:
    sealer = Sealer(ContextSettings(secret=SecretStr("s" * 32)).key())
    sealed, again = sealer.seal(SUMMARY), sealer.seal(SUMMARY)
    assert sealed != again  # a fresh nonce each time
    assert base64.urlsafe_b64decode(sealed)[:12] != base64.urlsafe_b64decode(again)[:12]
    assert "Ada" not in sealed and "Ada" not in base64.urlsafe_b64decode(sealed).decode("latin-1")
    assert sealer.open(sealed) == SUMMARY
    other = Sealer(ContextSettings(secret=SecretStr("t" * 32)).key())
    with pytest.raises(InvalidRequestError, match="encrypted_content"):
        other.open(sealed)


@pytest.mark.parametrize("forged", ["", "not base64!", "AAAA", "A" * 64])
def test_a_forged_or_changed_seal_is_refused(forged: str) -> None:
    sealer = Sealer(ContextSettings(secret=SecretStr("s" * 32)).key())
    raw = bytearray(base64.urlsafe_b64decode(sealer.seal(SUMMARY)))
    raw[-1] ^= 1
    for sealed in (forged, base64.urlsafe_b64encode(bytes(raw)).decode()):
        with pytest.raises(InvalidRequestError, match="encrypted_content") as refused:
            sealer.open(sealed)
        assert refused.value.field == "input"


@pytest.mark.anyio
async def test_without_a_secret_one_key_is_generated_into_the_store_every_replica_shares() -> None:
    kernel = MemoryKernel(SCHEMA)
    first, second = Sealing(None, kernel), Sealing(None, kernel)  # two replicas of one store
    plain: list[Item] = [MessageItem(role="user", content="hi")]
    assert await first.opened(plain) == plain
    assert await stored_secret(kernel, KEY_NAME) is None  # nothing sealed or opened yet: no key made
    sealed = await first.seal(SUMMARY)
    assert (await second.sealer()).open(sealed) == SUMMARY
    with pytest.raises(InvalidRequestError):
        (await Sealing(ContextSettings(secret=SecretStr("s" * 32)).key(), kernel).sealer()).open(sealed)


@pytest.mark.anyio
async def test_a_malformed_stored_key_is_refused_naming_the_setting() -> None:
    kernel = MemoryKernel(SCHEMA)
    await kernel.write([ops.Put(SERVER_SECRET, KEY_NAME, {"secret": "not a key"})])
    with pytest.raises(ConfigurationError, match="context.secret"):
        await Sealing(None, kernel).sealer()


def test_a_response_compaction_item_opens_to_its_history_in_place_of_every_item_before_it() -> None:
    sealer = Sealer(ContextSettings(secret=SecretStr("s" * 32)).key())
    history: list[Message] = [summary_message(SUMMARY), UserMessage(content="What is my name?")]
    item = sealer.history_item(history)
    assert item is not None and "Ada" not in item.encrypted_content
    assert sealer.open(item.encrypted_content) == history
    given: list[Item] = [
        MessageItem(role="user", content="I am Ada; I keep the ferries."),
        MessageItem(role="assistant", content="Noted."),
        item,
        MessageItem(role="assistant", content="You are Ada."),
        MessageItem(role="user", content="And what do I keep?"),
    ]
    opened = sealer.opened(with_ids(given))
    assert items_to_messages(opened) == [
        *history,
        CompletionMessage(content="You are Ada.", stop_reason="end_of_turn", tool_calls=[]),
        UserMessage(content=[TextContentItem(text="And what do I keep?")]),
    ]
    assert message_positions(opened) == [None, None, None, 2, 3]


def test_a_compacted_history_too_long_for_an_item_makes_none() -> None:
    sealer = Sealer(ContextSettings(secret=SecretStr("s" * 32)).key())
    half = "x" * (MAX_MESSAGE_CHARS // 2)
    assert sealer.history_item([UserMessage(content=half), UserMessage(content=half)]) is None


def test_a_redacted_item_is_sealed_again_over_its_redacted_messages_keeping_its_id() -> None:
    sealer = Sealer(ContextSettings(secret=SecretStr("s" * 32)).key())
    history_item = sealer.history_item([summary_message(SUMMARY), UserMessage(content="mail ada@example.com")])
    assert history_item is not None
    redacted: list[Message] = [summary_message(SUMMARY), UserMessage(content="mail [REDACTED:email]")]
    (opened,) = sealer.opened([history_item])
    assert isinstance(opened, CompactionItem)
    again = sealer.resealed(opened, redacted)
    assert again.id == history_item.id and again.history == redacted
    assert sealer.open(again.encrypted_content) == redacted

    (summary_item,) = sealer.opened([CompactionItem(id="cmp_1", encrypted_content=sealer.seal("ada@example.com"))])
    assert isinstance(summary_item, CompactionItem)
    (message,) = items_to_messages([summary_item])
    said = message.model_copy(update={"content": str(message.content).replace("ada@example.com", "[REDACTED]")})
    again = sealer.resealed(summary_item, [said])
    assert sealer.open(again.encrypted_content) == again.summary == "[REDACTED]"


def test_an_item_redacted_past_the_limit_is_sealed_empty_never_as_sent() -> None:
    sealer = Sealer(ContextSettings(secret=SecretStr("s" * 32)).key())
    item = sealer.history_item([UserMessage(content="ada@example.com")])
    assert item is not None
    (opened,) = sealer.opened([item])
    assert isinstance(opened, CompactionItem)
    again = sealer.resealed(opened, [UserMessage(content="x" * MAX_MESSAGE_CHARS)])
    assert again.history == [] and sealer.open(again.encrypted_content) == []
    given: list[Item] = [MessageItem(role="user", content="replaced"), again, MessageItem(role="user", content="on")]
    assert items_to_messages(with_ids(given)) == [UserMessage(content=[TextContentItem(text="on")])]


def test_what_a_conversation_got_while_the_response_ran_is_read_right_after_its_history() -> None:
    """Sealed with where its response's read of the conversation ended and its own items began, a response's item
    stands for neither the items stored between the two (read after its history, in their order) nor, without
    both bounds among the items (a bound deleted), for less than every item before it."""
    sealer = Sealer(ContextSettings(secret=SecretStr("s" * 32)).key())
    history: list[Message] = [summary_message(SUMMARY), UserMessage(content="What is my name?")]
    item = sealer.history_item(history, ("msg_read", "msg_asked"))
    assert item is not None
    answer = CompletionMessage(content="You are Ada.", stop_reason="end_of_turn", tool_calls=[])
    late = [MessageItem(id="msg_late", role="user", content="The lighthouse."), MessageItem(role="user", content="x")]
    given: list[Item] = [
        MessageItem(id="msg_read", role="user", content="I keep the ferries."),
        *late,
        MessageItem(id="msg_asked", role="user", content="What is my name?"),
        item,
        MessageItem(role="assistant", content="You are Ada."),
    ]
    opened = sealer.opened(with_ids(given))
    texts = [UserMessage(content=[TextContentItem(text=text)]) for text in ("The lighthouse.", "x")]
    assert items_to_messages(opened) == [*history, *texts, answer]
    assert message_positions(opened) == [None, 2, 3, None, None, 4]
    assert read_window(opened) == [opened[4], *opened[1:3], opened[5]]

    compaction = opened[4]
    assert isinstance(compaction, CompactionItem) and compaction.unread == ("msg_read", "msg_asked")
    (resealed,) = sealer.opened([sealer.resealed(compaction, history)])
    assert isinstance(resealed, CompactionItem) and resealed.unread == compaction.unread
    assert items_to_messages([entry for entry in opened if entry.id != "msg_read"]) == [*history, answer]

    first = sealer.history_item(history, (None, "msg_asked"))  # the conversation was empty when it was read
    assert first is not None
    assert items_to_messages(sealer.opened(with_ids([*late, given[3], first]))) == [*history, *texts]
