"""Pipecat frames that carry the session's lifecycle facts.

No frame here is ever dropped by an interruption, so a processor that counts starts and ends,
or moves, never misses one. ``GenerationStartedFrame`` and ``GenerationEndedFrame`` are
uninterruptible ``ControlFrame``s: they travel in order with the answer's own frames, so every
processor downstream sees them where the list below puts them. The others are ``SystemFrame``s,
processed at once (they may reach a processor ahead of data frames queued before it). The
service (``realtime_resumption.pipecat.GeminiLiveLLMService``) and
``GenerationLifecycleProcessor`` push them **downstream**, interleaved with the stock frames in
this order:

- ``GenerationStartedFrame`` opens an answer, before anything of it: before
  ``TTSStartedFrame``/``LLMFullResponseStartFrame`` and before the function-call frames of a
  tool call that opens it.
- ``GenerationEndedFrame`` closes it, exactly once per start, after its
  ``TTSStoppedFrame``/``LLMFullResponseEndFrame`` (and after the ``InterruptionFrame`` of an
  interrupted answer). A ``CancelFrame`` discards the ordered frames queued before it, this one
  included (Pipecat's rule): take a ``CancelFrame`` as the end of an answer left open.
- ``GoAwayFrame`` when the provider announces the end of the connection;
  ``SessionMovingFrame`` when a move begins, ``SessionMovedFrame`` when it has finished with
  the session kept (``resumed``) or re-seeded (``rebuilt``). A move never splits an answer's
  frames: it starts between answers, or (forced by the deadline) after the cut answer's
  ``GenerationEndedFrame``.
- ``SessionResumptionUpdateFrame`` for each resumption update from the provider.
- ``SessionLostFrame`` when the session could not be moved: it precedes the one fatal
  ``ErrorFrame`` the service pushes upstream.

With the pipeline's metrics on (``PipelineParams(enable_metrics=True)``), every move's
figures also ride a stock ``MetricsFrame`` (``SessionMoveMetricsData``), right after the
move's ``SessionMovedFrame`` (or, for a lost session, before ``SessionLostFrame``).

``HANDOVER`` marks an ``EndFrame`` (its ``reason``) that hands the call over to the process
that runs it next, as at a deploy or a drain: ``EndFrame(reason=HANDOVER)`` queued on the
pipeline's worker, or ``EndWorkerFrame(reason=HANDOVER)`` pushed upstream by a processor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from pipecat.frames.frames import ControlFrame, SystemFrame
from pipecat.metrics.metrics import MetricsData

from realtime_resumption.move_reports import HandleKind, MoveFigures, MoveReason, MoveReport
from realtime_resumption.redaction import redact
from realtime_resumption.transport import GenerationEndReason

__all__ = [
    "HANDOVER",
    "GenerationEndedFrame",
    "GenerationStartedFrame",
    "GoAwayFrame",
    "SessionLostFrame",
    "SessionMoveMetricsData",
    "SessionMovedFrame",
    "SessionMovingFrame",
    "SessionResumptionUpdateFrame",
]

HANDOVER: Final = "realtime_resumption.handover"
"""The ``reason`` of an ``EndFrame`` that hands the call over instead of ending it: the service
(with a ``store`` and a ``session_key``) lets the answer in progress finish, saves the call's
state, gives its lease up and closes its connection without ending the server session, so the
pipeline that next runs with the same key takes the call over with nothing lost."""


@dataclass
class GenerationStartedFrame(ControlFrame):
    """One answer of the model opened; paired with exactly one ``GenerationEndedFrame``.
    In order with the answer's frames; never dropped by an interruption."""

    generation_id: str = ""
    interruptible: bool = field(default=False, init=False)

    def __str__(self) -> str:
        return f"{self.name}(generation_id: {self.generation_id})"


@dataclass
class GenerationEndedFrame(ControlFrame):
    """The answer ``generation_id`` closed, and why. In order with the answer's frames (after
    its ``TTSStoppedFrame``/``LLMFullResponseEndFrame``); never dropped by an interruption."""

    generation_id: str = ""
    reason: GenerationEndReason = GenerationEndReason.GENERATION_COMPLETE
    interruptible: bool = field(default=False, init=False)

    def __str__(self) -> str:
        return f"{self.name}(generation_id: {self.generation_id}, reason: {self.reason.value})"


@dataclass
class GoAwayFrame(SystemFrame):
    """The provider will close the connection in ``time_left`` seconds (``None``: it gave no
    figure). The session moves by itself; nothing needs to act on this."""

    time_left: float | None = None

    def __str__(self) -> str:
        return f"{self.name}(time_left: {self.time_left})"


@dataclass
class SessionMovingFrame(SystemFrame):
    """A move to a new connection began: why, and which kind of handle it resumes from
    (``none``: a fresh session seeded with the conversation)."""

    reason: MoveReason = MoveReason.PLANNED
    handle_kind: HandleKind = HandleKind.AFTER_TURN

    def __str__(self) -> str:
        return f"{self.name}(reason: {self.reason.value}, handle_kind: {self.handle_kind.value})"


@dataclass
class SessionMovedFrame(SystemFrame):
    """A move finished with the session kept or rebuilt; ``report`` tells how it went (gap,
    messages replayed, attempts). One per move."""

    report: MoveReport | None = None

    def __str__(self) -> str:
        report = self.report
        if report is None:
            return f"{self.name}()"
        return (
            f"{self.name}(number: {report.number}, outcome: {report.outcome.value}, "
            f"gap_ms: {report.gap_ms:.1f})"
        )


@dataclass
class SessionResumptionUpdateFrame(SystemFrame):
    """The provider issued new resumption state. ``handle`` is a secret: it never appears
    whole in the frame's repr or str."""

    resumable: bool = False
    handle: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"{self.name}(resumable={self.resumable}, handle={redact(self.handle)})"

    def __str__(self) -> str:
        return f"{self.name}(resumable: {self.resumable}, handle: {redact(self.handle)})"


@dataclass
class SessionLostFrame(SystemFrame):
    """The session could not be carried to a new connection: it is over. ``report`` is the
    lost move's report, when a move was under way; ``error`` says why (safe to log)."""

    error: str = ""
    report: MoveReport | None = None

    def __str__(self) -> str:
        return f"{self.name}(error: {self.error})"


class SessionMoveMetricsData(MetricsData, MoveFigures):
    """One move's figures (``MoveFigures``), for a ``MetricsFrame``: what a metrics observer
    sums per call (durations in ms, as in ``MoveReport``; never the handle)."""

    number: int
    duration_ms: float

    @classmethod
    def from_report(
        cls, report: MoveReport, *, processor: str, model: str | None = None
    ) -> SessionMoveMetricsData:
        """The figures of ``report``, as measured by ``processor``."""
        return cls(
            processor=processor,
            model=model,
            number=report.number,
            duration_ms=report.duration_ms,
            **report.figures().model_dump(),
        )
