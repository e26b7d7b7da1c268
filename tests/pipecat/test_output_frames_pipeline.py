"""The answer's frames for server messages the emulator's model never writes (thoughts,
grounding, usage), in a real pipeline: ``emu.faults.send_raw`` sends the service's own
messages over the real TLS WebSocket to the real google-genai SDK, and the service pushes what
it makes of them through the pipeline."""

from __future__ import annotations

import json
from typing import Any

from pipecat.frames.frames import (
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    LLMThoughtEndFrame,
    LLMThoughtStartFrame,
    LLMThoughtTextFrame,
    MetricsFrame,
)
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.services.google.frames import LLMSearchResponseFrame
from pipecat.services.google.gemini_live.llm import GeminiModalities

from realtime_resumption.frames import GenerationEndedFrame, GenerationStartedFrame
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import GenerationEndReason

from . import services
from .rig import PushLog, Rig, emulator_config, until

GROUNDING = {"groundingChunks": [{"web": {"uri": "https://example.org/paris", "title": "Paris"}}]}
ANSWER: list[dict[str, Any]] = [
    {
        "serverContent": {
            "modelTurn": {"parts": [{"text": "thinking about Paris", "thought": True}]}
        }
    },
    {"serverContent": {"modelTurn": {"parts": [{"text": "Sunny."}]}}},
    {"serverContent": {"groundingMetadata": GROUNDING}},
    {"usageMetadata": {"promptTokenCount": 3, "responseTokenCount": 5, "totalTokenCount": 8}},
    {"serverContent": {"generationComplete": True}},
    {"serverContent": {"turnComplete": True}},
]
KINDS = (
    GenerationStartedFrame,
    LLMFullResponseStartFrame,
    LLMThoughtStartFrame,
    LLMThoughtTextFrame,
    LLMThoughtEndFrame,
    LLMTextFrame,
    LLMSearchResponseFrame,
    LLMFullResponseEndFrame,
    MetricsFrame,
    GenerationEndedFrame,
)


def _connections(emu: Emulator) -> list[Any]:
    return [c for session in emu.ledger.sessions.values() for c in session.connections]


def _names(frames: list[Frame]) -> list[str]:
    names = []
    for frame in frames:
        if isinstance(frame, MetricsFrame):
            names.extend(
                f"usage {d.value.total_tokens}"
                for d in frame.data
                if isinstance(d, LLMUsageMetricsData)
            )
        elif isinstance(frame, KINDS):
            names.append(type(frame).__name__)
    return names


async def test_thoughts_grounding_and_usage_come_as_the_answers_frames() -> None:
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu, settings={"modalities": GeminiModalities.TEXT})
        log = PushLog()
        log.source = service
        async with Rig([service], observers=[log], metrics=True) as rig:
            await until(lambda: any(c.setup_at is not None for c in _connections(emu)))
            for message in ANSWER:
                sent = emu.faults.send_raw(json.dumps(message))
                assert sent.count == 1
                await sent
            await rig.wait(lambda: rig.count(GenerationEndedFrame) >= 1)

    assert _names(log.frames()) == [
        "GenerationStartedFrame",
        "LLMFullResponseStartFrame",
        "LLMThoughtStartFrame",
        "LLMThoughtTextFrame",
        "LLMThoughtEndFrame",
        "LLMTextFrame",
        "LLMSearchResponseFrame",
        "LLMFullResponseEndFrame",
        "usage 8",
        "GenerationEndedFrame",
    ]
    (thought,) = rig.of(LLMThoughtTextFrame)
    assert thought.text == "thinking about Paris"
    assert [f.text for f in rig.of(LLMTextFrame)] == ["Sunny."]
    (search,) = rig.of(LLMSearchResponseFrame)
    assert [origin.site_uri for origin in search.origins] == ["https://example.org/paris"]
    (ended,) = rig.of(GenerationEndedFrame)
    assert ended.reason is GenerationEndReason.GENERATION_COMPLETE
