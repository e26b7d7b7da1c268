"""A compact transcript of completed turns, to seed a rebuilt session.

When a handle is refused or expired, the server session is gone and a fresh one starts; it
knows the conversation only through what the transport replays into it
(``replay_history``). :class:`ConversationHistory` keeps, per completed turn, what the user
said (typed text, or the input transcription accumulated from its deltas), what the model
answered (its text, or its output transcription accumulated), and the tool calls with their
results, in order. :meth:`ConversationHistory.replay_items` renders them as
:class:`~realtime_resumption.transport.ReplayItem` values.

Rules:

- A turn is committed by :meth:`ConversationHistory.turn_complete` (the server said the turn
  ended). The turn in progress is never replayed: the outbox replays the input sent after the
  rebuild point instead.
- A model answer that was cut (the server said it was interrupted, or a move broke it) is kept
  as what was actually delivered, followed by ``HistoryLimits.interrupted_marker`` (an
  ellipsis by default), so the model sees that it did not finish.
- User input arriving after the model's answer was interrupted, or typed text sent after the
  model began answering, belongs to the next turn. A transcription delta of the question that
  arrives late, while the model already answers, stays with its question.
- A tool call without its result, or a result without its call, is left out of the replay:
  a session cannot be seeded with half an exchange. The two may sit in different turns (a
  call can arrive after the turn ended, or its result after the turn was committed); they are
  paired across the whole history.
- Bounded: at most ``max_turns`` turns and ``max_chars`` characters (text, and tool
  arguments and results as JSON); the oldest turns are dropped first. The newest turn is
  always kept whole, even when it alone exceeds ``max_chars``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from realtime_resumption.transport import ReplayItem, ToolCall, ToolResult


@dataclass(frozen=True)
class HistoryLimits:
    """Bounds of a :class:`ConversationHistory`."""

    max_turns: int = 50
    max_chars: int = 24_000
    interrupted_marker: str = "…"
    """Appended to a cut answer."""

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.max_chars < 1:
            raise ValueError("max_turns and max_chars must be >= 1")


@dataclass
class _Speech:
    """The model's output between two tool events: text, or else its transcription."""

    text: list[str] = field(default_factory=list)
    transcript: list[str] = field(default_factory=list)
    cut: bool = False

    def render(self, marker: str) -> str:
        spoken = _tidy("".join(self.text)) or _tidy("".join(self.transcript))
        if spoken and self.cut:
            spoken += marker
        return spoken


_Step: TypeAlias = _Speech | ToolCall | ToolResult


@dataclass
class _Turn:
    typed: list[str] = field(default_factory=list)
    heard: list[str] = field(default_factory=list)
    steps: list[_Step] = field(default_factory=list)
    interrupted: bool = False

    @property
    def answered(self) -> bool:
        return bool(self.steps)

    def user_text(self) -> str:
        parts = [_tidy(text) for text in self.typed]
        parts.append(_tidy("".join(self.heard)))
        return "\n".join(part for part in parts if part)


@dataclass(frozen=True)
class _Committed:
    items: tuple[ReplayItem, ...]
    chars: int


def _tidy(text: str) -> str:
    return " ".join(text.split())


def _json_chars(value: dict[str, Any]) -> int:
    return len(json.dumps(value, default=str, ensure_ascii=False))


class ConversationHistory:
    """Completed turns of one conversation; see the module documentation."""

    def __init__(self, limits: HistoryLimits | None = None) -> None:
        self._limits = limits or HistoryLimits()
        self._turns: list[_Committed] = []
        self._chars = 0
        self._turn = _Turn()
        self._next = _Turn()

    # -- the user's side ------------------------------------------------------------------

    def user_text(self, text: str) -> None:
        """The client sent typed text (or text content) as user input."""
        target = self._next if self._turn.answered else self._turn
        target.typed.append(text)

    def user_transcript(self, delta: str) -> None:
        """A delta of the user's input transcription (often mid-word)."""
        target = self._next if self._turn.interrupted else self._turn
        target.heard.append(delta)

    # -- the model's side -----------------------------------------------------------------

    def model_text(self, delta: str) -> None:
        """A delta of the model's text output."""
        if delta:
            self._speech().text.append(delta)

    def model_transcript(self, delta: str) -> None:
        """A delta of the model's output transcription (its spoken answer)."""
        if delta:
            self._speech().transcript.append(delta)

    def tool_call(self, call: ToolCall) -> None:
        """The model asked for ``call``."""
        self._turn.steps.append(call)

    def tool_result(self, result: ToolResult) -> None:
        """The result of a call was sent to the session."""
        self._turn.steps.append(result)

    def interrupted(self) -> None:
        """The model's answer was cut (server ``interrupted``, or a move broke it): keep what
        was delivered, marked as cut; user input from now on belongs to the next turn."""
        self._turn.interrupted = True
        steps = self._turn.steps
        if steps and isinstance(steps[-1], _Speech):
            steps[-1].cut = True

    @property
    def answer_started(self) -> bool:
        """Whether the turn in progress has model output (speech or a tool call)."""
        return self._turn.answered

    def turn_complete(self) -> bool:
        """The turn ended (the server said so): commit it. Returns False when it held nothing."""
        turn, self._turn, self._next = self._turn, self._next, _Turn()
        committed = self._commit(turn)
        if committed is None:
            return False
        self._turns.append(committed)
        self._chars += committed.chars
        self._trim()
        return True

    # -- output ---------------------------------------------------------------------------

    def replay_items(self) -> list[ReplayItem]:
        """The completed turns, oldest first, as items to seed a fresh session."""
        items = [item for turn in self._turns for item in turn.items]
        called = {item.tool_call.id for item in items if item.tool_call is not None}
        answered = {item.tool_result.id for item in items if item.tool_result is not None}
        return [
            item
            for item in items
            if (item.tool_call is None or item.tool_call.id in answered)
            and (item.tool_result is None or item.tool_result.id in called)
        ]

    def call(self, call_id: str) -> ToolCall | None:
        """The tool call ``call_id`` the history holds, with its arguments; None if none."""
        for turn in (self._turn, self._next):
            for step in turn.steps:
                if isinstance(step, ToolCall) and step.id == call_id:
                    return step
        for committed in reversed(self._turns):
            for item in committed.items:
                if item.tool_call is not None and item.tool_call.id == call_id:
                    return item.tool_call
        return None

    @property
    def turns(self) -> int:
        """Completed turns held."""
        return len(self._turns)

    @property
    def chars(self) -> int:
        """Characters held (text, and tool payloads as JSON)."""
        return self._chars

    def clear(self) -> None:
        """Forget the whole conversation."""
        self._turns.clear()
        self._chars = 0
        self._turn = _Turn()
        self._next = _Turn()

    def __repr__(self) -> str:
        return f"ConversationHistory(turns={len(self._turns)}, chars={self._chars})"

    # -- internals ------------------------------------------------------------------------

    def _speech(self) -> _Speech:
        steps = self._turn.steps
        if steps and isinstance(steps[-1], _Speech):
            return steps[-1]
        speech = _Speech()
        steps.append(speech)
        return speech

    def _commit(self, turn: _Turn) -> _Committed | None:
        items: list[ReplayItem] = []
        chars = 0
        user = turn.user_text()
        if user:
            items.append(ReplayItem(role="user", text=user))
            chars += len(user)
        for step in turn.steps:
            if isinstance(step, _Speech):
                spoken = step.render(self._limits.interrupted_marker)
                if spoken:
                    items.append(ReplayItem(role="model", text=spoken))
                    chars += len(spoken)
            elif isinstance(step, ToolCall):
                items.append(ReplayItem(role="model", tool_call=step))
                chars += len(step.name) + _json_chars(step.args)
            else:
                items.append(ReplayItem(role="user", tool_result=step))
                chars += len(step.name) + _json_chars(step.response)
        return _Committed(tuple(items), chars) if items else None

    def _trim(self) -> None:
        limits = self._limits
        while len(self._turns) > 1 and (
            len(self._turns) > limits.max_turns or self._chars > limits.max_chars
        ):
            self._chars -= self._turns.pop(0).chars
