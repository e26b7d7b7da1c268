"""The lanes of the comparison, in the order the table shows them."""

from __future__ import annotations

from livekit.plugins.google.realtime import RealtimeModel as StockRealtimeModel
from livekit.plugins.realtime_resumption import RealtimeModel as OurRealtimeModel
from pipecat.services.google.gemini_live.llm import GeminiLiveLLMService as StockGeminiLive

from realtime_resumption.pipecat import GeminiLiveLLMService as OurGeminiLive

from .livekit_stack import LiveKitStack, gemini_model
from .pipecat_stack import PipecatStack, gemini_service
from .stacks import Lane


def all_lanes() -> list[Lane]:
    """Each framework's stock Gemini Live integration, then ours in the same place.

    Pipecat: ``pipecat.services.google.gemini_live.llm.GeminiLiveLLMService`` and
    ``realtime_resumption.pipecat.GeminiLiveLLMService`` in the same pipeline. LiveKit:
    ``livekit.plugins.google.realtime.RealtimeModel`` and
    ``livekit.plugins.realtime_resumption.RealtimeModel`` in the same ``AgentSession``.
    """
    return [
        Lane(
            "pipecat-stock",
            "Pipecat (stock)",
            False,
            "pipecat",
            lambda ctx: PipecatStack(ctx, gemini_service(ctx, StockGeminiLive)),
        ),
        Lane(
            "pipecat-ours",
            "Pipecat + ours",
            True,
            "pipecat",
            lambda ctx: PipecatStack(ctx, gemini_service(ctx, OurGeminiLive)),
        ),
        Lane(
            "livekit-stock",
            "LiveKit (stock)",
            False,
            "livekit",
            lambda ctx: LiveKitStack(ctx, gemini_model(ctx, StockRealtimeModel)),
        ),
        Lane(
            "livekit-ours",
            "LiveKit + ours",
            True,
            "livekit",
            lambda ctx: LiveKitStack(ctx, gemini_model(ctx, OurRealtimeModel)),
        ),
    ]
