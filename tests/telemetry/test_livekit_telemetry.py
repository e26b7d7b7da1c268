"""A real LiveKit AgentSession (no room, no server) with LiveKit's tracer provider set
(``livekit.agents.telemetry.set_tracer_provider``, the real SDK exporting to memory) through
a planned move, a drop and a rebuild on the emulator: the plugin's spans nest under the
session's, ``metrics_collected`` carries each move as LiveKit's own metrics go, and
``session_reconnected`` keeps its stock, empty shape."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from livekit.agents import llm
from livekit.agents.metrics import RealtimeModelMetrics
from livekit.agents.telemetry import set_tracer_provider
from livekit.agents.voice.events import MetricsCollectedEvent
from livekit.plugins import realtime_resumption as rr
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from ..livekit.lk_helpers import text_call, until
from ..rotation.rotation_helpers import FAST
from .otel_helpers import ancestors, assert_no_secret, texts


@pytest.fixture
def livekit_traced() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        # Back to the process's global provider, as LiveKit starts.
        set_tracer_provider(trace.get_tracer_provider())
        provider.shutdown()


async def test_moves_nest_under_the_agent_session_and_reach_metrics_collected(
    livekit_traced: InMemorySpanExporter,
) -> None:
    collected: list[MetricsCollectedEvent] = []
    reconnected: list[object] = []
    # A handle after every setup: each move's connection soon has a place to move from.
    async with Emulator(EmulatorConfig(time_scale=0.1, update_after_setup=True)) as emu:
        model = rr.RealtimeModel(api_key="k", http_options=emu.http_options(), resumption=FAST)
        async with text_call(model) as (session, recorder):
            session.on("metrics_collected", collected.append)
            agent_rt = session.current_agent.realtime_llm_session
            agent_rt.on("session_reconnected", reconnected.append)
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")
            handles = [str(agent_rt.session_resumption_handle)]
            emu.faults.go_away(5.0)
            await until(lambda: len(recorder.moves) == 1)
            await until(lambda: agent_rt.session_resumption_handle not in (None, *handles))
            handles.append(str(agent_rt.session_resumption_handle))
            emu.faults.drop()
            await until(lambda: len(recorder.moves) == 2)
            emu.faults.expire_handles()
            emu.faults.drop()
            await until(lambda: len(recorder.moves) == 3)
            await until(lambda: len(collected) >= 3 and len(reconnected) == 3)

    reports = [m.report for m in recorder.moves]
    assert [(r.reason, r.outcome) for r in reports] == [
        (MoveReason.PLANNED, MoveOutcome.RESUMED),
        (MoveReason.LOST, MoveOutcome.RESUMED),
        (MoveReason.LOST, MoveOutcome.REBUILT),
    ]
    # The stock event, as LiveKit defines it: no fields.
    assert all(type(e) is llm.RealtimeSessionReconnectedEvent for e in reconnected)
    assert dataclasses.fields(llm.RealtimeSessionReconnectedEvent) == ()

    moves = [e.metrics for e in collected if isinstance(e.metrics, rr.SessionMoveMetrics)]
    assert [(m.request_id, m.reason, m.outcome) for m in moves] == [
        (f"move-{r.number}", r.reason.value, r.outcome.value) for r in reports
    ]
    for metrics, report in zip(moves, reports, strict=True):
        assert isinstance(metrics, RealtimeModelMetrics)  # LiveKit's own kind of metrics
        assert (metrics.input_tokens, metrics.output_tokens, metrics.duration) == (0, 0, 0.0)
        assert metrics.gap_ms == report.gap_ms
        assert metrics.mode == report.mode.value
        assert metrics.attempts == report.attempts
        assert metrics.replayed_messages == report.messages_replayed
    assert moves[0].go_away_notice_ms is not None
    assert session.usage is not None  # LiveKit's usage summary took them in without error

    spans = livekit_traced.get_finished_spans()
    names = {s.name for s in spans}
    assert "agent_session" in names
    ours = [s for s in spans if s.name.startswith("realtime.")]
    assert [
        s.attributes and s.attributes["realtime.move.outcome"]
        for s in ours
        if s.name == "realtime.move"
    ] == [
        "resumed",
        "resumed",
        "rebuilt",
    ]
    for span in ours:
        assert "agent_session" in ancestors(span, spans), (span.name, ancestors(span, spans))
    assert_no_secret(spans, handles)
    issued = [h.redacted for record in emu.ledger.sessions.values() for h in record.handles]
    assert len(issued) >= 3
    carried = list(texts(spans))
    assert not any(redacted in text for redacted in issued for text in carried)
