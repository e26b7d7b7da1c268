"""build_seed: the conversation as ``conversation.item.create`` events the ``openai`` SDK's own
types accept, bounded by a token budget that never splits a call from its output, with the
old ids kept (or mapped) and chained from ``root``."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from openai.types.beta.realtime.conversation_item_create_event_param import (
    ConversationItemCreateEventParam as BetaCreate,
)
from openai.types.realtime.conversation_item_create_event_param import (
    ConversationItemCreateEventParam as GACreate,
)
from pydantic import TypeAdapter

from realtime_resumption.openai.conversation_seed import (
    MAX_ITEM_ID,
    build_seed,
    estimate_tokens,
    items_from_replay,
)
from realtime_resumption.openai.conversation_state import HeldItem
from realtime_resumption.openai.session_config import AudioFormat
from realtime_resumption.transport import ReplayItem, ToolCall, ToolResult

SPEECH = bytes(range(256)) * 96  # 24576 bytes: 512 ms of PCM16 at 24 kHz


def _valid(event: dict[str, Any], flavour: str) -> None:
    """The SDK's TypedDict of the event, content included (pydantic checks it lazily)."""
    adapter: TypeAdapter[Any] = TypeAdapter(GACreate if flavour == "ga" else BetaCreate)
    checked = adapter.validate_python(event)
    list(checked["item"].get("content") or ())


def user(item_id: str, text: str) -> HeldItem:
    return HeldItem(item_id, "user", text=text, status="completed")


def said(item_id: str, text: str) -> HeldItem:
    return HeldItem(item_id, "assistant", text=text, status="completed")


def call(item_id: str, call_id: str, *, status: str = "completed") -> HeldItem:
    return HeldItem(
        item_id, "function_call", call_id=call_id, name="weather", arguments="{}", status=status
    )


def output(item_id: str, call_id: str, text: str = "sunny") -> HeldItem:
    return HeldItem(item_id, "function_call_output", text=text, call_id=call_id)


CONVERSATION = (
    HeldItem("sys", "system", text="The caller is in Oslo."),
    user("u1", "what is the weather"),
    call("c1", "call_1"),
    output("o1", "call_1"),
    said("a1", "sunny in Oslo"),
    HeldItem("u2", "user", has_audio=True, transcript_pending=True, audio=SPEECH),
)


@pytest.mark.parametrize("flavour", ["ga", "beta"])
def test_every_kind_of_item_becomes_an_event_the_sdk_types_accept(flavour: Any) -> None:
    seed = build_seed(CONVERSATION, flavour=flavour)
    for event in seed.events:
        _valid(event, flavour)
    items = [e["item"] for e in seed.events]
    assert [i["id"] for i in items] == [i.id for i in CONVERSATION]
    assert items[0] == {
        "id": "sys",
        "type": "message",
        "role": "system",
        "content": [{"type": "input_text", "text": "The caller is in Oslo."}],
    }
    assert items[1]["content"] == [{"type": "input_text", "text": "what is the weather"}]
    assert items[2] == {
        "id": "c1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "weather",
        "arguments": "{}",
    }
    assert items[3] == {
        "id": "o1",
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "sunny",
    }
    part = "output_text" if flavour == "ga" else "text"
    assert items[4]["content"] == [{"type": part, "text": "sunny in Oslo"}]
    assert items[5]["content"] == [
        {"type": "input_audio", "audio": base64.b64encode(SPEECH).decode()}
    ]


def test_the_items_are_chained_from_root_and_keep_their_ids() -> None:
    seed = build_seed(CONVERSATION)
    assert [e["previous_item_id"] for e in seed.events] == ["root", "sys", "u1", "c1", "o1", "a1"]
    assert seed.ids == {i.id: i.id for i in CONVERSATION}
    assert seed.items == CONVERSATION and seed.dropped == ()
    assert seed.new_id("a1") == "a1" and seed.new_id("nope") is None


def test_a_transcribed_spoken_turn_is_held_as_the_text_it_was_seeded_as() -> None:
    heard = HeldItem("u1", "user", text="hello", has_audio=True, status="completed")
    seed = build_seed((heard,))
    assert seed.events[0]["item"]["content"] == [{"type": "input_text", "text": "hello"}]
    assert seed.items == (HeldItem("u1", "user", text="hello", status="completed"),)


def test_an_id_too_long_for_the_api_gets_a_stable_one_and_the_chain_follows_it() -> None:
    long_id = "item_" + "x" * 40
    items = (user(long_id, "hello"), said("a1", "hi"))
    seed = build_seed(items)
    new_id = seed.new_id(long_id)
    assert new_id is not None and new_id != long_id and len(new_id) <= MAX_ITEM_ID
    assert build_seed(items).new_id(long_id) == new_id
    assert seed.events[0]["item"]["id"] == new_id
    assert seed.events[1]["previous_item_id"] == new_id
    assert seed.items[0].id == new_id


def test_the_estimate_counts_text_by_characters_and_user_speech_by_duration() -> None:
    assert estimate_tokens(user("u", "x" * 40)) == 10 + 2
    assert estimate_tokens(user("u", "x" * 41)) == 11 + 2
    speech = HeldItem("u", "user", has_audio=True, transcript_pending=True, audio=bytes(48_000))
    assert estimate_tokens(speech) == 10 + 2  # one second: ten tokens
    assert estimate_tokens(speech, AudioFormat("pcmu")) == 60 + 2  # G.711: six seconds
    long_call = HeldItem("c", "function_call", call_id="k", name="abcd", arguments="x" * 36)
    assert estimate_tokens(long_call) == 10 + 2


def test_the_oldest_items_go_first_and_the_newest_always_stays() -> None:
    items = tuple(user(f"u{n}", "x" * 38) for n in range(5))  # 12 tokens each
    seed = build_seed(items, budget_tokens=30)
    assert [i.id for i in seed.items] == ["u3", "u4"] and seed.tokens == 24
    assert seed.dropped == ("u0", "u1", "u2")
    seed = build_seed(items, budget_tokens=5)
    assert [i.id for i in seed.items] == ["u4"]  # over the budget alone, and kept
    assert seed.events[0]["previous_item_id"] == "root"


def test_a_call_and_its_output_are_kept_or_dropped_together() -> None:
    items = (
        user("u1", "x" * 38),
        call("c1", "call_1"),
        said("a1", "x" * 38),
        output("o1", "call_1", "x" * 38),
        user("u2", "x" * 38),
    )
    costs = {i.id: estimate_tokens(i) for i in items}
    # Room for u2 and the output, but not for the output's call: both go.
    seed = build_seed(items, budget_tokens=costs["u2"] + costs["o1"] + 1)
    assert [i.id for i in seed.items] == ["u2"]
    # Room for the pair: the call is kept with its output, before what came between.
    budget = costs["u2"] + costs["o1"] + costs["c1"]
    seed = build_seed(items, budget_tokens=budget)
    assert [i.id for i in seed.items] == ["c1", "o1", "u2"]
    assert [e["previous_item_id"] for e in seed.events] == ["root", "c1", "o1"]


def test_the_seed_says_when_the_models_turn_is_due() -> None:
    assert not build_seed(CONVERSATION[:5]).awaits_answer  # ends with an answer
    assert build_seed(CONVERSATION).awaits_answer  # ends with the user's speech
    assert build_seed(CONVERSATION[:4]).awaits_answer  # ends with a function's output
    # An answer cut before a word was heard is dropped: its question is due an answer.
    assert build_seed((user("u1", "hi"), said("a1", ""))).awaits_answer
    assert not build_seed((call("c1", "call_1"),)).awaits_answer  # the output is due first
    assert not build_seed(()).awaits_answer


def test_a_call_still_waiting_for_its_output_is_kept_for_it() -> None:
    seed = build_seed((user("u1", "weather"), call("c1", "call_1")))
    assert [i.id for i in seed.items] == ["u1", "c1"]


def test_what_no_create_event_can_carry_is_dropped() -> None:
    items = (
        HeldItem("u0", "user", has_audio=True, transcript_pending=True),  # its speech not kept
        said("a0", ""),  # truncated before the user heard a word
        output("o9", "call_gone"),  # its call is not in the conversation
        call("c2", "call_2", status="incomplete"),  # cut with its answer
        output("o2", "call_2"),
        HeldItem("m1", "other"),  # an MCP item
        user("u1", "hello"),
    )
    seed = build_seed(items)
    assert [i.id for i in seed.items] == ["u1"]
    assert seed.dropped == ("u0", "a0", "o9", "c2", "o2", "m1")


def test_a_stored_replay_seeds_the_same_way() -> None:
    replay = (
        ReplayItem("user", text="what is the weather"),
        ReplayItem("model", tool_call=ToolCall("call_1", "weather", {"city": "Oslo"})),
        ReplayItem("user", tool_result=ToolResult("call_1", "weather", {"sky": "clear"})),
        ReplayItem("model", text="clear skies"),
    )
    items = items_from_replay(replay)
    assert [(i.id, i.kind) for i in items] == [
        ("replay_0", "user"),
        ("replay_1", "function_call"),
        ("replay_2", "function_call_output"),
        ("replay_3", "assistant"),
    ]
    seed = build_seed(items)
    for event in seed.events:
        _valid(event, "ga")
    assert seed.events[1]["item"]["arguments"] == '{"city": "Oslo"}'
    assert seed.events[2]["item"]["output"] == '{"sky": "clear"}'
    assert seed.events[3]["item"]["content"] == [{"type": "output_text", "text": "clear skies"}]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="budget_tokens"):
        build_seed(CONVERSATION, budget_tokens=0)
    with pytest.raises(ValueError, match="flavour"):
        build_seed(CONVERSATION, flavour="v2")  # type: ignore[arg-type]


def test_the_seed_repr_leaves_out_the_speech() -> None:
    assert "audio" not in repr(build_seed(CONVERSATION))
