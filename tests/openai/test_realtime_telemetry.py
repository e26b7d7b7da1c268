"""The OpenAI transport's spans and metrics, with the real OpenTelemetry SDK in memory, through
a drop mid-answer and its rebuild on the bundled emulator (the ``openai`` SDK, real TLS)."""

from __future__ import annotations

from realtime_resumption.openai import (
    InputTranscription,
    OpenAIRealtimeOptions,
    OpenAIRealtimeTransport,
    SessionConfig,
)
from realtime_resumption.telemetry import (
    METRIC_MOVES,
    MODEL,
    MOVE_OUTCOME,
    MOVE_REASON,
    MOVE_TURN_CUT,
    PROVIDER,
    SPAN_CONNECTION,
    SPAN_GENERATION,
    SPAN_MOVE,
)
from realtime_resumption.testing.openai_emulator import OpenAIEmulator
from tests.openai.transport_helpers import Recorder
from tests.openai_emulator.oai_helpers import config, speech
from tests.telemetry.otel_helpers import Otel

HEARD = SessionConfig(transcription=InputTranscription("whisper-1"))


async def test_a_drop_mid_answer_is_a_move_span_with_its_connections_and_answers() -> None:
    otel = Otel()
    try:
        async with OpenAIEmulator(config(answer_chunks=60)) as emu:
            options = OpenAIRealtimeOptions(websocket_options=emu.websocket_options())
            t = OpenAIRealtimeTransport(emu.client(), HEARD, options, telemetry=otel.telemetry)
            rec = Recorder(t)
            await t.connect()
            for chunk in speech(0, 5, ["long", "story"]):
                t.send_audio(chunk)
            await rec.until(lambda r: bool(r.named("on_first_audio_chunk")))
            emu.faults.drop()
            await rec.ended(2, timeout=10)
            await t.disconnect()
        (move,) = otel.named(SPAN_MOVE)
        attributes = dict(move.attributes or {})
        assert attributes[MOVE_REASON] == "lost" and attributes[MOVE_OUTCOME] == "rebuilt"
        assert attributes[MOVE_TURN_CUT] is True
        assert attributes[PROVIDER] == "openai" and attributes[MODEL] == "gpt-realtime"
        assert len(otel.named(SPAN_CONNECTION)) == 2
        generations = otel.named(SPAN_GENERATION)
        assert len(generations) == 2
        counted = otel.counted(METRIC_MOVES)
        assert sum(counted.values()) == 1
        assert any(("realtime.move.reason", "lost") in key for key in counted)
        # Every span ended: the disconnect closed what was still open.
        assert all(span.end_time is not None for span in otel.spans)
    finally:
        otel.shutdown()


async def test_without_telemetry_the_transport_has_none() -> None:
    async with OpenAIEmulator(config()) as emu:
        t = OpenAIRealtimeTransport(emu.client(), telemetry=False)
        assert t.telemetry is None
