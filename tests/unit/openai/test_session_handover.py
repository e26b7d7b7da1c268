"""``plan_handover``: what a new session is given from an old one's state (the seed, the input
no item holds, the unconfirmed items, and whether to ask for an answer)."""

from __future__ import annotations

from realtime_resumption.openai.conversation_state import ConversationState
from realtime_resumption.openai.realtime_server_events import (
    AudioDelta,
    FunctionArgumentsDone,
    InputTranscriptCompleted,
    Item,
    OutputItem,
    OutputTextDelta,
    ResponseCreated,
    ResponseDone,
)
from realtime_resumption.openai.session_handover import plan_handover
from tests.unit.openai.test_conversation_state import MS, added, audio, spoken_turn, user_text


def heard(state: ConversationState, item_id: str, words: str) -> None:
    state.receive(
        InputTranscriptCompleted(
            "conversation.item.input_audio_transcription.completed", item_id, 0, words
        )
    )


def partial_answer(state: ConversationState, item_id: str, words: list[str]) -> None:
    """An answer under way: each word after its 100 ms of audio, no ``response.done``."""
    state.receive(ResponseCreated("response.created", "resp_9", "in_progress"))
    item = Item(item_id, "message", "assistant", "in_progress")
    state.receive(OutputItem("response.output_item.added", "added", "resp_9", 0, item))
    for word in words:
        state.receive(
            AudioDelta("response.output_audio.delta", "resp_9", item_id, 0, bytes(100 * MS))
        )
        state.receive(
            OutputTextDelta(
                "response.output_audio_transcript.delta", "audio", "resp_9", item_id, 0, word
            )
        )


def test_an_answer_the_end_cut_is_kept_as_heard_and_the_question_is_asked_again() -> None:
    state = ConversationState()
    state.appended(audio(500, 1) + audio(200, 0))
    spoken_turn(state, "u1", 0, 500)
    heard(state, "u1", "what time is it")
    partial_answer(state, "a1", ["It ", "is "])
    plan = plan_handover(state)
    assert plan.cut == ("a1",) and plan.answer
    assert [(i.id, i.kind, i.text) for i in plan.seed.items] == [
        ("u1", "user", "what time is it"),
        ("a1", "assistant", "It is"),
    ]
    assert state.item("a1").heard_ms == 200  # type: ignore[union-attr]


def test_a_finished_turn_asks_for_nothing_and_carries_the_uncommitted_input() -> None:
    state = ConversationState()
    state.appended(audio(500, 1) + audio(100, 0))
    spoken_turn(state, "u1", 0, 500)
    heard(state, "u1", "hello")
    state.receive(ResponseCreated("response.created", "resp_1", "in_progress"))
    state.receive(ResponseDone("response.done", "resp_1", "completed", None, None, ()))
    state.appended(audio(40, 7))
    plan = plan_handover(state)
    assert not plan.answer and plan.cut == ()
    assert plan.audio == audio(100, 0) + audio(40, 7)


def test_a_committed_turn_the_old_session_owed_an_answer_is_answered_by_the_new_one() -> None:
    state = ConversationState()
    state.appended(audio(500, 1))
    spoken_turn(state, "u1", 0, 500)
    assert state.awaiting_response
    assert plan_handover(state).answer


def test_an_unconfirmed_item_is_sent_again_and_a_confirmed_one_is_not() -> None:
    state = ConversationState()
    state.receive(added(user_text("t1", "typed"), None))
    sent = [
        {"type": "conversation.item.create", "item": {"id": "t1"}},
        {"type": "conversation.item.create", "item": {"id": "t2"}},
    ]
    plan = plan_handover(state, unconfirmed=sent, response_requested=True)
    assert [e["item"]["id"] for e in plan.resend] == ["t2"]
    assert plan.answer  # the response.create the old session never acknowledged


def test_no_answer_is_asked_while_a_function_call_waits_for_its_output() -> None:
    state = ConversationState()
    state.receive(ResponseCreated("response.created", "resp_2", "in_progress"))
    call = Item("fc1", "function_call", None, "completed", (), "call_1", "weather", "{}")
    state.receive(OutputItem("response.output_item.added", "added", "resp_2", 0, call))
    state.receive(
        FunctionArgumentsDone(
            "response.function_call_arguments.done", "resp_2", "fc1", "call_1", "weather", "{}"
        )
    )
    plan = plan_handover(state)
    assert not plan.answer
    assert [i.kind for i in plan.seed.items] == ["function_call"]
