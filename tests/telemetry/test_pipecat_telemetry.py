"""A real Pipecat pipeline with Pipecat's tracing on (``PipelineWorker(enable_tracing=True)``,
the SDK as the global tracer provider, as Pipecat's ``setup_tracing`` installs it) through a
planned move, a drop and a rebuild on the emulator as the service was measured: the session's
spans nest under the pipeline's conversation span, and each move's figures ride a
``MetricsFrame``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from pipecat.frames.frames import InputTextRawFrame, LLMFullResponseEndFrame, MetricsFrame

from realtime_resumption.frames import (
    SessionMovedFrame,
    SessionMoveMetricsData,
    SessionResumptionUpdateFrame,
)
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.testing.emulator import Emulator

from ..pipecat import services
from ..pipecat.rig import Rig, emulator_config
from .otel_helpers import Armed, ancestors, assert_no_secret, global_sdk


@pytest.fixture
def traced() -> Iterator[Armed]:
    armed = global_sdk()
    armed.exporter.clear()
    armed.armed = True
    try:
        yield armed
    finally:
        armed.armed = False
        armed.exporter.clear()


def resumable(rig: Rig, count: int) -> bool:
    return sum(1 for f in rig.of(SessionResumptionUpdateFrame) if f.resumable) >= count


async def test_moves_nest_under_the_conversation_span_and_ride_metrics_frames(
    traced: Armed,
) -> None:
    # A handle after every setup: each move's connection soon has a place to move from.
    async with Emulator(emulator_config(update_after_setup=True)) as emu:
        service = services.ours(emu)
        async with Rig([service], metrics=True, tracing=True) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
            await rig.wait(lambda: resumable(rig, 1))
            assert emu.faults.go_away(5.0).count == 1
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
            await rig.wait(lambda: resumable(rig, 2))
            assert emu.faults.drop() == 1
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 2)
            await rig.wait(lambda: resumable(rig, 3))
            emu.faults.expire_handles()
            assert emu.faults.drop() == 1
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 3)

    reports = [f.report for f in rig.of(SessionMovedFrame)]
    assert [(r.reason, r.outcome) for r in reports] == [
        (MoveReason.PLANNED, MoveOutcome.RESUMED),
        (MoveReason.LOST, MoveOutcome.RESUMED),
        (MoveReason.LOST, MoveOutcome.REBUILT),
    ]

    spans: tuple[ReadableSpan, ...] = tuple(traced.exporter.get_finished_spans())
    (conversation,) = [s for s in spans if s.name == "conversation"]
    moves = sorted((s for s in spans if s.name == "realtime.move"), key=lambda s: s.start_time or 0)
    assert [m.attributes and m.attributes["realtime.move.outcome"] for m in moves] == [
        "resumed",
        "resumed",
        "rebuilt",
    ]
    for move, report in zip(moves, reports, strict=True):
        assert ancestors(move, spans) == ["conversation"]
        assert move.context.trace_id == conversation.context.trace_id
        assert move.attributes is not None
        assert move.attributes["realtime.move.gap_ms"] == report.gap_ms
        assert move.attributes["realtime.move.attempts"] == report.attempts
        assert move.attributes["realtime.move.mode"] == report.mode.value
    connections = [s for s in spans if s.name == "realtime.connection"]
    assert len(connections) >= 4
    assert all("conversation" in ancestors(s, spans) for s in connections)
    answers = sorted(
        (s for s in spans if s.name == "realtime.generation"), key=lambda s: s.start_time or 0
    )
    # Pipecat opens its first turn as the pipeline starts: the first answer is in it.
    assert ancestors(answers[0], spans) == ["turn", "conversation"]
    assert all("conversation" in ancestors(s, spans) for s in answers)

    metrics = [
        data
        for frame in rig.of(MetricsFrame)
        for data in frame.data
        if isinstance(data, SessionMoveMetricsData)
    ]
    assert [(m.number, m.reason, m.outcome) for m in metrics] == [
        (r.number, r.reason.value, r.outcome.value) for r in reports
    ]
    for data, report in zip(metrics, reports, strict=True):
        assert data.processor == service.name
        assert data.gap_ms == report.gap_ms
        assert data.held_audio_ms == report.audio_ms_held
        assert data.replayed_messages == report.messages_replayed
        assert data.mode == report.mode.value
    assert metrics[0].go_away_notice_ms is not None
    handles = [f.handle for f in rig.of(SessionResumptionUpdateFrame) if f.handle]
    assert_no_secret(spans, handles)
    assert all(h not in repr(metrics) for h in handles)


async def test_without_pipeline_metrics_no_move_metrics_frame_is_pushed() -> None:
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: resumable(rig, 1))
            assert emu.faults.drop() == 1
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
    assert rig.of(MetricsFrame) == []
