"""The lanes of the OpenAI call, in the order the table shows them.

Pipecat: ``pipecat.services.openai.realtime.llm.OpenAIRealtimeLLMService`` and
``realtime_resumption.pipecat.openai.OpenAIRealtimeLLMService`` in the same pipeline. LiveKit:
``livekit.plugins.openai.realtime.RealtimeModel`` with its default restart (20 minutes,
``max_session_duration``, on the call's scaled clock) and with the restart off (it meets the
service's cap), and ``livekit.plugins.realtime_resumption.openai.RealtimeModel`` in the same
``AgentSession``.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from livekit.plugins import openai as lk_openai
from livekit.plugins.realtime_resumption.openai import RealtimeModel as OurRealtimeModel
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.realtime import events
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService as StockOpenAIRealtime

from realtime_resumption.openai import OpenAIRealtimeOptions
from realtime_resumption.pipecat.openai import OpenAIRealtimeLLMService as OurOpenAIRealtime

from .call import INSTRUCTIONS
from .livekit_stack import LiveKitStack
from .openai_call import OPENAI_RATE, OpenAIPlan
from .pipecat_stack import WEATHER_TOOLS, PipecatStack
from .stacks import EMULATOR_KEY, Lane, OpenAIEndpoint, StackContext

LIVEKIT_RESTART = 1200.0
"""Stock LiveKit's ``max_session_duration`` default (``openai_utils.py``): it restarts its
connection every 20 minutes, before OpenAI's cap."""
MOVE_MARGIN = 3.0
FORCED_MARGIN = 1.0
"""Ours moves in the last ``MOVE_MARGIN`` wall-clock seconds before the scaled cap, at a turn
boundary, and at the latest ``FORCED_MARGIN`` before it: the client's own work (a TLS dial,
giving the new session the conversation) is not scaled, so the margins are not either."""


def _endpoint(ctx: StackContext) -> OpenAIEndpoint:
    if ctx.openai is None:
        raise ValueError(
            "an OpenAI lane runs on the OpenAI call (python -m examples.demo --openai)"
        )
    return ctx.openai


def _options(ctx: StackContext, plan: OpenAIPlan) -> OpenAIRealtimeOptions:
    return OpenAIRealtimeOptions(
        session_cap=plan.cap,
        move_margin=MOVE_MARGIN,
        forced_margin=FORCED_MARGIN,
        websocket_options={"ssl": _endpoint(ctx).ssl},
    )


def openai_service(ctx: StackContext, service_cls: Any, **ours: Any) -> Any:
    """``service_cls`` (an ``OpenAIRealtimeLLMService``) as Pipecat's examples build it, on the
    call's emulator: the instructions and input transcription in its session properties."""
    properties = events.SessionProperties(
        instructions=INSTRUCTIONS,
        audio=events.AudioConfiguration(
            input=events.AudioInput(transcription=events.InputAudioTranscription())
        ),
    )
    return service_cls(
        api_key=EMULATOR_KEY,
        base_url=_endpoint(ctx).realtime_url,
        settings=service_cls.Settings(model="gpt-realtime", session_properties=properties),
        **ours,
    )


def _pipecat(ctx: StackContext, llm: Any) -> PipecatStack:
    # The OpenAI services take their tools from the context, as Pipecat's examples give them.
    return PipecatStack(ctx, llm, rate=OPENAI_RATE, context=LLMContext(tools=WEATHER_TOOLS))


def _stock_livekit(ctx: StackContext, max_session_duration: float | None) -> LiveKitStack:
    # Stock LiveKit dials through aiohttp, whose TLS context is its own: a session that trusts
    # the emulator's CA, closed with the stack.
    http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=_endpoint(ctx).ssl))
    model = lk_openai.realtime.RealtimeModel(
        api_key=EMULATOR_KEY,
        base_url=_endpoint(ctx).base_url,
        http_session=http,
        max_session_duration=max_session_duration,
    )
    return LiveKitStack(ctx, model, rate=OPENAI_RATE, closing=[http.close])


def _our_livekit(ctx: StackContext, plan: OpenAIPlan) -> LiveKitStack:
    model = OurRealtimeModel(
        api_key=EMULATOR_KEY, base_url=_endpoint(ctx).base_url, realtime_options=_options(ctx, plan)
    )
    return LiveKitStack(ctx, model, rate=OPENAI_RATE)


def openai_lanes(plan: OpenAIPlan) -> list[Lane]:
    """Each framework's stock OpenAI Realtime integration, then ours in the same place."""
    return [
        Lane(
            "pipecat-stock",
            "Pipecat (stock)",
            False,
            "pipecat",
            lambda ctx: _pipecat(ctx, openai_service(ctx, StockOpenAIRealtime)),
        ),
        Lane(
            "pipecat-ours",
            "Pipecat + ours",
            True,
            "pipecat",
            lambda ctx: _pipecat(
                ctx, openai_service(ctx, OurOpenAIRealtime, options=_options(ctx, plan))
            ),
        ),
        Lane(
            "livekit-stock",
            "LiveKit (stock, 20 min restart)",
            False,
            "livekit",
            lambda ctx: _stock_livekit(ctx, plan.scaled(LIVEKIT_RESTART)),
        ),
        Lane(
            "livekit-stock-cap",
            "LiveKit (stock, at the cap)",
            False,
            "livekit",
            lambda ctx: _stock_livekit(ctx, None),
        ),
        Lane(
            "livekit-ours",
            "LiveKit + ours",
            True,
            "livekit",
            lambda ctx: _our_livekit(ctx, plan),
        ),
    ]
