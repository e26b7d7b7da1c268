"""The generation lifecycle bookkeeping, on its own: pure state, explicit times."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from realtime_resumption.generation import (
    CANCEL_BOUND,
    TOOL_CALL_GRACE,
    Effect,
    FirstAudio,
    GenerationEnded,
    GenerationStarted,
    GenerationTracker,
    ReasoningDone,
    ReasoningStarted,
    TextDone,
    TurnCompleted,
    TurnInterrupted,
)
from realtime_resumption.transport import GenerationEndReason as Reason


def _ends(effects: list[Effect]) -> list[tuple[str, Reason]]:
    return [(e.generation_id, e.reason) for e in effects if isinstance(e, GenerationEnded)]


def test_normal_answer_opens_once_and_ends_after_the_grace_window() -> None:
    t = GenerationTracker()
    assert t.model_output(0.0, "audio") == [GenerationStarted("gen_1"), FirstAudio("gen_1")]
    assert t.active_server_turn_id == 1
    assert t.model_output(0.1, "audio") == []
    assert t.model_output(0.1, "transcript") == []
    assert t.generation_complete(0.2) == []
    assert t.turn_complete(0.2) == [TurnCompleted(1)]
    assert t.active_server_turn_id is None
    assert t.generation_id == "gen_1"
    assert t.next_deadline == pytest.approx(0.2 + TOOL_CALL_GRACE)
    assert t.tick(0.2 + TOOL_CALL_GRACE / 2) == []
    assert t.tick(0.2 + TOOL_CALL_GRACE) == [GenerationEnded("gen_1", Reason.GENERATION_COMPLETE)]
    assert t.generation_id is None
    assert t.next_deadline is None


def test_without_functions_an_answer_ends_with_its_turn() -> None:
    t = GenerationTracker()
    t.model_output(0.0, "audio")
    assert t.turn_complete(0.2, tool_call_may_follow=False) == [
        TurnCompleted(1),
        GenerationEnded("gen_1", Reason.GENERATION_COMPLETE),
    ]
    assert t.generation_id is None and t.next_deadline is None
    # A pending call still holds the answer, whatever the setup says.
    t.model_output(1.0, "audio")
    t.tool_calls(1.1, ["fc-1"])
    assert t.turn_complete(1.2, tools_pending=True, tool_call_may_follow=False) == [
        TurnCompleted(2)
    ]
    assert t.generation_id == "gen_2"


def test_first_audio_fires_once_per_generation() -> None:
    t = GenerationTracker(tool_call_grace=0.0)
    first = [e for e in t.model_output(0, "audio") + t.model_output(0, "audio")]
    t.turn_complete(1)
    second = t.tick(1) + t.model_output(2, "audio") + t.model_output(2, "audio")
    firsts = [e for e in first + second if isinstance(e, FirstAudio)]
    assert firsts == [FirstAudio("gen_1"), FirstAudio("gen_2")]


def test_interrupted_answer_ends_once_and_its_turn_completes_with_the_same_id() -> None:
    t = GenerationTracker()
    t.model_output(0, "audio")
    assert t.interrupted(1) == [
        GenerationEnded("gen_1", Reason.INTERRUPTED),
        TurnInterrupted(1),
    ]
    assert t.active_server_turn_id is None
    assert t.turn_complete(1.1) == [TurnCompleted(1)]
    assert t.tick(10) == []


def test_text_done_comes_before_turn_complete_and_once() -> None:
    t = GenerationTracker()
    t.model_output(0, "text")
    t.model_output(0, "text")
    assert t.turn_complete(1) == [TextDone(1), TurnCompleted(1)]


def test_text_done_at_generation_complete_is_not_repeated() -> None:
    t = GenerationTracker()
    t.model_output(0, "text")
    assert t.generation_complete(0.5) == [TextDone(1)]
    assert t.turn_complete(0.6) == [TurnCompleted(1)]


def test_audio_turn_has_no_text_done() -> None:
    t = GenerationTracker()
    t.model_output(0, "audio")
    assert t.turn_complete(1) == [TurnCompleted(1)]


def test_tool_call_answer_is_one_generation_across_two_provider_turns() -> None:
    t = GenerationTracker(tool_call_grace=0.5)
    effects = t.tool_calls(0, ["c1"])
    assert effects == [GenerationStarted("gen_1")]
    assert t.turn_complete(0.1, tools_pending=True) == [TurnCompleted(1)]
    # Waiting for the tool result: no grace window runs out.
    assert not t.answer_in_progress
    assert t.next_deadline is None
    assert t.tick(100) == []
    assert t.model_output(101, "audio") == [FirstAudio("gen_1")]
    assert t.active_server_turn_id == 2
    assert t.turn_complete(102) == [TurnCompleted(2)]
    assert t.tick(102.5) == [GenerationEnded("gen_1", Reason.GENERATION_COMPLETE)]


def test_tool_call_after_turn_complete_within_the_grace_window_joins_the_answer() -> None:
    t = GenerationTracker(tool_call_grace=0.5)
    t.model_output(0, "audio")
    t.turn_complete(1)
    assert t.tool_calls(1.2, ["c1"]) == []
    assert t.generation_id == "gen_1"
    assert t.active_server_turn_id == 2
    assert t.tick(5) == []
    t.model_output(6, "audio")
    t.turn_complete(7)
    assert t.tick(7.5) == [GenerationEnded("gen_1", Reason.GENERATION_COMPLETE)]


def test_tool_call_after_the_grace_window_opens_a_new_generation_even_without_a_tick() -> None:
    t = GenerationTracker(tool_call_grace=0.5)
    t.model_output(0, "audio")
    t.turn_complete(1)
    assert t.tool_calls(1.6, ["c1"]) == [
        GenerationEnded("gen_1", Reason.GENERATION_COMPLETE),
        GenerationStarted("gen_2"),
    ]


def test_model_audio_in_the_grace_window_is_a_new_answer() -> None:
    t = GenerationTracker(tool_call_grace=0.5)
    t.model_output(0, "audio")
    t.turn_complete(1)
    assert t.model_output(1.1, "audio") == [
        GenerationEnded("gen_1", Reason.GENERATION_COMPLETE),
        GenerationStarted("gen_2"),
        FirstAudio("gen_2"),
    ]


def test_trailing_output_transcription_stays_with_the_answer() -> None:
    t = GenerationTracker(tool_call_grace=0.5)
    t.model_output(0, "audio")
    t.turn_complete(1)
    assert t.model_output(1.1, "transcript") == []
    assert t.generation_id == "gen_1"


def test_cancelled_answer_is_suppressed_and_ends_when_the_provider_turn_ends() -> None:
    t = GenerationTracker()
    t.model_output(0, "audio")
    assert t.cancel(0.5) == []
    assert t.suppressing
    assert t.cancel(0.6) == []  # idempotent
    assert t.model_output(0.7, "audio") == []
    assert t.tool_calls(0.7, ["c9"]) == []
    assert t.turn_complete(1) == [GenerationEnded("gen_1", Reason.CANCELLED), TurnCompleted(1)]
    assert not t.suppressing
    assert t.model_output(2, "audio")[0] == GenerationStarted("gen_2")


def test_cancel_ends_after_the_bound_but_keeps_suppressing_the_turn() -> None:
    t = GenerationTracker()
    t.model_output(0, "audio")
    t.cancel(1)
    assert t.next_deadline == pytest.approx(1 + CANCEL_BOUND)
    assert t.tick(1 + CANCEL_BOUND) == [GenerationEnded("gen_1", Reason.CANCELLED)]
    assert t.model_output(4, "audio") == []
    # The provider's interruption of a cancelled answer is not reported again.
    assert t.interrupted(5) == []
    assert t.turn_complete(5.1) == [TurnCompleted(1)]


def test_cancel_without_an_answer_is_a_no_op() -> None:
    t = GenerationTracker()
    assert t.cancel(0) == []
    assert not t.suppressing
    assert t.model_output(1, "audio")[0] == GenerationStarted("gen_1")


def test_cancel_after_the_provider_turn_ended_ends_at_once() -> None:
    t = GenerationTracker()
    t.model_output(0, "audio")
    t.turn_complete(1)
    assert t.cancel(1.1) == [GenerationEnded("gen_1", Reason.CANCELLED)]
    assert not t.suppressing


def test_connection_lost_ends_the_answer_in_progress_with_the_reason_given() -> None:
    t = GenerationTracker()
    t.tool_calls(0, ["c1"])
    assert t.answer_in_progress
    assert t.connection_lost(1) == [GenerationEnded("gen_1", Reason.DISCONNECTED)]
    assert t.active_server_turn_id is None
    assert not t.answer_in_progress
    t.model_output(2, "audio")
    assert t.connection_lost(3, Reason.MOVED) == [GenerationEnded("gen_2", Reason.MOVED)]


def test_connection_lost_ends_a_finished_answer_as_complete() -> None:
    t = GenerationTracker()
    t.model_output(0, "audio")
    t.turn_complete(1)
    assert not t.answer_in_progress
    assert t.connection_lost(1.1, Reason.MOVED) == [
        GenerationEnded("gen_1", Reason.GENERATION_COMPLETE)
    ]


def test_tool_call_cancellation_lets_a_waiting_answer_finish() -> None:
    t = GenerationTracker(tool_call_grace=0.5)
    t.tool_calls(0, ["c1", "c2"])
    t.turn_complete(1, tools_pending=True)
    t.tool_calls_cancelled(2, tools_pending=True)
    assert t.next_deadline is None
    t.tool_calls_cancelled(2, tools_pending=False)
    assert t.next_deadline == pytest.approx(2.5)
    assert t.tick(2.5) == [GenerationEnded("gen_1", Reason.GENERATION_COMPLETE)]


def test_server_turn_ids_are_monotonic_and_inactive_between_turns() -> None:
    t = GenerationTracker(tool_call_grace=0.0)
    seen = []
    for n in range(4):
        t.model_output(n, "audio")
        seen.append(t.active_server_turn_id)
        t.turn_complete(n + 0.5)
        assert t.active_server_turn_id is None
    assert seen == [1, 2, 3, 4]


def test_reasoning_is_timed_from_first_thought_to_first_answer_output() -> None:
    t = GenerationTracker()
    assert t.model_output(1.0, "thought") == [GenerationStarted("gen_1"), ReasoningStarted("gen_1")]
    assert t.model_output(1.5, "thought") == []
    assert t.model_output(3.0, "audio") == [ReasoningDone("gen_1", 2.0), FirstAudio("gen_1")]


def test_negative_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        GenerationTracker(tool_call_grace=-1)


# --- every start is paired with exactly one end, whatever the order of facts -----------------


class _Session:
    """The tracker with the pending tool calls a transport would keep beside it."""

    def __init__(self) -> None:
        self.t = GenerationTracker()
        self.pending: list[str] = []

    def calls(self, now: float) -> list[Effect]:
        effects = self.t.tool_calls(now, [f"c{now}"])
        if not self.t.suppressing:
            self.pending.append(f"c{now}")
        return effects

    def answer_oldest(self, now: float) -> list[Effect]:
        del self.pending[:1]
        return []

    def cancel_oldest(self, now: float) -> list[Effect]:
        del self.pending[:1]
        return self.t.tool_calls_cancelled(now, tools_pending=bool(self.pending))


_Step = Callable[[_Session, float], list[Effect]]

_STEPS: dict[str, _Step] = {
    "audio": lambda s, now: s.t.model_output(now, "audio"),
    "text": lambda s, now: s.t.model_output(now, "text"),
    "transcript": lambda s, now: s.t.model_output(now, "transcript"),
    "thought": lambda s, now: s.t.model_output(now, "thought"),
    "tool_call": _Session.calls,
    "tool_result": _Session.answer_oldest,
    "tool_cancel": _Session.cancel_oldest,
    "generation_complete": lambda s, now: s.t.generation_complete(now),
    "interrupted": lambda s, now: s.t.interrupted(now),
    "turn_complete": lambda s, now: s.t.turn_complete(now, tools_pending=bool(s.pending)),
    "cancel": lambda s, now: s.t.cancel(now),
    "tick": lambda s, now: s.t.tick(now),
    "lost": lambda s, now: s.t.connection_lost(now),
    "moved": lambda s, now: s.t.connection_lost(now, Reason.MOVED),
}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(_STEPS)), st.floats(min_value=0.0, max_value=3.0)),
        max_size=40,
    )
)
def test_starts_and_ends_pair_exactly_once(steps: list[tuple[str, float]]) -> None:
    session = _Session()
    t = session.t
    now = 0.0
    open_ids: list[str] = []
    ended: list[str] = []
    turn_ids: list[int] = []
    for name, dt in steps:
        now += dt
        for effect in _STEPS[name](session, now):
            if isinstance(effect, GenerationStarted):
                assert not open_ids, "two generations open at once"
                open_ids.append(effect.generation_id)
            elif isinstance(effect, GenerationEnded):
                assert open_ids == [effect.generation_id]
                open_ids.clear()
                ended.append(effect.generation_id)
            elif isinstance(effect, TurnCompleted | TurnInterrupted):
                turn_ids.append(effect.server_turn_id)
        assert t.generation_id == (open_ids[0] if open_ids else None)
        if name == "turn_complete":
            assert t.active_server_turn_id is None
    for effect in t.connection_lost(now + 100):
        assert isinstance(effect, GenerationEnded)
        assert open_ids == [effect.generation_id]
        open_ids.clear()
    assert not open_ids
    assert len(ended) == len(set(ended))
    assert turn_ids == sorted(turn_ids)


def test_a_new_user_turn_ends_an_answer_in_its_grace_window() -> None:
    t = GenerationTracker(tool_call_grace=0.5)
    t.model_output(0.0, "audio")
    t.turn_complete(0.1)
    assert t.user_turn(0.2) == [GenerationEnded("gen_1", Reason.GENERATION_COMPLETE)]
    # A tool call now answers the new turn: a generation of its own.
    assert t.tool_calls(0.3, ["fc-1"])[0] == GenerationStarted("gen_2")
    # An answer still producing output, or waiting for its tools, is not ended by it.
    assert t.user_turn(0.4) == []
    assert t.generation_id == "gen_2"
