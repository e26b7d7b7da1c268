"""A long call, time-scaled: a question a minute, the service's rotations, and what they cost.

One GeminiLiveTransport talks to the emulator (in a process of its own, so the client's memory
and tasks are the client's alone; as the service was measured: resumes refused while the old
connection is open, late pongs) for ``--minutes`` of call time, with the emulator's clock and
the caller's audio both ``--scale`` times real time (0.05: an hour in three minutes). The
transport's arrival margins scale with them (as in the rotation tests): unscaled, its 40 ms
tolerance would cover 0.8 s of compressed speech and replay it. The caller streams 20 ms chunks throughout and asks a
spoken question every minute; the emulator rotates every connection (goAway, then the
deadline close) every ``--rotate-every`` minutes. Printed, from the emulator's ledger and the
process:

- moves and their outcomes (the emulator sends goAway 50 s before a connection's end, and the
  move happens then: a connection lives ``--rotate-every`` minutes less the notice); speech lost and heard twice, silence heard twice (chunks);
- questions asked and answered;
- resident memory (RSS), live asyncio tasks and open file descriptors of the client process
  every ``--rotate-every`` minutes, and their growth from the first to the last (a soak holds
  tasks and descriptors flat; the scripted caller's own record of every chunk grows the RSS);
- client CPU per second of call audio;
- with ``--tracemalloc``: the growth of what the package itself holds (allocations made in its
  production modules, the testing kit left out), from the first sample to the last; this
  slows the client about twofold, so its CPU figure is then not the client's.

Figures are printed, never asserted.

    .venv/bin/python tests/benchmarks/bench_soak.py                     # 60 min, 5 rotations
    .venv/bin/python tests/benchmarks/bench_soak.py --minutes 10 --rotate-every 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
import tracemalloc
from dataclasses import dataclass

from emulator_process import EmulatorProcess
from loguru import logger

from realtime_resumption.gemini import GeminiLiveTransport, OutboxLimits
from realtime_resumption.testing.emulator import EmulatorConfig
from realtime_resumption.testing.emulator.caller import ScriptedCaller

MODEL = "gemini-live-2.5-flash-preview"
QUESTION = ("what", "is", "the", "weather", "like", "today")


PACKAGE = "/realtime_resumption/"
TESTING_KIT = "/realtime_resumption/testing/"


def _package_bytes(snapshot: tracemalloc.Snapshot) -> int:
    """What the package's production modules allocated and still hold."""
    return sum(
        stat.size
        for stat in snapshot.statistics("filename")
        if PACKAGE in stat.traceback[0].filename and TESTING_KIT not in stat.traceback[0].filename
    )


@dataclass
class Sample:
    """The process at one moment of the call."""

    call_minute: float
    rss_mb: float
    tasks: int
    fds: int
    package_kb: float | None


def _sample(minute: float) -> Sample:
    with open("/proc/self/statm") as statm:
        rss_pages = int(statm.read().split()[1])
    traced = tracemalloc.is_tracing()
    return Sample(
        minute,
        rss_pages * resource.getpagesize() / 2**20,
        len(asyncio.all_tasks()),
        len(os.listdir("/proc/self/fd")),
        _package_bytes(tracemalloc.take_snapshot()) / 1024 if traced else None,
    )


async def soak(minutes: float, rotate_every: float, scale: float) -> None:
    config = EmulatorConfig(time_scale=scale, rotate_every=rotate_every * 60, notice=50.0)
    async with EmulatorProcess(config) as server:
        limits = OutboxLimits()
        transport = GeminiLiveTransport(
            api_key="bench",
            http_options=server.http_options,
            model=MODEL,
            # The tool-call grace and the arrival margins on the call's clock, as the emulator's.
            tool_call_grace=0.3 * scale,
            input_buffer=OutboxLimits(
                handle_margin=limits.handle_margin * scale,
                round_trip_tolerance=limits.round_trip_tolerance * scale,
            ),
        )
        caller = ScriptedCaller(transport, pace=scale, turn_silence=0.5 * scale + 0.04)
        samples: list[Sample] = []
        asked = 0
        cpu0, wall0 = time.process_time(), time.monotonic()
        await transport.connect()
        caller.start_microphone()
        try:
            minute_wall = 60 * scale
            next_sample = 0.0
            for minute in range(int(minutes)):
                caller.say(QUESTION)
                asked += 1
                await asyncio.sleep(minute_wall)
                if minute >= next_sample:
                    samples.append(_sample(minute + 1))
                    next_sample += rotate_every
            samples.append(_sample(minutes))
        finally:
            await caller.stop_microphone()
            await asyncio.sleep(1.0)  # the last answer
            await transport.disconnect()
            await caller.aclose()
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        summary = (await server.ledger()).summary()
    record = caller.record
    sessions = list(summary.sessions.values())
    speech_lost = sum(len(s.speech_lost) for s in sessions)
    speech_twice = sum(len(s.speech_duplicates) for s in sessions)
    silence_twice = sum(len(s.silence_duplicates) for s in sessions)
    outcomes: dict[str, int] = {}
    for move in record.moves:
        outcomes[str(move.outcome)] = outcomes.get(str(move.outcome), 0) + 1
    answered = len({e.turn for e in record.events if e.kind == "answer_chunk"})
    print(
        f"{minutes:.0f} min of call in {wall:.0f} s (scale {scale}), rotation every {rotate_every} min"
    )
    print(f"  moves: {len(record.moves)} {outcomes}; server sessions: {len(sessions)}")
    print(f"  questions asked {asked}, answers heard {answered}")
    print(
        f"  speech lost {speech_lost} chunks, speech heard twice {speech_twice}, "
        f"silence heard twice {silence_twice}"
    )
    print("  call min   RSS MB   tasks   fds   package KB")
    for s in samples:
        held = f"{s.package_kb:12.1f}" if s.package_kb is not None else "           -"
        print(f"  {s.call_minute:8.0f} {s.rss_mb:8.1f} {s.tasks:7d} {s.fds:5d} {held}")
    first, last = samples[0], samples[-1]
    print(
        f"  growth: RSS {last.rss_mb - first.rss_mb:+.1f} MB, tasks {last.tasks - first.tasks:+d}, "
        f"fds {last.fds - first.fds:+d}"
    )
    kept = [record.audio, record.events]
    record_mb = sum(sys.getsizeof(x) + sum(sys.getsizeof(i) for i in x) for x in kept) / 2**20
    print(
        f"  (the scripted caller's own record of every chunk and event it saw: "
        f"{len(record.audio)} chunks, {len(record.events)} events, about {record_mb:.1f} MB)"
    )
    print(f"  client CPU per second of call audio: {1000 * cpu / (minutes * 60):.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rotate-every", type=float, default=11.0, help="call minutes")
    parser.add_argument("--scale", type=float, default=0.05, help="wall seconds per call second")
    parser.add_argument(
        "--tracemalloc", action="store_true", help="also trace what the package holds"
    )
    args = parser.parse_args()
    logger.remove()
    if args.tracemalloc:
        tracemalloc.start()
    asyncio.run(soak(args.minutes, args.rotate_every, args.scale))


if __name__ == "__main__":
    main()
