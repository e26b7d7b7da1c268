"""Edges of the generation lifecycle the main tests leave open: bounds at their limits, the
reasoning timer, cancelled answers meeting an interruption or tool calls, answers that continue
after their tool results, and which turns report that their text is done."""

from __future__ import annotations

import pytest

from realtime_resumption.generation import (
    CANCEL_BOUND,
    Effect,
    FirstAudio,
    GenerationEnded,
    GenerationStarted,
    GenerationTracker,
    ReasoningDone,
    TextDone,
    TurnCompleted,
    TurnInterrupted,
)
from realtime_resumption.transport import GenerationEndReason as Reason


def _answer_waiting_for_its_tool(t: GenerationTracker) -> None:
    """gen_1 asked for a tool in server turn 1, which completed with the call pending."""
    assert t.tool_calls(0.0, ["c1"]) == [GenerationStarted("gen_1")]
    assert t.turn_complete(0.1, tools_pending=True) == [TurnCompleted(1)]


# --- bounds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bound", [0.0, 0.5])
def test_a_cancel_bound_of_zero_or_under_a_second_is_accepted_and_applied(bound: float) -> None:
    t = GenerationTracker(cancel_bound=bound)
    t.model_output(0.0, "audio")
    assert t.cancel(1.0) == []
    assert t.next_deadline == pytest.approx(1.0 + bound)
    assert t.tick(1.0 + bound) == [GenerationEnded("gen_1", Reason.CANCELLED)]


def test_a_negative_cancel_bound_is_refused_with_a_message_naming_it() -> None:
    with pytest.raises(ValueError, match=r"(?i)cancel_bound"):
        GenerationTracker(cancel_bound=-0.1)


# --- reasoning -------------------------------------------------------------------------------


def test_reasoning_shorter_than_a_second_reports_its_own_duration() -> None:
    t = GenerationTracker()
    t.model_output(1.0, "thought")
    assert t.model_output(1.25, "audio") == [ReasoningDone("gen_1", 0.25), FirstAudio("gen_1")]


def test_reasoning_done_is_reported_once_however_the_answer_goes_on() -> None:
    t = GenerationTracker()
    effects = t.model_output(0.0, "thought") + t.model_output(1.0, "audio")
    effects += t.model_output(1.1, "text") + t.model_output(1.2, "audio")
    effects += t.tool_calls(1.3, ["c1"]) + t.generation_complete(1.4)
    effects += t.turn_complete(1.5, tools_pending=True) + t.interrupted(2.0)
    assert [e for e in effects if isinstance(e, ReasoningDone)] == [ReasoningDone("gen_1", 1.0)]


def test_reasoning_ends_when_the_model_turns_to_a_tool_call() -> None:
    t = GenerationTracker()
    t.model_output(1.0, "thought")
    assert t.tool_calls(1.5, ["c1"]) == [ReasoningDone("gen_1", 0.5)]


# --- tool calls ------------------------------------------------------------------------------


def test_a_tool_call_message_without_calls_opens_nothing() -> None:
    t = GenerationTracker()
    assert t.tool_calls(0.0, []) == []
    assert t.generation_id is None
    assert t.active_server_turn_id is None


def test_tool_calls_of_a_cancelled_answer_open_nothing_after_its_bound() -> None:
    t = GenerationTracker()
    t.model_output(0.0, "audio")
    t.cancel(1.0)
    assert t.tick(1.0 + CANCEL_BOUND) == [GenerationEnded("gen_1", Reason.CANCELLED)]
    # The provider's turn is still the cancelled answer's: its calls are not answered.
    assert t.tool_calls(1.5 + CANCEL_BOUND, ["c1"]) == []
    assert t.generation_id is None
    assert t.turn_complete(2.0 + CANCEL_BOUND) == [TurnCompleted(1)]


def test_a_repeated_tool_cancellation_does_not_extend_the_grace_window() -> None:
    t = GenerationTracker(tool_call_grace=0.5)
    _answer_waiting_for_its_tool(t)
    assert t.tool_calls_cancelled(2.0, tools_pending=False) == []
    assert t.tool_calls_cancelled(2.4, tools_pending=False) == []
    assert t.next_deadline == pytest.approx(2.5)
    assert t.tick(2.5) == [GenerationEnded("gen_1", Reason.GENERATION_COMPLETE)]


@pytest.mark.parametrize("continuation", ["tool_call", "audio"])
def test_a_tool_cancellation_while_the_answer_continues_does_not_end_it(
    continuation: str,
) -> None:
    """After the tool result the answer goes on in server turn 2 (another call, or speech): a
    cancellation that leaves no call pending then does not start a grace window in the middle
    of it."""
    t = GenerationTracker(tool_call_grace=0.5)
    _answer_waiting_for_its_tool(t)
    if continuation == "tool_call":
        assert t.tool_calls(1.0, ["c2"]) == []
    else:
        assert t.model_output(1.0, "audio") == [FirstAudio("gen_1")]
    assert t.tool_calls_cancelled(1.1, tools_pending=False) == []
    assert t.next_deadline is None
    assert t.model_output(5.0, "audio") == (
        [FirstAudio("gen_1")] if continuation == "tool_call" else []
    )
    assert t.generation_id == "gen_1"
    assert t.turn_complete(6.0) == [TurnCompleted(2)]
    assert t.tick(6.5) == [GenerationEnded("gen_1", Reason.GENERATION_COMPLETE)]


def test_cancel_while_the_answer_speaks_after_its_tool_result_suppresses_the_rest() -> None:
    t = GenerationTracker()
    _answer_waiting_for_its_tool(t)
    assert t.model_output(1.0, "audio") == [FirstAudio("gen_1")]
    assert t.cancel(1.5) == []
    assert t.suppressing
    # The rest of server turn 2 is the cancelled answer's: no new generation for it.
    assert t.model_output(1.6, "audio") == []
    assert t.turn_complete(2.0) == [GenerationEnded("gen_1", Reason.CANCELLED), TurnCompleted(2)]


def test_the_answer_to_a_result_sent_after_cancel_is_the_cancelled_answers_continuation() -> None:
    t = GenerationTracker()
    _answer_waiting_for_its_tool(t)
    assert t.cancel(1.0) == [GenerationEnded("gen_1", Reason.CANCELLED)]
    assert t.suppressing
    # The result went anyway: server turn 2 answers it, and belongs to the cancelled answer.
    assert t.tool_calls(1.4, ["c2"]) == []
    assert t.model_output(1.5, "audio") == []
    assert t.model_output(1.6, "transcript") == []
    assert t.suppressing
    assert t.turn_complete(2.0) == [TurnCompleted(2)]
    assert not t.suppressing
    assert t.model_output(3.0, "audio") == [GenerationStarted("gen_2"), FirstAudio("gen_2")]


@pytest.mark.parametrize("lifted_by", ["user_turn", "user_spoke", "interrupted"])
def test_a_user_turn_before_the_continuation_is_answered_as_a_new_generation(
    lifted_by: str,
) -> None:
    t = GenerationTracker()
    _answer_waiting_for_its_tool(t)
    t.cancel(1.0)
    if lifted_by == "user_turn":
        assert t.user_turn(1.5) == []
    elif lifted_by == "user_spoke":
        t.user_spoke()
    else:
        assert t.interrupted(1.5) == [TurnInterrupted(2)]
    assert not t.suppressing
    assert t.model_output(2.0, "audio") == [GenerationStarted("gen_2"), FirstAudio("gen_2")]


# --- interruptions and suppression -----------------------------------------------------------


def test_an_interrupted_cancelled_answer_ends_as_cancelled_and_is_not_reported_interrupted() -> (
    None
):
    t = GenerationTracker()
    t.model_output(0.0, "audio")
    t.cancel(0.5)
    assert t.interrupted(0.6) == [GenerationEnded("gen_1", Reason.CANCELLED)]
    assert t.turn_complete(0.7) == [TurnCompleted(1)]


@pytest.mark.parametrize("cancelled", [False, True])
def test_output_after_an_interruption_is_a_new_answer_delivered_at_once(cancelled: bool) -> None:
    t = GenerationTracker()
    t.model_output(0.0, "audio")
    if cancelled:
        t.cancel(0.5)
    t.interrupted(1.0)
    assert not t.suppressing
    assert t.model_output(1.1, "audio") == [GenerationStarted("gen_2"), FirstAudio("gen_2")]


def test_suppressing_reads_false_whenever_no_cancelled_answer_is_in_flight() -> None:
    t = GenerationTracker()
    assert t.suppressing is False
    for end in (
        lambda now: t.turn_complete(now),
        lambda now: t.interrupted(now),
        lambda now: t.connection_lost(now),
    ):
        t.model_output(0.0, "audio")
        t.cancel(0.1)
        assert t.suppressing is True
        end(0.2)
        assert t.suppressing is False
        t.connection_lost(0.3)


# --- text done -------------------------------------------------------------------------------


def _text_dones(effects: list[Effect]) -> list[Effect]:
    return [e for e in effects if isinstance(e, TextDone)]


def test_an_interruption_before_any_output_reports_no_text_done() -> None:
    t = GenerationTracker()
    assert t.interrupted(0.0) == [TurnInterrupted(1)]
    assert t.turn_complete(0.1) == [TurnCompleted(1)]


def test_after_an_audio_turn_an_interruption_before_any_output_reports_no_text_done() -> None:
    t = GenerationTracker(tool_call_grace=0.0)
    t.model_output(0.0, "audio")
    t.turn_complete(0.5)
    effects = t.interrupted(1.0) + t.turn_complete(1.1)
    assert _text_dones(effects) == []
    assert effects[-1] == TurnCompleted(2)


def test_a_text_answer_cut_by_the_connection_leaves_no_text_done_for_the_next_turn() -> None:
    """The next server turn, on the new connection, is only interrupted: it had no text."""
    t = GenerationTracker()
    t.model_output(0.0, "text")
    assert t.connection_lost(0.5) == [GenerationEnded("gen_1", Reason.DISCONNECTED)]
    assert t.interrupted(1.0) == [TurnInterrupted(2)]
    assert t.turn_complete(1.1) == [TurnCompleted(2)]


def test_an_interrupted_text_turn_reports_text_done_once_at_the_interruption() -> None:
    t = GenerationTracker()
    t.model_output(0.0, "text")
    assert t.interrupted(1.0) == [
        TextDone(1),
        GenerationEnded("gen_1", Reason.INTERRUPTED),
        TurnInterrupted(1),
    ]
    assert t.turn_complete(1.1) == [TurnCompleted(1)]


def test_a_repeated_interruption_of_the_same_turn_keeps_its_id_and_is_reported_once() -> None:
    """The provider may say ``interrupted`` again before the turn's completion: it is still
    the turn that was interrupted, and its completion carries that turn's id."""
    t = GenerationTracker()
    t.model_output(0.0, "audio")
    assert t.interrupted(1.0) == [
        GenerationEnded("gen_1", Reason.INTERRUPTED),
        TurnInterrupted(1),
    ]
    assert t.interrupted(1.2) == []
    assert t.winding_down
    assert t.turn_complete(1.3) == [TurnCompleted(1)]
    assert t.model_output(2.0, "audio")[0] == GenerationStarted("gen_2")
    assert t.active_server_turn_id == 2
