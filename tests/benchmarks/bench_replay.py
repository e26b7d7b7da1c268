"""Audio heard twice and lost per planned move, without ``transparent`` (the arrival rule),
over a network with a given round trip (a delaying proxy: pings are delayed like data).

Per profile and round trip: N planned moves (goAway after an answered turn) while a caller
streams 20 ms chunks in real time; from the emulator's ledger, client audio chunks the
session's final state holds twice, and chunks accepted but absent.

    .venv/bin/python tests/benchmarks/bench_replay.py [--moves 8] [--round-trips 0.001 0.005 0.01 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from loguru import logger

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: find tests/
from tests.transport.replay_measure import measure


async def _main(moves: int, round_trips: list[float], profiles: list[str]) -> None:
    print(f"{'profile':8} {'rtt ms':>7} {'moves':>5} {'heard twice/move':>17} {'lost/move':>10}")
    for profile in profiles:
        for rtt in round_trips:
            f = await measure(profile, rtt, moves, pace=1.0)
            print(
                f"{profile:8} {rtt * 1000:7.1f} {f.moves:5d} {f.heard_twice / f.moves:17.2f} "
                f"{f.lost / f.moves:10.2f}",
                flush=True,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=8)
    parser.add_argument("--round-trips", type=float, nargs="+", default=[0.001, 0.005, 0.01, 0.02])
    parser.add_argument("--profiles", nargs="+", default=["gemini", "vertex"])
    args = parser.parse_args()
    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    asyncio.run(_main(args.moves, args.round_trips, args.profiles))
