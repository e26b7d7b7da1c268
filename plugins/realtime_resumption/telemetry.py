"""OpenTelemetry spans and metrics for a session's moves, connections and answers.

Built on the OpenTelemetry *API* only (the ``[otel]`` extra, or whatever Pipecat or LiveKit
already installed): with no SDK configured the API hands out its no-op tracer and meter, so
no span is recorded, no attribute is computed and no measurement is kept. An app that
configures an SDK (or Pipecat's or LiveKit's tracing) sees every move.

The transport feeds a :class:`SessionTelemetry` from the facts it already reports (the
``on_move_started``, ``on_move``, ``on_connection_lifecycle``, ``on_generation_start``/``end``,
``on_go_away``, ``on_resumption_update`` and ``on_close`` callbacks), whatever callbacks the
framework set; see the transport's ``telemetry`` option (``GeminiLiveTransport(telemetry=...)``).

Spans (the names are documented in the README's table):

- ``realtime.move``: one per move, from its start to its outcome, with the figures of its
  :class:`~realtime_resumption.move_reports.MoveReport`, the handle's kind and age (never the handle)
  and each attempt, and each failed one, as an event. A connection dialled during a move is
  its child.
- ``realtime.connection``: one per connection attempt, from the dial to its close.
- ``realtime.generation``: one per answer, with the reason it ended.

Their parent is the framework's span where an adapter says so (Pipecat's conversation and
turn spans, LiveKit's session span), else the OpenTelemetry context current where the
transport runs.

Nothing here may break the transport: every hook catches and logs its own errors.
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, ParamSpec

from loguru import logger

from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason, MoveReport
from realtime_resumption.redaction import redact
from realtime_resumption.transport import (
    AttemptClose,
    ConnectAttempt,
    ConnectionLifecycleEvent,
    GenerationClose,
    GenerationEndReason,
    SetupFailed,
    SetupOk,
)

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace as otel_trace
    from opentelemetry.context import Context
    from opentelemetry.metrics import Meter, MeterProvider
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
except ImportError:  # pragma: no cover - exercised only without the [otel] extra
    AVAILABLE = False
else:
    AVAILABLE = True

__all__ = [
    "AVAILABLE",
    "INSTRUMENTATION_NAME",
    "SessionTelemetry",
    "Telemetry",
    "record_store_error",
]

INSTRUMENTATION_NAME: Final = "realtime_resumption"

# --- the names (one table of them in the README) ----------------------------------------------

SPAN_MOVE: Final = "realtime.move"
SPAN_CONNECTION: Final = "realtime.connection"
SPAN_GENERATION: Final = "realtime.generation"

EVENT_ATTEMPT: Final = "realtime.move.attempt"
EVENT_ATTEMPT_FAILED: Final = "realtime.move.attempt_failed"
EVENT_SETUP: Final = "realtime.connection.setup_complete"
EVENT_GO_AWAY: Final = "realtime.go_away"

PROVIDER: Final = "gen_ai.provider.name"
MODEL: Final = "gen_ai.request.model"
RESPONSE_ID: Final = "gen_ai.response.id"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
ERROR_TYPE: Final = "error.type"

MOVE_NUMBER: Final = "realtime.move.number"
MOVE_REASON: Final = "realtime.move.reason"
MOVE_OUTCOME: Final = "realtime.move.outcome"
MOVE_MODE: Final = "realtime.move.mode"
MOVE_ATTEMPTS: Final = "realtime.move.attempts"
MOVE_GAP: Final = "realtime.move.gap_ms"
MOVE_HELD_MESSAGES: Final = "realtime.move.input.held_messages"
MOVE_HELD_AUDIO: Final = "realtime.move.input.held_audio_ms"
MOVE_REPLAYED_MESSAGES: Final = "realtime.move.input.replayed_messages"
MOVE_REPLAYED_AUDIO: Final = "realtime.move.input.replayed_audio_ms"
MOVE_DROPPED_AUDIO: Final = "realtime.move.input.dropped_audio_ms"
MOVE_TURN_CUT: Final = "realtime.move.turn_cut"
MOVE_HANDLE_KIND: Final = "realtime.move.handle.kind"
MOVE_HANDLE_AGE: Final = "realtime.move.handle.age_ms"
MOVE_GO_AWAY_NOTICE: Final = "realtime.move.go_away.notice_ms"
MOVE_GO_AWAY_TO_SWITCH: Final = "realtime.move.go_away.to_switch_ms"

CONNECTION_ATTEMPT: Final = "realtime.connection.attempt_id"
CONNECTION_RESUMES: Final = "realtime.connection.resumes"
CONNECTION_GENERATION: Final = "realtime.connection.generation"
CONNECTION_CLOSE_CODE: Final = "realtime.connection.close_code"
FAILURE_KIND: Final = "realtime.connection.failure.kind"
FAILURE_MESSAGE: Final = "realtime.connection.failure.message"
GO_AWAY_NOTICE: Final = "realtime.go_away.notice_ms"
GENERATION_END_REASON: Final = "realtime.generation.end_reason"

METRIC_MOVES: Final = "realtime.moves"
METRIC_GAP: Final = "realtime.move.gap.duration"
METRIC_HELD: Final = "realtime.move.input.held.duration"
METRIC_REPLAYED: Final = "realtime.move.input.replayed.duration"
METRIC_GO_AWAY_TO_SWITCH: Final = "realtime.move.go_away_to_switch.duration"
METRIC_MOVING: Final = "realtime.sessions.moving"
METRIC_STORE_ERRORS: Final = "realtime.store.errors"
STORE_OPERATION: Final = "realtime.store.operation"

_SECONDS_BUCKETS: Final = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
"""Histogram bounds for the move's durations: a planned move's gap is 0 to tens of ms, a
break-before-make one a setup (hundreds of ms), a lost one up to the retries' seconds."""
_KNOWN_HANDLES: Final = 16
"""Handles whose arrival time is kept (redacted) to tell a move's handle age."""
_OPEN_SPANS: Final = 64
"""Bound on the connection and generation spans open at once: an older one is ended as
abandoned (a transport that never reports an end must not grow the table)."""

_P = ParamSpec("_P")
ContextGetter = Callable[[], "Context | None"]


def _guarded(method: Callable[_P, None]) -> Callable[_P, None]:
    """Telemetry never breaks the session: an error in a hook is logged and ignored."""

    @functools.wraps(method)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> None:
        try:
            method(*args, **kwargs)
        except Exception:
            logger.exception("telemetry: {} failed; the session goes on", method.__name__)

    return guarded


@dataclass(frozen=True)
class _Instruments:
    moves: Any
    gap: Any
    held: Any
    replayed: Any
    go_away_to_switch: Any
    moving: Any
    store_errors: Any


class Telemetry:
    """Where spans and metrics go: a tracer and a meter.

    By default the global providers (``opentelemetry.trace.set_tracer_provider`` and
    ``opentelemetry.metrics.set_meter_provider``, or the API's no-op until an SDK is set);
    ``tracer_provider``/``meter_provider`` pick others, and ``tracer`` a ready tracer (LiveKit's
    ``livekit.agents.telemetry.tracer``, which follows ``set_tracer_provider``).
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        tracer: Tracer | None = None,
        meter: Meter | None = None,
    ) -> None:
        if not AVAILABLE:
            raise RuntimeError(
                "telemetry needs the OpenTelemetry API: pip install 'realtime-resumption[otel]'"
            )
        self.tracer: Tracer = tracer or otel_trace.get_tracer(
            INSTRUMENTATION_NAME, tracer_provider=tracer_provider
        )
        self.meter: Meter = meter or otel_metrics.get_meter(
            INSTRUMENTATION_NAME, meter_provider=meter_provider
        )
        m = self.meter
        self._instruments = _Instruments(
            moves=m.create_counter(
                METRIC_MOVES, unit="{move}", description="Moves between connections"
            ),
            gap=m.create_histogram(
                METRIC_GAP,
                unit="s",
                description="Time during a move when no connection took input",
                explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
            ),
            held=m.create_histogram(
                METRIC_HELD,
                unit="s",
                description="Audio held during a move and delivered after the switch",
                explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
            ),
            replayed=m.create_histogram(
                METRIC_REPLAYED,
                unit="s",
                description="Audio sent again after a move because the new session lacked it",
                explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
            ),
            go_away_to_switch=m.create_histogram(
                METRIC_GO_AWAY_TO_SWITCH,
                unit="s",
                description=(
                    "From the provider's notice of the connection's end to the switch to the "
                    "new connection"
                ),
                explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
            ),
            moving=m.create_up_down_counter(
                METRIC_MOVING, unit="{session}", description="Sessions moving now"
            ),
            store_errors=m.create_counter(
                METRIC_STORE_ERRORS,
                unit="{error}",
                description="Session store operations that failed",
            ),
        )

    def session(
        self, *, provider: str, model: str, parent: ContextGetter | None = None
    ) -> SessionTelemetry:
        """The telemetry of one session (one transport)."""
        return SessionTelemetry(self, provider=provider, model=model, parent=parent)

    def store_error(self, operation: str, error: BaseException | str) -> None:
        """Count a failed session-store operation (``load``, ``save``, ``claim``, ...): the
        error's type name, never its text (it may hold what was stored)."""
        kind = error if isinstance(error, str) else type(error).__name__
        self._instruments.store_errors.add(1, {STORE_OPERATION: operation, ERROR_TYPE: kind})


@functools.cache
def default_telemetry() -> Telemetry:
    """The telemetry on the global providers (shared: its instruments are made once)."""
    return Telemetry()


def record_store_error(
    operation: str, error: BaseException | str, telemetry: Telemetry | None = None
) -> None:
    """Count a failed session-store operation on ``telemetry`` (the global providers by
    default). Does nothing without the OpenTelemetry API."""
    if telemetry is None:
        if not AVAILABLE:
            return
        telemetry = default_telemetry()
    telemetry.store_error(operation, error)


class SessionTelemetry:
    """The spans and metrics of one session, fed by its transport (see the module
    documentation).

    ``parent`` returns the context that connection and move spans nest under, and
    ``generation_parent`` the one answers nest under (each may return None: the context
    current where the transport runs then serves). Adapters set them to the framework's
    spans.
    """

    def __init__(
        self,
        telemetry: Telemetry,
        *,
        provider: str,
        model: str,
        parent: ContextGetter | None = None,
    ) -> None:
        self._tracer = telemetry.tracer
        self._i = telemetry._instruments
        self._common: Mapping[str, str] = {PROVIDER: provider, MODEL: model}
        self.parent: ContextGetter | None = parent
        self.generation_parent: ContextGetter | None = None
        self._move: Span | None = None
        self._move_attempts: set[str] = set()
        self._moving = False
        self._connections: OrderedDict[str, Span] = OrderedDict()
        self._set_up: list[str] = []
        """Attempt ids of the connections set up and still open, oldest first."""
        self._generations: OrderedDict[str, Span] = OrderedDict()
        self._handles: OrderedDict[str, float] = OrderedDict()
        """Redacted handle -> when it arrived (loop time): never the handle itself."""

    # --- contexts -----------------------------------------------------------------------------

    def _context(self, getter: ContextGetter | None) -> Context:
        context = getter() if getter is not None else None
        return context if context is not None else otel_context.get_current()

    def _start(
        self, name: str, context: Context, kind: SpanKind | None = None
    ) -> tuple[Span, bool]:
        span = self._tracer.start_span(name, context=context, kind=kind or SpanKind.INTERNAL)
        recording = span.is_recording()
        if recording:
            span.set_attributes(self._common)
        return span, recording

    # --- moves --------------------------------------------------------------------------------

    @_guarded
    def on_move_started(self, reason: MoveReason, handle_kind: HandleKind) -> None:
        """A move began."""
        if self._move is not None:  # (never: the transport runs one move at a time)
            self._move.end()
        self._move, recording = self._start(SPAN_MOVE, self._context(self.parent))
        self._move_attempts = set()
        if recording:
            self._move.set_attributes(
                {MOVE_REASON: reason.value, MOVE_HANDLE_KIND: handle_kind.value}
            )
        if not self._moving:
            self._moving = True
            self._i.moving.add(1, self._common)

    @_guarded
    def on_move(self, report: MoveReport) -> None:
        """A move finished: its span ends with the report's figures; the metrics count it."""
        span, self._move = self._move, None
        self._move_attempts = set()
        if self._moving:
            self._moving = False
            self._i.moving.add(-1, self._common)
        labels = {
            **self._common,
            MOVE_REASON: report.reason.value,
            MOVE_OUTCOME: report.outcome.value,
            MOVE_MODE: report.mode.value,
        }
        i = self._i
        i.moves.add(1, labels)
        if report.outcome is not MoveOutcome.LOST:
            i.gap.record(report.gap_ms / 1000.0, labels)
            i.held.record(report.audio_ms_held / 1000.0, labels)
            i.replayed.record(report.audio_ms_replayed / 1000.0, labels)
            if report.go_away_to_switch_ms is not None:
                i.go_away_to_switch.record(report.go_away_to_switch_ms / 1000.0, labels)
        if span is None:
            # A move that began before telemetry saw it (never with the transport's seam).
            span, _ = self._start(SPAN_MOVE, self._context(self.parent))
        if span.is_recording():
            span.set_attributes(self._move_attributes(report))
            if report.outcome is MoveOutcome.LOST:
                span.set_status(Status(StatusCode.ERROR, report.error or "the session was lost"))
        span.end()

    def _move_attributes(self, report: MoveReport) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            MOVE_NUMBER: report.number,
            MOVE_REASON: report.reason.value,
            MOVE_OUTCOME: report.outcome.value,
            MOVE_MODE: report.mode.value,
            MOVE_ATTEMPTS: report.attempts,
            MOVE_GAP: report.gap_ms,
            MOVE_HELD_MESSAGES: report.messages_buffered,
            MOVE_HELD_AUDIO: report.audio_ms_held,
            MOVE_REPLAYED_MESSAGES: report.messages_replayed,
            MOVE_REPLAYED_AUDIO: report.audio_ms_replayed,
            MOVE_DROPPED_AUDIO: report.audio_seconds_dropped * 1000.0,
            MOVE_TURN_CUT: report.turn_cut,
            MOVE_HANDLE_KIND: report.handle_kind.value,
        }
        issued = self._handles.get(report.handle)
        if report.handle_kind is not HandleKind.NONE and issued is not None:
            attributes[MOVE_HANDLE_AGE] = max(0.0, report.finished_at - issued) * 1000.0
        if report.go_away_notice_ms is not None:
            attributes[MOVE_GO_AWAY_NOTICE] = report.go_away_notice_ms
        if report.go_away_to_switch_ms is not None:
            attributes[MOVE_GO_AWAY_TO_SWITCH] = report.go_away_to_switch_ms
        if report.error is not None:
            attributes[ERROR_TYPE] = "session_lost"
        return attributes

    @_guarded
    def on_resumption_update(
        self, handle: str | None, resumable: bool, last_consumed_index: int | None
    ) -> None:
        """Note when a handle arrived (under its redacted form) for the move's handle age."""
        if handle is None:
            return
        key = redact(handle)
        self._handles.pop(key, None)
        self._handles[key] = asyncio.get_running_loop().time()
        while len(self._handles) > _KNOWN_HANDLES:
            self._handles.popitem(last=False)

    @_guarded
    def on_go_away(self, time_left: str | None, seconds: float | None) -> None:
        """The provider announced the end of the connection serving the session."""
        serving = self._connections.get(self._set_up[0]) if self._set_up else None
        if serving is not None and serving.is_recording():
            attributes = {} if seconds is None else {GO_AWAY_NOTICE: seconds * 1000.0}
            serving.add_event(EVENT_GO_AWAY, attributes)

    # --- connections --------------------------------------------------------------------------

    @_guarded
    def on_connection_lifecycle(self, event: ConnectionLifecycleEvent) -> None:
        """A connection attempt started, set up, failed or closed."""
        attempt = event.connect_attempt_id
        move = self._move
        if isinstance(event, ConnectAttempt):
            parent = (
                otel_trace.set_span_in_context(move)
                if move is not None
                else self._context(self.parent)
            )
            opened, recording = self._start(SPAN_CONNECTION, parent, SpanKind.CLIENT)
            if recording:
                opened.set_attributes(
                    {CONNECTION_ATTEMPT: attempt, CONNECTION_RESUMES: event.handle_supplied}
                )
            self._remember(self._connections, attempt, opened)
            if move is not None:
                self._move_attempts.add(attempt)
                if move.is_recording():
                    move.add_event(
                        EVENT_ATTEMPT,
                        {CONNECTION_ATTEMPT: attempt, CONNECTION_RESUMES: event.handle_supplied},
                    )
            return
        span = self._connections.get(attempt)
        if isinstance(event, SetupOk):
            self._set_up.append(attempt)
            if span is not None and span.is_recording():
                span.set_attribute(CONNECTION_GENERATION, event.transport_generation)
                span.add_event(EVENT_SETUP)
        elif isinstance(event, AttemptClose):
            if span is not None and span.is_recording() and event.code is not None:
                span.set_attribute(CONNECTION_CLOSE_CODE, event.code)
        elif isinstance(event, SetupFailed):
            failure = event.failure
            attributes: dict[str, Any] = {
                CONNECTION_ATTEMPT: attempt,
                FAILURE_KIND: failure.kind,
                FAILURE_MESSAGE: failure.message,
            }
            if failure.code is not None:
                attributes[CONNECTION_CLOSE_CODE] = failure.code
            self._attempt_failed(attempt, attributes)
            self._end_connection(attempt, Status(StatusCode.ERROR, failure.message), failure.kind)
        elif isinstance(event, GenerationClose):
            if span is not None and span.is_recording() and event.code is not None:
                span.set_attribute(CONNECTION_CLOSE_CODE, event.code)
            if attempt in self._move_attempts:
                # Dialled for the move running now and closed before its switch: the
                # provider refused it after its setup.
                attributes = {CONNECTION_ATTEMPT: attempt, FAILURE_KIND: "closed"}
                if event.code is not None:
                    attributes[CONNECTION_CLOSE_CODE] = event.code
                self._attempt_failed(attempt, attributes)
            self._end_connection(attempt)

    def _attempt_failed(self, attempt: str, attributes: dict[str, Any]) -> None:
        move = self._move
        if attempt in self._move_attempts and move is not None and move.is_recording():
            move.add_event(EVENT_ATTEMPT_FAILED, attributes)

    def _end_connection(
        self, attempt: str, status: Status | None = None, error_type: str | None = None
    ) -> None:
        self._move_attempts.discard(attempt)
        if attempt in self._set_up:
            self._set_up.remove(attempt)
        span = self._connections.pop(attempt, None)
        if span is None:
            return
        if status is not None and span.is_recording():
            span.set_status(status)
            if error_type is not None:
                span.set_attribute(ERROR_TYPE, error_type)
        span.end()

    # --- answers ------------------------------------------------------------------------------

    @_guarded
    def on_generation_start(self, generation_id: str) -> None:
        """An answer opened."""
        getter = self.generation_parent or self.parent
        span, recording = self._start(SPAN_GENERATION, self._context(getter))
        if recording:
            span.set_attribute(RESPONSE_ID, generation_id)
        self._remember(self._generations, generation_id, span)

    @_guarded
    def on_generation_end(self, generation_id: str, reason: GenerationEndReason) -> None:
        """An answer ended, for ``reason``."""
        span = self._generations.pop(generation_id, None)
        if span is None:
            return
        if span.is_recording():
            span.set_attributes(
                {GENERATION_END_REASON: reason.value, FINISH_REASONS: (reason.value,)}
            )
        span.end()

    # --- the end ------------------------------------------------------------------------------

    @_guarded
    def on_close(self, code: int | None, reason: str | None) -> None:
        """The session closed: whatever is still open ends."""
        self.close()

    @_guarded
    def close(self) -> None:
        """End every span still open (idempotent): a disconnect abandons them."""
        for table in (self._generations, self._connections):
            while table:
                _, span = table.popitem(last=False)
                span.end()
        self._set_up.clear()
        move, self._move = self._move, None
        if move is not None:
            move.end()
        if self._moving:
            self._moving = False
            self._i.moving.add(-1, self._common)

    def _remember(self, table: OrderedDict[str, Span], key: str, span: Span) -> None:
        previous = table.pop(key, None)
        if previous is not None:
            previous.end()
        table[key] = span
        while len(table) > _OPEN_SPANS:
            _, oldest = table.popitem(last=False)
            oldest.end()
