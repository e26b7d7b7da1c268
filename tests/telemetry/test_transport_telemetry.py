"""The transport's spans and metrics, with the real OpenTelemetry SDK in memory, through a
planned move, a drop, a rebuild and a lost session on the bundled emulator (real TLS, the real
google-genai SDK)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from realtime_resumption.move_reports import (
    HandleKind,
    MoveMode,
    MoveOutcome,
    MoveReason,
    MoveReport,
)
from realtime_resumption.telemetry import Telemetry, record_store_error
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import GenerationEndReason

from ..rotation.rotation_helpers import (
    CHUNK,
    HELLO,
    Recorder,
    go_away_while_streaming,
    make_transport,
    only_session,
    stream_silence,
)
from ..transport.transport_helpers import (
    answered_with_handle,
    connected_and_answered,
    emulator_config,
    kind_emulator_config,
)
from .otel_helpers import Otel, ancestors, assert_no_secret, parent_of


@pytest.fixture
def otel() -> Iterator[Otel]:
    sdk = Otel()
    try:
        yield sdk
    finally:
        sdk.shutdown()


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with Emulator(emulator_config("gemini")) as emulator:
        yield emulator


def handles(rec: Recorder) -> list[str]:
    return [args[0] for args in rec.of("on_resumption_update") if args[0]]


def labels(report: MoveReport) -> tuple[tuple[str, Any], ...]:
    return tuple(
        sorted(
            {
                "gen_ai.provider.name": "gcp.gemini",
                "gen_ai.request.model": "gemini-live-2.5-flash-preview",
                "realtime.move.reason": report.reason.value,
                "realtime.move.outcome": report.outcome.value,
                "realtime.move.mode": report.mode.value,
            }.items()
        )
    )


async def planned_move(emu: Emulator, otel: Otel) -> tuple[MoveReport, ReadableSpan]:
    """A call (the app's span) that answered once, then moved at a goAway while the user's
    audio streamed; returns the move's report and span, after the figures every
    planned move has are checked (the service's terms decide the mode and the rest)."""
    call = otel.tracer_provider.get_tracer("app")
    transport = make_transport(emu, telemetry=otel.telemetry)
    rec = Recorder(transport)
    with call.start_as_current_span("call"):
        await transport.connect()
    await answered_with_handle(transport, rec)
    await go_away_while_streaming(emu, transport, rec)

    (report,) = rec.moves
    assert (report.reason, report.outcome) == (MoveReason.PLANNED, MoveOutcome.RESUMED)
    ((_, notice),) = rec.of("on_go_away")
    assert report.go_away_notice_ms == pytest.approx(notice * 1000.0)
    assert report.go_away_to_switch_ms is not None and report.go_away_to_switch_ms > 0
    # Every replayed message was one of the 20 ms chunks streamed.
    assert report.messages_replayed > 0
    assert report.audio_ms_replayed == pytest.approx(report.messages_replayed * CHUNK * 1000)

    (move,) = otel.named("realtime.move")
    attributes = dict(move.attributes or {})
    assert attributes["realtime.move.number"] == 1
    assert attributes["realtime.move.reason"] == "planned"
    assert attributes["realtime.move.outcome"] == "resumed"
    assert attributes["realtime.move.mode"] == report.mode.value
    assert attributes["realtime.move.attempts"] == report.attempts
    assert attributes["realtime.move.gap_ms"] == report.gap_ms
    assert attributes["realtime.move.input.replayed_messages"] == report.messages_replayed
    assert attributes["realtime.move.input.replayed_audio_ms"] == report.audio_ms_replayed
    assert attributes["realtime.move.input.held_audio_ms"] == report.audio_ms_held
    assert attributes["realtime.move.handle.kind"] == "after-turn"
    assert attributes["realtime.move.handle.age_ms"] > 0
    assert attributes["realtime.move.go_away.notice_ms"] == report.go_away_notice_ms
    assert attributes["realtime.move.go_away.to_switch_ms"] == report.go_away_to_switch_ms
    assert attributes["gen_ai.provider.name"] == "gcp.gemini"

    old, *_, new = otel.named("realtime.connection")
    # The emulator's ledger saw the first connection and the one the session resumed on.
    ledger_old, *_, ledger_new = only_session(emu).connections
    assert ledger_new.resumed_from is not None and ledger_old.resumed_from is None
    assert (
        old.attributes is not None and old.attributes["realtime.connection.attempt_id"] == "att_1"
    )
    assert [e.name for e in old.events] == [
        "realtime.connection.setup_complete",
        "realtime.go_away",
    ]
    assert old.events[1].attributes == {"realtime.go_away.notice_ms": report.go_away_notice_ms}
    assert parent_of(new, otel.spans) is move  # the move dialled it
    assert ancestors(new, otel.spans) == ["realtime.move", "call"]
    assert ancestors(old, otel.spans) == ["call"]
    assert ancestors(move, otel.spans) == ["call"]

    assert otel.counted("realtime.moves") == {labels(report): 1}
    (gap,) = otel.histogram("realtime.move.gap.duration")
    assert (gap.count, gap.sum) == (1, pytest.approx(report.gap_ms / 1000))
    (replayed,) = otel.histogram("realtime.move.input.replayed.duration")
    assert replayed.sum == pytest.approx(report.audio_ms_replayed / 1000)
    (to_switch,) = otel.histogram("realtime.move.go_away_to_switch.duration")
    assert to_switch.sum == pytest.approx(report.go_away_to_switch_ms / 1000)
    assert list(otel.counted("realtime.sessions.moving").values()) == [0]

    assert_no_secret(otel.spans, handles(rec))
    return report, move


async def test_a_planned_move_is_a_span_under_the_call_with_its_figures_and_metrics(
    emu: Emulator, otel: Otel
) -> None:
    """On the service as measured the move's first dial, beside the open connection, is
    refused (1011): the span shows it as a failed attempt, and the move closes the old
    connection, then resumes (break-before-make, with a gap and the input held through it)."""
    report, move = await planned_move(emu, otel)

    assert (report.mode, report.attempts) == (MoveMode.BREAK_BEFORE_MAKE, 2)
    assert report.gap_ms > 0 and report.messages_buffered > 0
    assert report.audio_ms_held == pytest.approx(report.messages_buffered * CHUNK * 1000)
    attributes = dict(move.attributes or {})
    assert attributes["realtime.move.mode"] == "break-before-make"
    assert attributes["realtime.move.input.held_messages"] == report.messages_buffered
    events = [(e.name, dict(e.attributes or {})) for e in move.events]
    assert [name for name, _ in events] == [
        "realtime.move.attempt",
        "realtime.move.attempt_failed",
        "realtime.move.attempt",
    ]
    refused_id = events[0][1]["realtime.connection.attempt_id"]
    assert events[1][1]["realtime.connection.attempt_id"] == refused_id
    assert events[1][1]["realtime.connection.close_code"] == 1011
    assert all(attrs["realtime.connection.resumes"] for _, attrs in events[::2])

    _, refused, new = otel.named("realtime.connection")
    assert refused.attributes is not None
    assert refused.attributes["realtime.connection.attempt_id"] == refused_id
    assert refused.status.status_code is StatusCode.ERROR
    assert parent_of(refused, otel.spans) is move
    assert new.attributes is not None
    assert (
        new.attributes["realtime.connection.attempt_id"]
        == events[2][1]["realtime.connection.attempt_id"]
    )
    ledger_old, ledger_refused, ledger_new = only_session(emu).connections
    assert ledger_refused.refused == "open-session"
    assert ledger_old.closed_at is not None and ledger_new.setup_at is not None
    assert ledger_old.closed_at <= ledger_new.setup_at  # break-before-make, as the ledger saw
    (held,) = otel.histogram("realtime.move.input.held.duration")
    assert held.sum == pytest.approx(report.audio_ms_held / 1000)


async def test_a_planned_move_on_a_kind_service_is_make_before_break_in_its_spans(
    otel: Otel,
) -> None:
    """Where the service takes a resume beside the open connection, one dial does it and the
    spans of the two connections overlap, with no gap."""
    async with Emulator(kind_emulator_config("gemini")) as emu:
        report, move = await planned_move(emu, otel)

    assert (report.mode, report.attempts, report.gap_ms) == (MoveMode.MAKE_BEFORE_BREAK, 1, 0.0)
    assert dict(move.attributes or {})["realtime.move.mode"] == "make-before-break"
    assert [e.name for e in move.events] == ["realtime.move.attempt"]
    assert dict(move.events[0].attributes or {}) == {
        "realtime.connection.attempt_id": "att_2",
        "realtime.connection.resumes": True,
    }
    old, new = otel.named("realtime.connection")
    assert new.attributes is not None
    assert new.attributes["realtime.connection.attempt_id"] == "att_2"
    ledger_old, ledger_new = only_session(emu).connections
    assert ledger_new.setup_at is not None and ledger_old.closed_at is not None
    assert ledger_new.setup_at < ledger_old.closed_at  # both open at once
    assert old.end_time is not None and new.start_time is not None
    assert new.start_time < old.end_time  # make-before-break, as the spans show it


async def test_a_drop_is_a_break_before_make_move_with_its_gap_and_held_input(
    emu: Emulator, otel: Otel
) -> None:
    transport = make_transport(emu, telemetry=otel.telemetry)
    rec = await connected_and_answered(transport)
    streaming = asyncio.create_task(stream_silence(transport, 1, 150, speech=True))
    await asyncio.sleep(0.05)
    assert emu.faults.drop() == 1
    await rec.wait_for("on_move")
    await streaming
    await transport.disconnect()

    (report,) = rec.moves
    assert (report.reason, report.outcome, report.mode) == (
        MoveReason.LOST,
        MoveOutcome.RESUMED,
        MoveMode.BREAK_BEFORE_MAKE,
    )
    assert report.gap_ms > 0 and report.go_away_notice_ms is None
    assert report.messages_buffered > 0
    assert report.audio_ms_held == pytest.approx(report.messages_buffered * CHUNK * 1000)

    (move,) = otel.named("realtime.move")
    attributes = dict(move.attributes or {})
    assert attributes["realtime.move.reason"] == "lost"
    assert attributes["realtime.move.mode"] == "break-before-make"
    assert attributes["realtime.move.gap_ms"] == report.gap_ms
    assert attributes["realtime.move.input.held_messages"] == report.messages_buffered
    assert attributes["realtime.move.input.held_audio_ms"] == report.audio_ms_held
    assert "realtime.move.go_away.notice_ms" not in attributes
    old, _new = otel.named("realtime.connection")
    assert old.attributes is not None and old.attributes["realtime.connection.close_code"] == 1006

    assert otel.counted("realtime.moves") == {labels(report): 1}
    (gap,) = otel.histogram("realtime.move.gap.duration")
    assert gap.sum == pytest.approx(report.gap_ms / 1000)
    (held,) = otel.histogram("realtime.move.input.held.duration")
    assert held.sum == pytest.approx(report.audio_ms_held / 1000)
    assert otel.histogram("realtime.move.go_away_to_switch.duration") == []
    assert_no_secret(otel.spans, handles(rec))


async def test_a_rebuild_shows_the_refused_attempt_as_an_event(emu: Emulator, otel: Otel) -> None:
    transport = make_transport(emu, telemetry=otel.telemetry)
    rec = await connected_and_answered(transport)
    emu.faults.expire_handles()
    emu.faults.drop()
    await rec.wait_for("on_move")
    await transport.disconnect()

    (report,) = rec.moves
    assert (report.outcome, report.handle_kind, report.attempts) == (
        MoveOutcome.REBUILT,
        HandleKind.NONE,
        2,
    )
    (move,) = otel.named("realtime.move")
    attributes = dict(move.attributes or {})
    assert attributes["realtime.move.outcome"] == "rebuilt"
    assert attributes["realtime.move.attempts"] == 2
    assert attributes["realtime.move.handle.kind"] == "none"
    assert "realtime.move.handle.age_ms" not in attributes
    events = [(e.name, dict(e.attributes or {})) for e in move.events]
    assert [name for name, _ in events] == [
        "realtime.move.attempt",
        "realtime.move.attempt_failed",
        "realtime.move.attempt",
    ]
    assert events[0][1]["realtime.connection.resumes"] is True
    failed = events[1][1]
    assert (
        failed["realtime.connection.attempt_id"] == events[0][1]["realtime.connection.attempt_id"]
    )
    assert failed["realtime.connection.failure.kind"] in ("refused", "closed")
    assert events[2][1]["realtime.connection.resumes"] is False
    refused = next(
        s
        for s in otel.named("realtime.connection")
        if s.attributes
        and s.attributes["realtime.connection.attempt_id"]
        == failed["realtime.connection.attempt_id"]
    )
    assert refused.status.status_code is StatusCode.ERROR
    assert parent_of(refused, otel.spans) is move
    assert otel.counted("realtime.moves") == {labels(report): 1}

    (answer,) = otel.named("realtime.generation")
    ((generation_id,),) = rec.of("on_generation_start")
    assert answer.attributes is not None
    assert answer.attributes["gen_ai.response.id"] == generation_id
    assert answer.attributes["realtime.generation.end_reason"] == "generation_complete"
    assert answer.attributes["gen_ai.response.finish_reasons"] == ("generation_complete",)
    assert_no_secret(otel.spans, handles(rec))


async def test_a_lost_session_is_an_error_span_and_counted_lost(otel: Otel) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu, telemetry=otel.telemetry)
        rec = Recorder(transport)
        emu.faults.refuse_next(1, how="close1011")  # set up, then closed: no handle ever came
        await transport.connect()
        await rec.wait_for("on_close")
        await transport.disconnect()

    (report,) = rec.moves
    assert report.outcome is MoveOutcome.LOST
    (move,) = otel.named("realtime.move")
    assert move.status.status_code is StatusCode.ERROR
    assert move.status.description == report.error
    assert move.attributes is not None and move.attributes["realtime.move.outcome"] == "lost"
    assert move.attributes["realtime.move.mode"] == "break-before-make"
    assert otel.counted("realtime.moves") == {labels(report): 1}
    assert otel.histogram("realtime.move.gap.duration") == []
    assert list(otel.counted("realtime.sessions.moving").values()) == [0]
    (connection,) = otel.named("realtime.connection")
    assert connection.attributes is not None
    assert connection.attributes["realtime.connection.close_code"] == 1011


async def test_a_move_under_way_counts_as_a_session_moving(emu: Emulator, otel: Otel) -> None:
    emu.faults.slow_setups(1, 0.5, resumed_only=True)
    transport = make_transport(emu, telemetry=otel.telemetry)
    rec = await connected_and_answered(transport)
    emu.faults.drop()
    await rec.wait_for("on_move_started")
    assert list(otel.counted("realtime.sessions.moving").values()) == [1]
    await rec.wait_for("on_move")
    assert list(otel.counted("realtime.sessions.moving").values()) == [0]
    await transport.disconnect()
    assert otel.named("realtime.move")


async def test_a_disconnect_ends_every_span_it_leaves_open(emu: Emulator, otel: Otel) -> None:
    transport = make_transport(emu, telemetry=otel.telemetry, tool_call_grace=5.0)
    rec = Recorder(transport)
    await transport.connect()
    transport.send_content(HELLO)
    await rec.wait_for("on_generation_start")
    await transport.disconnect()
    (connection,) = otel.named("realtime.connection")
    (answer,) = otel.named("realtime.generation")
    assert answer.attributes is not None
    assert answer.attributes["realtime.generation.end_reason"] in (
        "disconnected",
        "generation_complete",
    )
    assert connection.end_time is not None


async def test_without_an_sdk_no_span_is_made_and_the_move_works(emu: Emulator) -> None:
    """The API's own no-op providers (what an app without an SDK has): every span the
    telemetry starts is the API's shared invalid span, none gets an attribute, and the move
    is reported as without telemetry."""
    started: list[trace.Span] = []
    noop = trace.NoOpTracerProvider().get_tracer("x")

    class Watching(trace.Tracer):
        def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace.Span:
            assert not kwargs.get("attributes"), "attributes computed for a no-op span"
            span = noop.start_span(name, *args, **kwargs)
            started.append(span)
            return span

        def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the telemetry never makes its spans current")

    telemetry = Telemetry(tracer=Watching(), meter_provider=NoOpMeterProvider())
    transport = make_transport(emu, telemetry=telemetry)
    rec = await connected_and_answered(transport)
    emu.faults.go_away(20.0)
    await rec.wait_for("on_move")
    await transport.disconnect()

    (report,) = rec.moves
    assert report.outcome is MoveOutcome.RESUMED
    assert rec.ends() == [GenerationEndReason.GENERATION_COMPLETE]
    assert len(started) >= 4  # two connections, a move, an answer
    assert all(span is trace.INVALID_SPAN for span in started)
    assert not any(span.is_recording() for span in started)


def test_without_the_opentelemetry_api_the_transport_runs_untraced() -> None:
    """The core's own dependencies are google-genai, websockets and loguru: with no
    OpenTelemetry at all (its import blocked, in a fresh interpreter) the transport is made
    without telemetry and a store error is counted nowhere."""
    code = """
import sys
sys.modules["opentelemetry"] = None
from realtime_resumption import telemetry
from realtime_resumption.gemini import GeminiLiveTransport
assert telemetry.AVAILABLE is False
telemetry.record_store_error("save", OSError("disk full"))
transport = GeminiLiveTransport(api_key="k" * 39)
assert transport.telemetry is None
try:
    telemetry.Telemetry()
except RuntimeError as error:
    assert "[otel]" in str(error)
else:
    raise AssertionError("Telemetry() without the API")
print("untraced")
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "untraced"


def test_store_errors_are_counted_by_operation_and_type_never_text(otel: Otel) -> None:
    record_store_error("save", OSError("/var/lib/sessions/secret-path is full"), otel.telemetry)
    record_store_error("save", OSError("again"), otel.telemetry)
    record_store_error("claim", "conflict", otel.telemetry)
    assert otel.counted("realtime.store.errors") == {
        (("error.type", "OSError"), ("realtime.store.operation", "save")): 2,
        (("error.type", "conflict"), ("realtime.store.operation", "claim")): 1,
    }


async def test_a_broken_tracer_changes_nothing_for_the_session(emu: Emulator) -> None:
    class Broken(trace.Tracer):
        def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
            raise RuntimeError("exporter down")

        def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("exporter down")

    transport = make_transport(emu, telemetry=Telemetry(tracer=Broken()))
    rec = await connected_and_answered(transport)
    emu.faults.go_away(20.0)
    await rec.wait_for("on_move")
    await transport.disconnect()
    (report,) = rec.moves
    assert report.outcome is MoveOutcome.RESUMED
    assert rec.names("on_move_started", "on_move", "on_close") == [
        "on_move_started",
        "on_move",
        "on_close",
    ]


def test_with_the_api_and_no_sdk_the_default_telemetry_records_nothing() -> None:
    """What an app that never configures OpenTelemetry gets (a fresh interpreter: the global
    providers are the API's proxies to its no-op): the transport's default telemetry starts
    its spans, every one the API's shared invalid span, and a planned move works."""
    code = """
import asyncio
from opentelemetry import trace
from opentelemetry.trace import ProxyTracer, ProxyTracerProvider
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.transport import ContentTurn

started = []
real_start = ProxyTracer.start_span
def start_span(self, *args, **kwargs):
    span = real_start(self, *args, **kwargs)
    started.append(span)
    return span
ProxyTracer.start_span = start_span

async def main():
    assert isinstance(trace.get_tracer_provider(), ProxyTracerProvider)
    async with Emulator(EmulatorConfig(time_scale=0.05)) as emu:
        transport = GeminiLiveTransport(client=emu.client())
        assert transport.telemetry is not None
        moved = asyncio.Event()
        handle = asyncio.Event()
        transport.on_move = lambda report: moved.set()
        transport.on_resumption_update = lambda h, resumable, i: resumable and handle.set()
        await transport.connect()
        transport.send_content([ContentTurn("user", "hello")])  # the first handle follows
        async with asyncio.timeout(10):
            await handle.wait()
            await emu.faults.go_away(time_left=5.0)
            await moved.wait()
        await transport.disconnect()
    assert len(started) >= 3, started
    assert all(span is trace.INVALID_SPAN for span in started)
    print("no-op", len(started))

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("no-op ")
