"""ConversationState: the conversation in the server's order, the input buffer counted to the
byte on the speech events' time base, and the turn boundary."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from realtime_resumption.openai.conversation_state import ConversationState, HeldItem
from realtime_resumption.openai.realtime_server_events import (
    AudioDelta,
    BufferCleared,
    BufferCommitted,
    ContentPart,
    FunctionArgumentsDone,
    InputTranscriptCompleted,
    InputTranscriptDelta,
    InputTranscriptFailed,
    Item,
    ItemAnnounced,
    ItemDeleted,
    ItemTruncated,
    OutputItem,
    OutputTextDelta,
    ResponseCreated,
    ResponseDone,
    SessionEvent,
    SpeechStarted,
    SpeechStopped,
)
from realtime_resumption.openai.session_config import AudioFormat, ServerVad, SessionConfig

MS = 48
"""Bytes per millisecond of PCM16 at 24 kHz."""


def audio(ms: int, fill: int) -> bytes:
    """``ms`` of input whose bytes all read ``fill`` (so a slice shows where it came from)."""
    return bytes([fill]) * (ms * MS)


def added(item: Item, previous: str | None) -> ItemAnnounced:
    return ItemAnnounced("conversation.item.added", "added", item, previous)


def user_text(item_id: str, text: str) -> Item:
    return Item(item_id, "message", "user", "completed", (ContentPart("input_text", text),))


def session(config: SessionConfig) -> SessionEvent:
    return SessionEvent("session.updated", False, "sess_1", "gpt-realtime", 1_900_000_000, config)


def spoken_turn(state: ConversationState, item_id: str, start_ms: int, end_ms: int) -> None:
    """The server's VAD turn: speech from ``start_ms`` to ``end_ms``, committed."""
    state.receive(SpeechStarted("input_audio_buffer.speech_started", item_id, start_ms))
    state.receive(SpeechStopped("input_audio_buffer.speech_stopped", item_id, end_ms))
    previous = state.items[-1].id if state.items else None
    state.receive(BufferCommitted("input_audio_buffer.committed", item_id, previous))
    state.receive(
        added(
            Item(item_id, "message", "user", "completed", (ContentPart("input_audio"),)), previous
        )
    )


def answer(
    state: ConversationState, item_id: str, words: list[str], *, chunk_ms: int = 100
) -> None:
    """An answer: each chunk's audio delta, then its transcript delta (the service's order)."""
    state.receive(ResponseCreated("response.created", "resp_1", "in_progress"))
    item = Item(item_id, "message", "assistant", "in_progress")
    state.receive(OutputItem("response.output_item.added", "added", "resp_1", 0, item))
    for word in words:
        state.receive(
            AudioDelta("response.output_audio.delta", "resp_1", item_id, 0, bytes(chunk_ms * MS))
        )
        state.receive(
            OutputTextDelta(
                "response.output_audio_transcript.delta", "audio", "resp_1", item_id, 0, word
            )
        )
    state.receive(ResponseDone("response.done", "resp_1", "completed", None, None, (item_id,)))


def test_items_take_the_place_the_server_gives_them() -> None:
    state = ConversationState()
    state.receive(added(user_text("b", "second"), None))
    state.receive(added(user_text("a", "first"), None))  # no predecessor: first
    state.receive(added(user_text("d", "fourth"), "b"))
    state.receive(added(user_text("c", "third"), "b"))  # inserted between
    state.receive(added(user_text("e", "fifth"), "gone"))  # an id it never held: last
    assert [i.id for i in state.items] == ["a", "b", "c", "d", "e"]
    assert [i.text for i in state.items] == ["first", "second", "third", "fourth", "fifth"]
    state.receive(ItemDeleted("conversation.item.deleted", "c"))
    assert [i.id for i in state.items] == ["a", "b", "d", "e"]
    assert state.item("c") is None


def test_a_spoken_turn_keeps_its_speech_until_its_transcript_comes() -> None:
    state = ConversationState()
    state.appended(audio(600, 1) + audio(900, 2) + audio(300, 3))
    spoken_turn(state, "u1", 600, 1500)
    held = state.item("u1")
    assert held is not None and held.has_audio and held.transcript_pending
    assert held.audio == audio(900, 2)
    assert state.uncommitted_audio() == audio(300, 3)
    state.receive(
        InputTranscriptDelta("conversation.item.input_audio_transcription.delta", "u1", 0, "hel")
    )
    assert state.item("u1").text == "hel"  # type: ignore[union-attr]
    state.receive(
        InputTranscriptCompleted(
            "conversation.item.input_audio_transcription.completed", "u1", 0, "hello"
        )
    )
    held = state.item("u1")
    assert held is not None and held.text == "hello"
    assert not held.transcript_pending and held.audio == b""


def test_a_transcript_that_fails_leaves_the_turn_its_speech() -> None:
    state = ConversationState()
    state.appended(audio(400, 5))
    spoken_turn(state, "u1", 0, 400)
    state.receive(
        InputTranscriptFailed(
            "conversation.item.input_audio_transcription.failed", "u1", 0, "x", "y"
        )
    )
    held = state.item("u1")
    assert held is not None and held.transcript_pending and held.audio == audio(400, 5)


def test_a_client_commit_holds_everything_sent_before_it() -> None:
    state = ConversationState()
    state.receive(session(SessionConfig(turn_detection=None)))
    state.appended(audio(300, 1))
    state.sent_commit()
    state.appended(audio(200, 2))
    assert not state.at_turn_boundary  # the commit is not confirmed yet
    assert state.uncommitted_audio() == audio(300, 1) + audio(200, 2)
    state.receive(BufferCommitted("input_audio_buffer.committed", "u1", None))
    assert state.item("u1").audio == audio(300, 1)  # type: ignore[union-attr]
    assert state.uncommitted_audio() == audio(200, 2)
    assert not state.awaiting_response  # a client's commit never asks for an answer
    assert state.at_turn_boundary


def test_a_clear_removes_what_was_sent_before_it_at_once() -> None:
    state = ConversationState()
    state.appended(audio(300, 1))
    state.sent_clear()
    state.appended(audio(100, 2))
    assert state.uncommitted_audio() == audio(100, 2)
    assert not state.at_turn_boundary
    state.receive(BufferCleared("input_audio_buffer.cleared"))
    assert state.uncommitted_audio() == audio(100, 2)
    assert state.at_turn_boundary


def test_quiet_input_is_kept_only_as_long_as_a_speech_start_can_lag() -> None:
    state = ConversationState(idle_audio_ms=200)
    state.appended(audio(500, 1) + audio(100, 2))
    assert state.uncommitted_audio() == audio(100, 1) + audio(100, 2)
    state.receive(SpeechStarted("input_audio_buffer.speech_started", "u1", 450))
    state.appended(audio(1000, 3))  # speech under way: nothing more is dropped
    assert state.uncommitted_audio() == audio(100, 1) + audio(100, 2) + audio(1000, 3)
    assert state.appended_ms == 1600


def test_speech_that_started_before_what_was_kept_is_clipped_not_invented() -> None:
    state = ConversationState(idle_audio_ms=100)
    state.appended(audio(300, 1))
    spoken_turn(state, "u1", 0, 300)
    assert state.item("u1").audio == audio(100, 1)  # type: ignore[union-attr]


def test_untranscribed_speech_is_bounded_the_newest_kept() -> None:
    state = ConversationState(max_item_audio_ms=500)
    state.appended(audio(400, 1))
    spoken_turn(state, "u1", 0, 400)
    state.appended(audio(300, 2))
    spoken_turn(state, "u2", 400, 700)
    assert state.item("u1").audio == b""  # type: ignore[union-attr]
    assert state.item("u2").audio == audio(300, 2)  # type: ignore[union-attr]


def test_a_truncate_keeps_the_words_whose_audio_started_before_the_cut() -> None:
    state = ConversationState()
    answer(state, "a1", ["one ", "two ", "three ", "four"])
    assert state.item("a1").text == "one two three four"  # type: ignore[union-attr]
    assert state.item("a1").audio_ms == 400  # type: ignore[union-attr]
    state.receive(ItemTruncated("conversation.item.truncated", "a1", 0, 250))
    held = state.item("a1")
    assert held is not None and held.heard_ms == 250 and held.text == "one two three"
    state.truncate("a1", 100)  # a cut the client knows of, that no server confirms
    assert state.item("a1").text == "one"  # type: ignore[union-attr]


def test_an_answers_words_come_from_its_item_when_no_delta_came() -> None:
    state = ConversationState()
    item = Item(
        "a1",
        "message",
        "assistant",
        "completed",
        (ContentPart("output_audio", transcript="hi there"),),
    )
    state.receive(ItemAnnounced("conversation.item.done", "done", item, None))
    assert state.item("a1").text == "hi there"  # type: ignore[union-attr]


def test_output_for_an_item_never_announced_makes_it_the_newest() -> None:
    state = ConversationState()
    state.receive(added(user_text("u1", "hi"), None))
    state.receive(OutputTextDelta("response.output_text.delta", "text", "r", "a9", 0, "yes"))
    assert [(i.id, i.kind, i.text) for i in state.items] == [
        ("u1", "user", "hi"),
        ("a9", "assistant", "yes"),
    ]


def test_a_call_waits_for_its_output_and_a_cut_call_for_nothing() -> None:
    state = ConversationState()
    call = Item(
        "c1", "function_call", status="in_progress", call_id="call_1", name="weather", arguments=""
    )
    state.receive(OutputItem("response.output_item.added", "added", "r", 0, call))
    state.receive(
        FunctionArgumentsDone(
            "response.function_call_arguments.done", "r", "c1", "call_1", "weather", '{"a": 1}'
        )
    )
    held = state.item("c1")
    assert held is not None and held.arguments == '{"a": 1}' and held.response_id == "r"
    assert state.calls_awaiting_output() == ("call_1",)
    assert not state.at_turn_boundary
    output = Item(
        "o1", "function_call_output", status="completed", call_id="call_1", output="sunny"
    )
    state.receive(added(output, "c1"))
    assert state.calls_awaiting_output() == ()
    assert state.item("o1").text == "sunny"  # type: ignore[union-attr]
    cut = Item(
        "c2", "function_call", status="incomplete", call_id="call_2", name="weather", arguments="{"
    )
    state.receive(OutputItem("response.output_item.done", "done", "r2", 0, cut))
    assert state.calls_awaiting_output() == ()


def _speaking(state: ConversationState) -> None:
    state.receive(SpeechStarted("input_audio_buffer.speech_started", "u1", 0))


def _stopped(state: ConversationState) -> None:
    _speaking(state)
    state.receive(SpeechStopped("input_audio_buffer.speech_stopped", "u1", 0))


def _answering(state: ConversationState) -> None:
    state.receive(ResponseCreated("response.created", "r1", "in_progress"))


def _committed_for_an_answer(state: ConversationState) -> None:
    state.appended(audio(100, 1))
    spoken_turn(state, "u1", 0, 100)


def _commit_sent(state: ConversationState) -> None:
    state.sent_commit()


@pytest.mark.parametrize(
    "step",
    [_speaking, _stopped, _answering, _committed_for_an_answer, _commit_sent],
    ids=lambda f: f.__name__.strip("_"),
)
def test_no_turn_boundary_while_a_turn_is_under_way(
    step: Callable[[ConversationState], None],
) -> None:
    state = ConversationState()
    state.receive(session(SessionConfig()))
    assert state.at_turn_boundary
    step(state)
    assert not state.at_turn_boundary


def test_the_boundary_comes_back_when_the_answer_is_done() -> None:
    state = ConversationState()
    state.receive(session(SessionConfig()))
    state.appended(audio(100, 1))
    spoken_turn(state, "u1", 0, 100)
    assert state.awaiting_response and not state.at_turn_boundary
    answer(state, "a1", ["ok"])
    assert state.at_turn_boundary and state.response_in_progress is None


def test_a_commit_the_server_will_not_answer_by_itself_is_a_boundary() -> None:
    state = ConversationState()
    state.receive(session(SessionConfig(turn_detection=ServerVad(create_response=False))))
    state.appended(audio(100, 1))
    spoken_turn(state, "u1", 0, 100)
    assert not state.awaiting_response and state.at_turn_boundary


def test_before_any_session_event_a_vad_turn_waits_for_the_default_answer() -> None:
    state = ConversationState()
    state.appended(audio(100, 1))
    spoken_turn(state, "u1", 0, 100)
    assert state.awaiting_response


def test_the_formats_and_identity_come_from_the_session() -> None:
    state = ConversationState()
    state.receive(
        session(SessionConfig(input_format=AudioFormat("pcmu"), output_format=AudioFormat("pcma")))
    )
    assert state.session_id == "sess_1" and state.expires_at == 1_900_000_000
    state.appended(bytes(800))  # 100 ms of G.711
    assert state.appended_ms == 100
    spoken_turn(state, "u1", 25, 75)
    assert len(state.item("u1").audio) == 400  # type: ignore[union-attr]
    state.receive(ResponseCreated("response.created", "r", "in_progress"))
    state.receive(AudioDelta("response.output_audio.delta", "r", "a1", 0, bytes(160)))
    assert state.item("a1").audio_ms == 20  # type: ignore[union-attr]


def test_items_given_to_a_new_session_keep_what_the_echo_leaves_out() -> None:
    seeded = HeldItem("u1", "user", has_audio=True, transcript_pending=True, audio=b"speech")
    state = ConversationState(conversation=[seeded, HeldItem("a1", "assistant", text="hi")])
    echo = Item("u1", "message", "user", "completed", (ContentPart("input_audio"),))
    state.receive(ItemAnnounced("conversation.item.done", "done", echo, "root"))
    assert state.items == (
        replace(seeded, status="completed"),
        HeldItem("a1", "assistant", text="hi"),
    )
    assert state.item("u1").audio == b"speech"  # type: ignore[union-attr]


def test_a_text_item_given_to_a_new_session_stays_text_through_its_echo() -> None:
    state = ConversationState(conversation=[HeldItem("u1", "user", text="hello")])
    echo = Item("u1", "message", "user", "completed", (ContentPart("input_text", "hello"),))
    state.receive(ItemAnnounced("conversation.item.added", "added", echo, None))
    assert state.items == (HeldItem("u1", "user", text="hello", status="completed"),)


def test_bounds_below_zero_are_refused() -> None:
    with pytest.raises(ValueError, match="idle_audio_ms"):
        ConversationState(idle_audio_ms=-1)
