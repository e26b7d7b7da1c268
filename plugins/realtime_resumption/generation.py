"""Generation lifecycle bookkeeping shared by transports: pure state, no I/O, no clock.

A *generation* is one answer of the model, the unit frameworks build per-answer state on. It is
not the provider's turn: an answer whose tool call arrives just after the provider's end of
turn is still one generation, and an answer that waits for a tool result spans two
provider turns. A *server turn* is the provider's own turn, numbered so consumers can
de-duplicate its completion.

The transport feeds provider facts in, each with the current time, and turns the returned
effects into callbacks, in order. Time only matters for two bounds, both reported through
``next_deadline`` for the transport to schedule a ``tick``:

- ``tool_call_grace``: after the provider's end of turn with no tool call pending, the generation stays
  open this long, so a tool call that finishes the same answer joins it. Model output in that
  window is a new answer, and so is anything after the user began a new turn. A session that
  declares no function has no such call to wait for:
  its answers end with the provider's turn. The answer's *output* ends with the provider's
  turn either way (``TurnCompleted``): that is what the frameworks show as the end of speech.
- ``cancel_bound``: a cancelled generation ends when the provider's turn ends, or after this.

A generation cancelled while it waits for tool results (its provider turn over) ends at once;
what the model says next, before the user begins a new turn or is heard speaking, is its
continuation (the answer to a result sent anyway): suppressed as the rest of a cancelled turn
is, never a new one.

The state belongs to the session, not to a connection: the transport only reports
``connection_lost`` when a close ends the session's answer, so a generation can outlive a
switch between connections.

Which tool calls are pending is not tracked here: the transport has one ledger of tool calls
(``tool_calls``) and says, where it matters, whether any call still waits for its
result (``tools_pending``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from realtime_resumption.transport import GenerationEndReason

TOOL_CALL_GRACE: Final = 0.3
"""Seconds a generation stays open after the provider's end of turn, for a tool call that
finishes the same answer."""

CANCEL_BOUND: Final = 2.0
"""Seconds after ``cancel`` by which a cancelled generation ends even if the provider's turn
has not."""

OutputKind = Literal["audio", "text", "transcript", "thought"]
"""Model output: audio, text (text modality), output transcription, a reasoning part."""


@dataclass(frozen=True, slots=True)
class GenerationStarted:
    """A generation opened (fire model-turn start and generation start with this id)."""

    generation_id: str


@dataclass(frozen=True, slots=True)
class GenerationEnded:
    """The generation closed; exactly once per ``GenerationStarted``."""

    generation_id: str
    reason: GenerationEndReason


@dataclass(frozen=True, slots=True)
class FirstAudio:
    """The generation's first audio chunk is about to be delivered."""

    generation_id: str


@dataclass(frozen=True, slots=True)
class TextDone:
    """All text of the server turn was delivered."""

    server_turn_id: int


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    """The server turn completed."""

    server_turn_id: int


@dataclass(frozen=True, slots=True)
class TurnInterrupted:
    """The provider interrupted the server turn."""

    server_turn_id: int


@dataclass(frozen=True, slots=True)
class ReasoningStarted:
    """The model began reasoning for the current generation."""

    generation_id: str


@dataclass(frozen=True, slots=True)
class ReasoningDone:
    """The reasoning step ended, ``duration`` seconds after it began."""

    generation_id: str
    duration: float


Effect = (
    GenerationStarted
    | GenerationEnded
    | FirstAudio
    | TextDone
    | TurnCompleted
    | TurnInterrupted
    | ReasoningStarted
    | ReasoningDone
)


class _Generation:
    """The open generation's own facts."""

    __slots__ = (
        "awaiting_tools",
        "cancel_deadline",
        "cancelled",
        "drain_deadline",
        "first_audio",
        "id",
        "reasoning_done",
        "reasoning_since",
    )

    def __init__(self, generation_id: str) -> None:
        self.id = generation_id
        self.first_audio = False
        self.drain_deadline: float | None = None
        """Set after the provider's end of turn with no tool call pending: the grace window's end."""
        self.awaiting_tools = False
        """The provider's turn completed with tool calls pending and no turn has opened since:
        the answer continues after their results."""
        self.cancelled = False
        self.cancel_deadline: float | None = None
        self.reasoning_since: float | None = None
        self.reasoning_done = False


class GenerationTracker:
    """Pairs generation starts and ends and numbers server turns.

    Every input method takes ``now`` (seconds, any monotonic clock) and returns the effects
    to deliver, in order.
    """

    def __init__(
        self,
        *,
        tool_call_grace: float = TOOL_CALL_GRACE,
        cancel_bound: float = CANCEL_BOUND,
    ) -> None:
        if tool_call_grace < 0 or cancel_bound < 0:
            raise ValueError("tool_call_grace and cancel_bound must be >= 0")
        self._grace = tool_call_grace
        self._cancel_bound = cancel_bound
        self._ids = itertools.count(1)
        self._gen: _Generation | None = None
        self._turn_seq = 0
        self._turn: int | None = None
        self._interrupted_turn: int | None = None
        self._turn_text = False
        self._turn_text_done = False
        self._suppress = False
        self._continuation_cancelled = False
        """An answer was cancelled while it waited for tool results: the next provider turn,
        unless the user begins one first, continues it and is suppressed."""

    # --- queries ------------------------------------------------------------------------------

    @property
    def generation_id(self) -> str | None:
        """The open generation's id, or None."""
        return self._gen.id if self._gen else None

    @property
    def active_server_turn_id(self) -> int | None:
        """The active server turn's id; None between turns (never a stale id)."""
        return self._turn

    @property
    def suppressing(self) -> bool:
        """Output belongs to a cancelled answer (or to its continuation): drop it instead of
        delivering it."""
        return self._suppress or self._continuation_cancelled

    @property
    def answer_in_progress(self) -> bool:
        """The server turn is active, or an answer is open that is neither finished (in its
        grace window) nor waiting for tool results: a switch of connection now cuts it."""
        gen = self._gen
        return self._turn is not None or (
            gen is not None and gen.drain_deadline is None and not gen.awaiting_tools
        )

    @property
    def winding_down(self) -> bool:
        """The server turn was interrupted and its completion has not arrived yet."""
        return self._interrupted_turn is not None

    @property
    def next_deadline(self) -> float | None:
        """When ``tick`` next has something to do, or None."""
        gen = self._gen
        if gen is None:
            return None
        drain, cancel = gen.drain_deadline, gen.cancel_deadline
        if drain is None or cancel is None:
            return cancel if drain is None else drain
        return min(drain, cancel)

    # --- provider facts -----------------------------------------------------------------------

    def model_output(self, now: float, kind: OutputKind) -> list[Effect]:
        """The model produced output. Nothing opens while ``suppressing``; an output
        transcription trailing the provider's turn belongs to the answer that just ended."""
        effects = self._expire(now)
        self._continue_cancelled()
        if self._suppress:
            return effects
        gen = self._gen
        if kind == "transcript" and gen is not None and gen.drain_deadline is not None:
            return effects
        self._open_turn()
        if gen is not None and gen.drain_deadline is not None:
            # Output after the provider's turn ended is a new answer, not this one's tail.
            self._end(GenerationEndReason.GENERATION_COMPLETE, effects)
            gen = None
        if gen is None:
            gen = self._open(effects)
        if kind == "thought":
            if gen.reasoning_since is None:
                gen.reasoning_since = now
                effects.append(ReasoningStarted(gen.id))
            return effects
        self._finish_reasoning(now, gen, effects)
        if kind == "audio" and not gen.first_audio:
            gen.first_audio = True
            effects.append(FirstAudio(gen.id))
        elif kind == "text":
            self._turn_text = True
        return effects

    def tool_calls(self, now: float, call_ids: Sequence[str]) -> list[Effect]:
        """The model asked for tool calls. A call after the provider's end of turn, within the grace window,
        continues the same generation. While ``suppressing`` nothing happens: the calls belong
        to a cancelled answer and must not be answered."""
        effects = self._expire(now)
        self._continue_cancelled()
        if self._suppress or not call_ids:
            return effects
        self._open_turn()
        gen = self._gen or self._open(effects)
        self._finish_reasoning(now, gen, effects)
        gen.drain_deadline = None
        return effects

    def tool_calls_cancelled(self, now: float, *, tools_pending: bool) -> list[Effect]:
        """The provider cancelled tool calls. When no call is left pending
        (``tools_pending``), an answer that waited for them finishes after the grace window."""
        effects = self._expire(now)
        gen = self._gen
        if gen is not None and gen.awaiting_tools and not tools_pending:
            gen.awaiting_tools = False
            gen.drain_deadline = now + self._grace
        return effects

    def generation_complete(self, now: float) -> list[Effect]:
        """The model finished generating (the provider's end of turn follows)."""
        effects = self._expire(now)
        self._text_done(effects)
        return effects

    def interrupted(self, now: float) -> list[Effect]:
        """The provider interrupted the answer. A cancelled answer ends as cancelled and
        reports no interruption: the framework already finalised it. An interruption repeated
        before the turn's completion, with no output between, is the same turn's: reported
        once, and the completion carries its id."""
        effects = self._expire(now)
        self._text_done(effects)
        gen = self._gen
        cancelled = self._suppress
        self._continuation_cancelled = False
        if gen is not None:
            self._finish_reasoning(now, gen, effects)
            reason = GenerationEndReason.CANCELLED if cancelled else GenerationEndReason.INTERRUPTED
            self._end(reason, effects)
        self._suppress = False
        if self._turn is None and self._interrupted_turn is not None:
            return effects
        turn = self._turn if self._turn is not None else self._new_turn_id()
        self._turn = None
        self._interrupted_turn = turn
        if not cancelled:
            effects.append(TurnInterrupted(turn))
        return effects

    def turn_complete(
        self, now: float, *, tools_pending: bool = False, tool_call_may_follow: bool = True
    ) -> list[Effect]:
        """The provider's turn completed. With ``tools_pending`` (a tool call still waits for
        its result, or its result for the socket) the answer continues after the results.
        Otherwise it ends after the grace window, or at once when no tool call can follow
        (``tool_call_may_follow`` False: the session declares no function)."""
        effects = self._expire(now)
        self._text_done(effects)
        gen = self._gen
        finished = False
        if gen is not None:
            self._finish_reasoning(now, gen, effects)
            if gen.cancelled:
                self._end(GenerationEndReason.CANCELLED, effects)
            elif tools_pending:
                gen.awaiting_tools = True
            elif not tool_call_may_follow:
                finished = True  # after the turn's completion, as at the grace window's end
            elif gen.drain_deadline is None:
                gen.drain_deadline = now + self._grace
        # The turn over is the cancelled answer's continuation, if one was awaited.
        self._suppress = self._continuation_cancelled = False
        if self._turn is not None:
            turn = self._turn
        elif self._interrupted_turn is not None:
            turn = self._interrupted_turn
        else:
            turn = self._new_turn_id()
        self._turn = None
        self._interrupted_turn = None
        effects.append(TurnCompleted(turn))
        if finished:
            self._end(GenerationEndReason.GENERATION_COMPLETE, effects)
        return effects

    # --- client facts -------------------------------------------------------------------------

    def user_turn(self, now: float) -> list[Effect]:
        """The user began a new turn (a text turn sent, speech detected). An answer in its
        grace window is over: a tool call from now on answers the new turn, it does not
        finish the old answer."""
        effects = self._expire(now)
        gen = self._gen
        if gen is not None and gen.drain_deadline is not None:
            self._end(GenerationEndReason.GENERATION_COMPLETE, effects)
        # What the model says next answers the user: a cancelled answer's continuation is no
        # longer awaited.
        self._continuation_cancelled = False
        return effects

    def user_spoke(self) -> None:
        """The service heard the user speak (an input transcription): what the model says next
        answers them, so a cancelled answer's continuation is no longer awaited. Unlike
        ``user_turn`` it ends no answer: a transcription may trail the turn it belongs to."""
        self._continuation_cancelled = False

    def cancel(self, now: float) -> list[Effect]:
        """The framework cancelled the answer in flight. Its remaining output is suppressed
        until the provider's turn ends; it ends as cancelled then, or after ``cancel_bound``.
        An answer waiting for tool results ends as cancelled at once, and the provider turn
        that answers those results (if they are sent anyway) is suppressed, unless the user
        begins a turn or is heard speaking first. Idempotent; a no-op when no answer is open."""
        effects = self._expire(now)
        gen = self._gen
        if gen is None or gen.cancelled:
            return effects
        if gen.awaiting_tools:
            # Its provider turn is over; the rest comes only in answer to the results.
            self._continuation_cancelled = True
            self._end(GenerationEndReason.CANCELLED, effects)
            return effects
        if gen.drain_deadline is not None:
            # The provider's turn is already over: nothing more of this answer will come.
            self._end(GenerationEndReason.CANCELLED, effects)
            return effects
        gen.cancelled = True
        gen.cancel_deadline = now + self._cancel_bound
        self._suppress = True
        return effects

    def tick(self, now: float) -> list[Effect]:
        """Apply the bounds that have passed by ``now``. Every other input applies them first
        too, so a late timer never changes the outcome."""
        return self._expire(now)

    def connection_lost(
        self, now: float, reason: GenerationEndReason = GenerationEndReason.DISCONNECTED
    ) -> list[Effect]:
        """The connection that served the answer is gone (closed, or left by a move): the
        server turn is gone, and the open answer ends with ``reason`` (a resumed session does
        not continue it). An answer already finished (in its grace window) ends as
        complete."""
        effects = self._expire(now)
        gen = self._gen
        if gen is not None:
            if gen.drain_deadline is not None:
                self._end(GenerationEndReason.GENERATION_COMPLETE, effects)
            else:
                self._end(reason, effects)
        # No turn is open now: the next one starts its text bookkeeping afresh (``_open_turn``).
        self._turn = None
        self._interrupted_turn = None
        self._suppress = False
        return effects

    # --- internals ----------------------------------------------------------------------------

    def _new_turn_id(self) -> int:
        self._turn_seq += 1
        return self._turn_seq

    def _open_turn(self) -> None:
        if self._turn is None:
            self._turn = self._new_turn_id()
            self._turn_text = False
            self._turn_text_done = False
            if self._gen is not None:
                # The answer that waited for its tool results goes on in this turn: cancelling
                # it now suppresses the rest, and a tool cancellation no longer finishes it.
                self._gen.awaiting_tools = False

    def _continue_cancelled(self) -> None:
        """The model speaks again after an answer cancelled while it waited for tool results:
        this provider turn is that answer's continuation, suppressed to its end."""
        if self._continuation_cancelled:
            self._continuation_cancelled = False
            self._suppress = True

    def _expire(self, now: float) -> list[Effect]:
        effects: list[Effect] = []
        gen = self._gen
        if gen is None:
            return effects
        if gen.cancel_deadline is not None and now >= gen.cancel_deadline:
            # Suppression stays on: the rest of the provider's turn is still this answer's.
            self._end(GenerationEndReason.CANCELLED, effects)
        elif gen.drain_deadline is not None and now >= gen.drain_deadline:
            self._end(GenerationEndReason.GENERATION_COMPLETE, effects)
        return effects

    def _open(self, effects: list[Effect]) -> _Generation:
        gen = _Generation(f"gen_{next(self._ids)}")
        self._gen = gen
        effects.append(GenerationStarted(gen.id))
        return gen

    def _end(self, reason: GenerationEndReason, effects: list[Effect]) -> None:
        gen = self._gen
        if gen is None:
            return
        self._gen = None
        effects.append(GenerationEnded(gen.id, reason))

    def _finish_reasoning(self, now: float, gen: _Generation, effects: list[Effect]) -> None:
        if gen.reasoning_since is not None and not gen.reasoning_done:
            gen.reasoning_done = True
            effects.append(ReasoningDone(gen.id, max(0.0, now - gen.reasoning_since)))

    def _text_done(self, effects: list[Effect]) -> None:
        # Only the open turn's text: its bookkeeping starts when it opens (``_open_turn``). An
        # interrupted turn reported its text at the interruption; a turn numbered without
        # opening (interrupted or completed before any output, e.g. after a cut) had none.
        turn = self._turn
        if turn is None or not self._turn_text or self._turn_text_done:
            return
        self._turn_text_done = True
        effects.append(TextDone(turn))
