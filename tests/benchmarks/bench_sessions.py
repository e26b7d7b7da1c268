"""Sessions per core: concurrent GeminiLiveTransport sessions through a rotation storm.

For each N, N sessions on one emulator each ask one question (so each holds a resumption
handle), then stream 20 ms silent audio in real time; midway every session gets goAway at once
(the storm) and moves. Reported per N:

- caller audio delay: from a chunk's real-time capture instant to its first arrival at the
  emulator (client lateness, the transport's queues and any hold during the move, the
  network); p50 / p95 / max over every chunk of every session;
- lost: chunks sent that the emulator never received, or that a session's final state lacks;
- client CPU per session-second (the client process's CPU time over N x the streamed seconds)
  and the sessions one core would carry at that cost.

The emulator runs in a process of its own (``emulator_process``), so its CPU is not the
client's; both read the same monotonic clock. The largest N with p95 < 50 ms and nothing
lost is the measured capacity of one client process (one core). Figures are printed, never
asserted; on a shared machine they are noisy.

    .venv/bin/python tests/benchmarks/bench_sessions.py                  # N = 25, 50, 100, 150
    .venv/bin/python tests/benchmarks/bench_sessions.py --sessions 150 200 300 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from emulator_process import EmulatorProcess
from google import genai
from loguru import logger

from realtime_resumption.emulator import EmulatorConfig, user_audio
from realtime_resumption.emulator.ledger import Ledger
from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.moves import MoveReport
from realtime_resumption.transport import ContentTurn

MODEL = "gemini-live-2.5-flash-preview"
CHUNK = 0.02
NOTICE = 10.0
"""goAway timeLeft of the storm: ample time for every session to reach its move."""
DELAY_GOAL = 0.05
WAIT = 60.0
"""Bound of every wait of the benchmark."""


def _report(ledger: Ledger, started_at: float) -> dict[str, Any]:
    summary = ledger.summary()
    first_arrival: dict[int, float] = {}
    for record in ledger.sessions.values():
        for conn in record.connections:
            for message in conn.client_messages:
                for seq in message.audio_seqs:
                    first_arrival.setdefault(seq, started_at + message.time)
    return {
        "arrivals": first_arrival,
        "lost": summary.audio_lost_count,
        "duplicates": summary.audio_duplicate_count,
        "moves": len(summary.moves),
        "max_stall": summary.max_input_stall,
    }


@dataclass
class _Session:
    index: int
    transport: GeminiLiveTransport
    sent: dict[int, float] = field(default_factory=dict)
    """seq -> the instant it was captured (its real-time schedule)."""
    moves: list[MoveReport] = field(default_factory=list)
    moved: asyncio.Event = field(default_factory=asyncio.Event)

    async def warm_up(self) -> None:
        answered, handle = asyncio.Event(), asyncio.Event()
        self.transport.on_generation_end = lambda gid, reason: answered.set()
        self.transport.on_resumption_update = lambda h, resumable, index: handle.set()
        self.transport.on_move = self._moved
        await self.transport.connect()
        self.transport.send_live_text([ContentTurn("user", "hello")])
        async with asyncio.timeout(WAIT):
            await answered.wait()
            await handle.wait()

    def _moved(self, report: MoveReport) -> None:
        self.moves.append(report)
        self.moved.set()

    async def stream(self, start: float, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        chunks = round(seconds / CHUNK)
        base = self.index * 1_000_000
        for k in range(chunks):
            due = start + k * CHUNK
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            seq = base + k
            self.sent[seq] = due
            self.transport.send_audio(user_audio(seq, speech=False))


@dataclass(frozen=True)
class _Result:
    sessions: int
    p50: float
    p95: float
    worst: float
    lost: int
    duplicates: int
    moves: int
    max_stall: float | None
    cpu_per_session_second: float

    @property
    def ok(self) -> bool:
        return self.p95 < DELAY_GOAL and self.lost == 0 and self.moves >= self.sessions


async def _level(sessions: int, seconds: float) -> _Result:
    async with EmulatorProcess(EmulatorConfig(notice=NOTICE, setup_timeout=WAIT)) as server:
        client = genai.Client(api_key="bench", http_options=server.http_options)
        rigs = [
            _Session(i, GeminiLiveTransport(client=client, model=MODEL)) for i in range(sessions)
        ]
        await asyncio.gather(*(rig.warm_up() for rig in rigs))
        loop = asyncio.get_running_loop()
        start = loop.time() + 0.2
        cpu = time.process_time()
        streams = [asyncio.create_task(rig.stream(start, seconds)) for rig in rigs]
        await asyncio.sleep(max(0.0, start + seconds / 2 - loop.time()))
        await server.fault("go_away")
        await asyncio.gather(*streams)
        cpu = time.process_time() - cpu
        async with asyncio.timeout(WAIT):
            await asyncio.gather(*(rig.moved.wait() for rig in rigs))
        await asyncio.sleep(0.5)  # the last chunks cross the network
        report = _report(await server.ledger(), server.started_at)
        await asyncio.gather(*(rig.transport.disconnect() for rig in rigs))
    arrivals = report["arrivals"]
    delays, never = [], 0
    for rig in rigs:
        for seq, due in rig.sent.items():
            if seq in arrivals:
                delays.append(arrivals[seq] - due)
            else:
                never += 1
    delays.sort()
    return _Result(
        sessions=sessions,
        p50=statistics.median(delays),
        p95=delays[int(0.95 * (len(delays) - 1))],
        worst=delays[-1],
        lost=report["lost"] + never,
        duplicates=report["duplicates"],
        moves=sum(len(rig.moves) for rig in rigs),
        max_stall=report["max_stall"],
        cpu_per_session_second=cpu / (sessions * seconds),
    )


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


async def _main(levels: list[int], seconds: float) -> None:
    logger.remove()
    print(f"python {sys.version.split()[0]}; emulator in its own process; {seconds:g} s each")
    print(
        f"{'sessions':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'lost':>5} {'twice':>6} "
        f"{'moves':>6} {'stall ms':>9} {'CPU us/session-s':>17} {'sessions/core':>14}"
    )
    best = None
    for n in levels:
        r = await _level(n, seconds)
        per_core = 1 / r.cpu_per_session_second if r.cpu_per_session_second else float("inf")
        print(
            f"{n:>8} {_ms(r.p50):>8} {_ms(r.p95):>8} {_ms(r.worst):>8} {r.lost:>5} "
            f"{r.duplicates:>6} {r.moves:>6} {_ms(r.max_stall):>9} "
            f"{r.cpu_per_session_second * 1e6:>17.0f} {per_core:>14.0f}"
            f"{'' if r.ok else '   over the goal'}",
            flush=True,
        )
        if r.ok:
            best = r
    if best is None:
        print("no N kept p95 < 50 ms with nothing lost")
    else:
        print(
            f"largest N with p95 < 50 ms, nothing lost: {best.sessions} sessions on one client "
            f"process (one core; goal >= 150)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[25, 50, 100, 150])
    parser.add_argument("--seconds", type=float, default=6.0, help="streamed seconds per N")
    args = parser.parse_args()
    asyncio.run(_main(args.sessions, args.seconds))


if __name__ == "__main__":
    main()
