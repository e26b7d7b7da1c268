"""The compact transcript that seeds a rebuilt session."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from realtime_resumption.history import ConversationHistory, HistoryLimits
from realtime_resumption.transport import ReplayItem, ToolCall, ToolResult


def user(text: str) -> ReplayItem:
    return ReplayItem(role="user", text=text)


def model(text: str) -> ReplayItem:
    return ReplayItem(role="model", text=text)


def test_transcription_deltas_are_accumulated_into_one_item_per_side() -> None:
    history = ConversationHistory()
    for delta in ("Wha", "t's the", " wea", "ther?"):
        history.user_transcript(delta)
    for delta in ("It is ", "sunny", " today."):
        history.model_transcript(delta)
    assert history.turn_complete()
    assert history.replay_items() == [user("What's the weather?"), model("It is sunny today.")]


def test_whitespace_is_tidied() -> None:
    history = ConversationHistory()
    history.user_transcript("  hello \n ")
    history.user_transcript(" there ")
    history.model_text(" hi ")
    history.turn_complete()
    assert history.replay_items() == [user("hello there"), model("hi")]


def test_model_text_wins_over_its_transcription() -> None:
    history = ConversationHistory()
    history.model_transcript("spoken")
    history.model_text("written")
    history.turn_complete()
    assert history.replay_items() == [model("written")]


def test_typed_and_spoken_input_of_one_turn_are_joined() -> None:
    history = ConversationHistory()
    history.user_text("look at this")
    history.user_transcript("and tell me")
    history.model_text("ok")
    history.turn_complete()
    assert history.replay_items() == [user("look at this\nand tell me"), model("ok")]


def test_the_turn_in_progress_is_not_replayed() -> None:
    history = ConversationHistory()
    history.user_transcript("first")
    history.model_text("one")
    history.turn_complete()
    history.user_transcript("second")
    history.model_text("tw")
    assert history.answer_started
    assert history.replay_items() == [user("first"), model("one")]


def test_an_interrupted_answer_keeps_what_was_delivered_and_is_marked() -> None:
    history = ConversationHistory()
    history.user_transcript("tell me a story")
    history.model_transcript("Once upon a ti")
    history.interrupted()
    history.user_transcript("stop")  # the barge-in belongs to the next turn
    history.turn_complete()
    history.model_text("Sure.")
    history.turn_complete()
    assert history.replay_items() == [
        user("tell me a story"),
        model("Once upon a ti…"),
        user("stop"),
        model("Sure."),
    ]


def test_the_marker_is_configurable_and_only_marks_a_cut_speech() -> None:
    history = ConversationHistory(HistoryLimits(interrupted_marker=" [cut]"))
    history.model_text("let me check")
    call = ToolCall("c1", "lookup", {"q": 1})
    history.tool_call(call)
    history.tool_result(ToolResult("c1", "lookup", {"a": 2}))
    history.interrupted()  # after the exchange: the speech before it was complete
    history.turn_complete()
    history.model_text("half")
    history.interrupted()
    history.turn_complete()
    texts = [item.text for item in history.replay_items() if item.text]
    assert texts == ["let me check", "half [cut]"]


def test_late_transcription_of_the_question_stays_with_it() -> None:
    history = ConversationHistory()
    history.user_transcript("what time")
    history.model_transcript("It is")
    history.user_transcript(" is it")
    history.model_transcript(" noon.")
    history.turn_complete()
    assert history.replay_items() == [user("what time is it"), model("It is noon.")]


def test_text_typed_while_the_model_answers_starts_the_next_turn() -> None:
    history = ConversationHistory()
    history.user_text("hi")
    history.model_text("hello")
    history.user_text("another thing")
    history.turn_complete()
    history.model_text("yes?")
    history.turn_complete()
    assert history.replay_items() == [
        user("hi"),
        model("hello"),
        user("another thing"),
        model("yes?"),
    ]


def test_tool_exchanges_keep_their_order_and_roles() -> None:
    history = ConversationHistory()
    call = ToolCall("c1", "weather", {"city": "Paris"})
    result = ToolResult("c1", "weather", {"sky": "clear"})
    history.user_transcript("weather in Paris?")
    history.model_text("Checking.")
    history.tool_call(call)
    history.tool_result(result)
    history.model_text("It is clear.")
    history.turn_complete()
    assert history.replay_items() == [
        user("weather in Paris?"),
        model("Checking."),
        ReplayItem(role="model", tool_call=call),
        ReplayItem(role="user", tool_result=result),
        model("It is clear."),
    ]


def test_half_tool_exchanges_are_left_out() -> None:
    history = ConversationHistory()
    history.tool_call(ToolCall("c1", "f"))
    history.tool_result(ToolResult("c2", "f"))
    history.model_text("done")
    history.turn_complete()
    assert history.replay_items() == [model("done")]


def test_a_tool_exchange_split_by_turn_complete_is_paired() -> None:
    history = ConversationHistory()
    call = ToolCall("c1", "f")
    result = ToolResult("c1", "f", {"v": 1})
    history.user_text("q")
    history.tool_call(call)
    history.turn_complete()
    assert history.replay_items() == [user("q")]  # the result is not there yet
    history.tool_result(result)
    history.model_text("a")
    history.turn_complete()
    assert history.replay_items() == [
        user("q"),
        ReplayItem(role="model", tool_call=call),
        ReplayItem(role="user", tool_result=result),
        model("a"),
    ]


def test_trimming_a_call_drops_its_result_too() -> None:
    history = ConversationHistory(HistoryLimits(max_turns=1))
    history.tool_call(ToolCall("c1", "f"))
    history.turn_complete()
    history.tool_result(ToolResult("c1", "f"))
    history.model_text("a")
    history.turn_complete()
    assert history.replay_items() == [model("a")]


def test_an_empty_turn_is_not_committed() -> None:
    history = ConversationHistory()
    history.model_text("")
    history.model_transcript("")
    history.user_transcript("   ")
    assert not history.turn_complete()
    assert history.turns == 0
    assert not history.answer_started


def test_oldest_turns_go_first_past_max_turns() -> None:
    history = ConversationHistory(HistoryLimits(max_turns=2))
    for n in range(4):
        history.user_text(f"q{n}")
        history.model_text(f"a{n}")
        history.turn_complete()
    assert history.replay_items() == [user("q2"), model("a2"), user("q3"), model("a3")]


def test_oldest_turns_go_first_past_max_chars_but_the_newest_stays() -> None:
    history = ConversationHistory(HistoryLimits(max_chars=10))
    history.user_text("abcd")
    history.turn_complete()
    history.user_text("efgh")
    history.turn_complete()
    assert history.chars == 8
    history.user_text("x" * 50)
    history.turn_complete()
    assert history.replay_items() == [user("x" * 50)]
    assert history.chars == 50


def test_tool_payloads_count_as_json() -> None:
    history = ConversationHistory()
    history.tool_call(ToolCall("c1", "f", {"k": "v"}))
    history.tool_result(ToolResult("c1", "f", {"ok": True}))
    history.turn_complete()
    assert history.chars == len("f") + len('{"k": "v"}') + len("f") + len('{"ok": true}')


def test_clear_forgets_everything() -> None:
    history = ConversationHistory()
    history.user_text("q")
    history.turn_complete()
    history.user_text("pending")
    history.clear()
    history.model_text("fresh")
    history.turn_complete()
    assert history.replay_items() == [model("fresh")]
    assert "turns=1" in repr(history)


@pytest.mark.parametrize("limits", [{"max_turns": 0}, {"max_chars": 0}])
def test_limits_are_validated(limits: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        HistoryLimits(**limits)


_EVENTS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["user_text", "user_transcript"]), st.text(max_size=12)),
        st.tuples(st.sampled_from(["model_text", "model_transcript"]), st.text(max_size=12)),
        st.tuples(st.sampled_from(["call", "result"]), st.sampled_from(["c1", "c2", "c3"])),
        st.tuples(st.sampled_from(["interrupted", "turn_complete"]), st.none()),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(_EVENTS, st.integers(1, 5), st.integers(1, 60))
def test_any_event_sequence_gives_valid_bounded_items(
    events: list[tuple[str, str | None]], max_turns: int, max_chars: int
) -> None:
    history = ConversationHistory(HistoryLimits(max_turns=max_turns, max_chars=max_chars))
    largest_turn = 0
    for name, arg in events:
        if name == "call":
            assert arg is not None
            history.tool_call(ToolCall(arg, "f", {"n": arg}))
        elif name == "result":
            assert arg is not None
            history.tool_result(ToolResult(arg, "f", {"r": arg}))
        elif name in ("interrupted",):
            history.interrupted()
        elif name == "turn_complete":
            before = history.chars
            if history.turn_complete():
                largest_turn = max(largest_turn, history.chars - before)
        else:
            assert arg is not None
            getattr(history, name)(arg)
    items = history.replay_items()
    for item in items:
        assert [item.text, item.tool_call, item.tool_result].count(None) == 2
        assert item.text is None or item.text == item.text.strip() != ""
        assert (item.tool_call is not None) <= (item.role == "model")
        assert (item.tool_result is not None) <= (item.role == "user")
    assert history.turns <= max_turns
    assert history.chars <= max_chars or history.turns == 1
    calls = {i.tool_call.id for i in items if i.tool_call}
    results = {i.tool_result.id for i in items if i.tool_result}
    assert calls == results


def test_seeded_history_carries_tool_calls_and_results_as_text() -> None:
    """Native functionCall/functionResponse parts in seeded history get the connection
    closed with 1007: they are written as text."""
    from realtime_resumption.gemini.messages import ClientMessage, Content
    from realtime_resumption.transport import ReplayItem, ToolCall, ToolResult

    message = ClientMessage.history(
        [
            ReplayItem("user", "please look up flights"),
            ReplayItem("model", tool_call=ToolCall("fc-1", "lookup", {"to": "Oslo"})),
            ReplayItem("user", tool_result=ToolResult("fc-1", "lookup", {"flights": 2})),
            ReplayItem("model", "there are two"),
        ]
    )
    assert message is not None and isinstance(message.payload, Content)
    parts = [part for turn in message.payload.turns for part in turn.parts or ()]
    assert all(p.function_call is None and p.function_response is None for p in parts)
    texts = [
        (turn.role, "".join(p.text or "" for p in turn.parts or ()))
        for turn in message.payload.turns
    ]
    assert texts == [
        ("user", "please look up flights"),
        ("model", '[called lookup (call fc-1) with {"to": "Oslo"}]'),
        ("user", '[lookup (call fc-1) returned {"flights": 2}]'),
        ("model", "there are two"),
    ]
