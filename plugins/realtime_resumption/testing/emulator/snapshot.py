"""What a session remembers, and the snapshots that resumption handles stand for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Outcome = Literal["complete", "interrupted", "cut"]


@dataclass(frozen=True)
class HistoryTurn:
    """A finished exchange: the user's turn and how the answer to it ended."""

    turn: int
    user_text: str
    planned: int
    produced: int
    outcome: Outcome
    tool_calls: tuple[str, ...] = ()


@dataclass(frozen=True)
class AnswerProgress:
    """The answer in progress and how far it got."""

    turn: int
    user_text: str
    planned: int
    produced: int = 0
    tool_calls: tuple[str, ...] = ()
    awaiting_tools: bool = False


@dataclass(frozen=True)
class PendingInput:
    """User input received for a turn that has not ended yet."""

    parts: tuple[str, ...] = ()
    """Typed text and recognised words, in the order they arrived."""
    words: int = 0
    """How many of the parts are recognised words."""
    speech: bool = False
    silence: float = 0.0
    """Seconds of silent audio since the last speech."""

    @property
    def text(self) -> str:
        """The turn's text so far."""
        return " ".join(self.parts)

    @property
    def empty(self) -> bool:
        """No text, no words, no speech."""
        return not (self.parts or self.speech)


@dataclass(frozen=True)
class Snapshot:
    """The session as it was when a handle was issued; resuming restores exactly this."""

    history: tuple[HistoryTurn, ...] = ()
    consumed_audio: tuple[int, ...] = ()
    """Sequence numbers of the user audio chunks the session had consumed, in order."""
    answer: AnswerProgress | None = None
    pending: PendingInput = field(default_factory=PendingInput)
    system_instruction: str = ""
    functions: tuple[str, ...] = ()
    voice: str | None = None
    running_tools: tuple[tuple[str, str], ...] = ()
    """(call id, function name) of the non-blocking calls still waiting for a response."""


@dataclass
class SessionState:
    """The live, mutable state of a session on one connection."""

    history: list[HistoryTurn] = field(default_factory=list)
    consumed_audio: list[int] = field(default_factory=list)
    answer: AnswerProgress | None = None
    pending: PendingInput = field(default_factory=PendingInput)
    system_instruction: str = ""
    functions: tuple[str, ...] = ()
    """The declared functions the model may call."""
    voice: str | None = None
    running_tools: dict[str, str] = field(default_factory=dict)
    """Non-blocking calls (id to function name) whose response has not come: the answer went
    on without them, and a response to one is taken whenever it comes."""

    def snapshot(self) -> Snapshot:
        """A frozen copy of this state."""
        return Snapshot(
            history=tuple(self.history),
            consumed_audio=tuple(self.consumed_audio),
            answer=self.answer,
            pending=self.pending,
            system_instruction=self.system_instruction,
            functions=self.functions,
            voice=self.voice,
            running_tools=tuple(self.running_tools.items()),
        )

    @classmethod
    def restore(cls, snapshot: Snapshot) -> SessionState:
        """The state a resumed connection starts from: an answer in progress is not continued."""
        history = list(snapshot.history)
        if snapshot.answer is not None:
            a = snapshot.answer
            history.append(
                HistoryTurn(a.turn, a.user_text, a.planned, a.produced, "cut", a.tool_calls)
            )
        return cls(
            history=history,
            consumed_audio=list(snapshot.consumed_audio),
            pending=snapshot.pending,
            system_instruction=snapshot.system_instruction,
            functions=snapshot.functions,
            voice=snapshot.voice,
            running_tools=dict(snapshot.running_tools),
        )
