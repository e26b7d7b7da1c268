"""The LiveKit events a ``RealtimeSession`` emits for what its transport reports, whichever the
provider: ``generation_created``, ``metrics_collected`` (an answer's usage, a move's figures),
``session_moved`` and ``session_reconnected`` after a move, and ``error``."""

from __future__ import annotations

import time
from typing import Protocol

from livekit.agents import llm

from realtime_resumption.move_reports import MoveOutcome, MoveReport
from realtime_resumption.transport import RealtimeLLMUsage

from .events import SessionMoved, SessionMovedEvent
from .generations import Generation
from .log import logger
from .metrics import answer_metrics, move_metrics
from .pending_reply import PendingReply


class ModelNames(Protocol):
    """What the events name the model by (a ``RealtimeModel``'s properties of these names)."""

    @property
    def label(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def provider(self) -> str: ...


class SessionEvents:
    """Emits ``session``'s events; ``model`` names it in metrics and errors. Keeps the last
    generation opened: the usage the transport reports at an answer's end is its."""

    def __init__(self, session: llm.RealtimeSession[SessionMoved], model: ModelNames) -> None:
        self._session = session
        self._model = model
        self._last_generation: Generation | None = None

    def generation_created(self, generation: Generation, reply: PendingReply) -> None:
        """``generation`` opened (``reply.claims`` said whether it answers ``generate_reply``,
        which resolves with it then)."""
        self._last_generation = generation
        event = generation.event(user_initiated=generation.user_initiated)
        if generation.user_initiated:
            reply.resolve(event)
        self._session.emit("generation_created", event)

    def usage(self, usage: RealtimeLLMUsage) -> None:
        """An answer's usage: its final figures become the last generation's metrics."""
        generation = self._last_generation
        if usage.phase != "final" or generation is None:
            return
        m = self._model
        metrics = answer_metrics(
            usage, generation, label=m.label, model=m.model, provider=m.provider
        )
        self._session.emit("metrics_collected", metrics)

    def moved(self, report: MoveReport, reply: PendingReply) -> None:
        """The session moved: ``session_moved`` and the move's metrics, then, unless the
        session was lost, ``session_reconnected``; a pending ``generate_reply`` reaches the
        new connection now, and its clock starts again."""
        logger.info("session moved", extra={"move": report.as_dict()})
        self._session.emit("session_moved", SessionMovedEvent(report))
        m = self._model
        metrics = move_metrics(report, label=m.label, model=m.model, provider=m.provider)
        self._session.emit("metrics_collected", metrics)
        if report.outcome is not MoveOutcome.LOST:
            reply.restart()
            self._session.emit("session_reconnected", llm.RealtimeSessionReconnectedEvent())

    def error(self, error: BaseException, *, recoverable: bool) -> None:
        """An ``error`` event for ``error``, as LiveKit's realtime models report theirs."""
        self._session.emit(
            "error",
            llm.RealtimeModelError(
                timestamp=time.time(),
                label=self._model.label,
                error=error if isinstance(error, Exception) else RuntimeError(str(error)),
                recoverable=recoverable,
            ),
        )
