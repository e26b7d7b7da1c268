"""Planned moves over a delayed network, with a caller streaming audio without pause: how many
client audio chunks the resumed session heard twice, and how many it lost (the ledger)."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any

from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

from realtime_resumption.emulator import Emulator, EmulatorConfig
from realtime_resumption.emulator.caller import ScriptedCaller
from realtime_resumption.emulator.server import VERTEX_LOCATION, VERTEX_PROJECT
from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.moves import MoveOutcome
from realtime_resumption.resumption import ResumptionOptions

from .net_delay import DelayProxy

MODEL = "gemini-live-2.5-flash-preview"
SETUP_LATENCY = 0.3
"""A realistic setup (seconds of the service's work), where the emulator can model it."""


@dataclass(frozen=True)
class ReplayFigures:
    profile: str
    round_trip: float
    moves: int
    heard_twice: int
    """Client audio chunks the sessions' final states hold more than once."""
    lost: int
    """Client audio chunks the transport accepted that no final state holds."""


def _client(emu: Emulator, port: int, vertex: bool) -> genai.Client:
    options = types.HttpOptions(
        base_url=f"https://127.0.0.1:{port}",
        async_client_args={"ssl": emu.client_ssl_context()},
    )
    if vertex:
        return genai.Client(
            vertexai=True,
            credentials=Credentials(token="emulator-token"),  # type: ignore[no-untyped-call]
            project=VERTEX_PROJECT,
            location=VERTEX_LOCATION,
            http_options=options,
        )
    return genai.Client(api_key="emulator-key", http_options=options)


def _emulator_config(profile: str, time_scale: float) -> EmulatorConfig:
    fields = {f.name for f in dataclasses.fields(EmulatorConfig)}
    realistic: dict[str, Any] = {}
    if "setup_latency" in fields:
        realistic["setup_latency"] = SETUP_LATENCY / time_scale
    if "round_trip" in fields:
        realistic["round_trip"] = 0.0  # the proxy is the network
    return EmulatorConfig(profile=profile, time_scale=time_scale, **realistic)  # type: ignore[arg-type]


async def measure(
    profile: str,
    round_trip: float,
    moves: int,
    *,
    time_scale: float = 0.25,
    pace: float = 0.5,
    wait: float = 20.0,
) -> ReplayFigures:
    """``moves`` planned moves (goAway after an answered turn) while the caller streams audio
    without pause; Vertex without ``transparent`` (the arrival rule)."""
    async with Emulator(_emulator_config(profile, time_scale)) as emu:
        async with DelayProxy(emu.port, round_trip) as proxy:
            transport = GeminiLiveTransport(
                client=_client(emu, proxy.port, profile == "vertex"),
                model=MODEL,
                tool_call_grace=0.05,
                resumption=ResumptionOptions(deadline_margin=1.0, attempt_timeout=5.0),
            )
            caller = ScriptedCaller(
                transport, chunk_ms=20, pace=pace, turn_silence=0.5 * time_scale + 0.04
            )
            try:
                await transport.connect()
                caller.start_microphone()
                for n in range(1, moves + 1):
                    await caller.ask(("what", "is", "new"), timeout=wait)
                    await caller.wait_until(
                        lambda r: (
                            bool(r.resumption_updates) and r.resumption_updates[-1].has_handle
                        ),
                        timeout=wait,
                        what="a handle after the answer",
                    )
                    emu.faults.go_away(time_left=5.0)
                    await caller.wait_moves(n, timeout=wait)
                await caller.ask(("are", "you", "there"), timeout=wait)
                await caller.stop_microphone()
                await asyncio.sleep(4 * round_trip + 0.05)  # the last chunks reach the session
                await transport.disconnect()
            finally:
                await caller.aclose()
                await transport.disconnect()
            comparison = caller.summary().compare(emu.ledger.summary())
            outcomes = [m.outcome for m in caller.record.moves]
    assert outcomes == [MoveOutcome.RESUMED] * moves, outcomes
    return ReplayFigures(
        profile=profile,
        round_trip=round_trip,
        moves=moves,
        heard_twice=len(comparison.audio_duplicated),
        lost=len(comparison.audio_missing),
    )
