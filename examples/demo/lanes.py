"""The lanes of the comparison, in the order the table shows them."""

from __future__ import annotations

from livekit.plugins.google.realtime import RealtimeModel as StockRealtimeModel
from pipecat.services.google.gemini_live.llm import GeminiLiveLLMService as StockGeminiLive

from .livekit_stack import LiveKitStack
from .pipecat_stack import PipecatStack
from .stacks import Lane, TransportStack


def all_lanes() -> list[Lane]:
    """Stock Pipecat, stock LiveKit, and ours.

    Stock Pipecat is ``pipecat.services.google.gemini_live.llm.GeminiLiveLLMService`` in a
    pipeline; stock LiveKit is ``livekit.plugins.google.realtime.RealtimeModel`` in an
    ``AgentSession``; "ours: transport alone" is ``GeminiLiveTransport`` driven directly by
    the application, with no framework around it.
    """
    return [
        Lane(
            "pipecat-stock",
            "Pipecat (stock)",
            False,
            "pipecat",
            lambda ctx: PipecatStack(ctx, StockGeminiLive),
        ),
        Lane(
            "livekit-stock",
            "LiveKit (stock)",
            False,
            "livekit",
            lambda ctx: LiveKitStack(ctx, StockRealtimeModel),
        ),
        Lane(
            "transport",
            "ours: transport alone",
            True,
            None,
            TransportStack,
        ),
    ]
