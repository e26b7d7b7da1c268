"""Audio heard twice and lost per planned move, by the arrival rule (no ``transparent``) and
the exact one, over a network with a given round trip (the emulator's: pings are delayed like data).

Per profile and round trip: N planned moves (goAway after an answered turn) while a caller
streams 20 ms chunks in real time; from the emulator's ledger, client audio chunks the
session's final state holds twice, and chunks accepted but absent. The emulator runs in a
process of its own (``emulator_process``), as the service does: its event loop's lag is not
the client's. ``vertex-transparent`` is Vertex with ``transparent=True``: the handle says
where it is (the exact rule).

    .venv/bin/python tests/benchmarks/bench_replay.py [--moves 8] [--round-trips 0.001 0.005 0.01 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from typing import Any

from emulator_process import EmulatorProcess
from google.genai import types
from google.oauth2.credentials import Credentials
from loguru import logger

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import EmulatorConfig
from realtime_resumption.testing.emulator.caller import ScriptedCaller
from realtime_resumption.testing.emulator.server import VERTEX_LOCATION, VERTEX_PROJECT

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


def _auth(options: types.HttpOptions, vertex: bool) -> dict[str, Any]:
    """How the transport reaches the emulator at ``options``."""
    if not vertex:
        return {"api_key": "emulator-key", "http_options": options}
    token = Credentials(token="emulator-token")  # type: ignore[no-untyped-call]
    return {
        "vertexai": True,
        "project": VERTEX_PROJECT,
        "location": VERTEX_LOCATION,
        "credentials": token,
        "http_options": options,
    }


def _emulator_config(profile: str, round_trip: float, time_scale: float) -> EmulatorConfig:
    # Both are wall-clock figures: the emulator scales what it is given.
    return EmulatorConfig(
        profile=profile,  # type: ignore[arg-type]
        time_scale=time_scale,
        setup_latency=SETUP_LATENCY / time_scale,
        round_trip=round_trip / time_scale,
    )


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
    without pause; ``profile`` ``vertex-transparent`` is Vertex with the exact rule."""
    api, _, mode = profile.partition("-")
    async with EmulatorProcess(_emulator_config(api, round_trip, time_scale)) as server:
        assert server.http_options is not None
        transport = GeminiLiveTransport(
            **_auth(server.http_options, api == "vertex"),
            transparent=mode == "transparent",
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
                    lambda r: bool(r.resumption_updates) and r.resumption_updates[-1].has_handle,
                    timeout=wait,
                    what="a handle after the answer",
                )
                await server.fault("go_away", time_left=5.0)
                await caller.wait_moves(n, timeout=wait)
            await caller.ask(("are", "you", "there"), timeout=wait)
            await caller.stop_microphone()
            await asyncio.sleep(4 * round_trip + 0.05)  # the last chunks reach the session
            await transport.disconnect()
        finally:
            await caller.aclose()
            await transport.disconnect()
        comparison = caller.summary().compare((await server.ledger()).summary())
        outcomes = [m.outcome for m in caller.record.moves]
    assert outcomes == [MoveOutcome.RESUMED] * moves, outcomes
    return ReplayFigures(
        profile=profile,
        round_trip=round_trip,
        moves=moves,
        heard_twice=len(comparison.audio_duplicated),
        lost=len(comparison.audio_missing),
    )


async def _main(moves: int, round_trips: list[float], profiles: list[str]) -> None:
    print(f"{'profile':18} {'rtt ms':>7} {'moves':>5} {'heard twice/move':>17} {'lost/move':>10}")
    for profile in profiles:
        for rtt in round_trips:
            f = await measure(profile, rtt, moves, pace=1.0)
            print(
                f"{profile:18} {rtt * 1000:7.1f} {f.moves:5d} {f.heard_twice / f.moves:17.2f} "
                f"{f.lost / f.moves:10.2f}",
                flush=True,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=8)
    parser.add_argument("--round-trips", type=float, nargs="+", default=[0.001, 0.005, 0.01, 0.02])
    parser.add_argument(
        "--profiles",
        nargs="+",
        choices=["gemini", "vertex", "vertex-transparent"],
        default=["gemini", "vertex", "vertex-transparent"],
    )
    args = parser.parse_args()
    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    asyncio.run(_main(args.moves, args.round_trips, args.profiles))
