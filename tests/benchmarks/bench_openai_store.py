"""What keeping an OpenAI Realtime call in a session store costs: what it writes, and the time
each beat spends on the event loop taking and encoding the record.

One transport on the OpenAI emulator (in this process, its time unscaled) keeps its call in a
real Redis server; the user speaks 20 ms chunks in real time, a question of ``--speech``
seconds then a second of silence, for ``--seconds``. Reported: whole-record writes and
appended parts per second, bytes per write and per second, and the mean and largest time of a
beat's capture and encoding (the part that shares the loop with the audio). Figures are
printed, never asserted.

    .venv/bin/python tests/benchmarks/bench_openai_store.py [--seconds 10] [--speech 3]
        [--encrypted]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from cryptography.fernet import Fernet

from realtime_resumption.openai import (
    InputTranscription,
    OpenAIRealtimeOptions,
    OpenAIRealtimeTransport,
    SessionConfig,
)
from realtime_resumption.openai.realtime_persistence import RealtimeKeeper
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import StoreOptions
from realtime_resumption.testing.openai_emulator import (
    OpenAIEmulator,
    OpenAIEmulatorConfig,
    user_audio,
)
from realtime_resumption.testing.redis_server import RedisServer

CHUNK = 0.02
RATE = 24_000


async def run(seconds: float, speech: float, encrypted: bool) -> None:
    beats: list[float] = []
    original = RealtimeKeeper.snapshot

    def timed(self: RealtimeKeeper) -> object:
        # The beat's loop time: the record taken and encoded as the write would.
        started = time.perf_counter()
        record = original(self)
        self._codec.encode(record)
        beats.append(time.perf_counter() - started)
        return record

    RealtimeKeeper.snapshot = timed  # type: ignore[assignment,method-assign]
    key = Fernet.generate_key() if encrypted else None
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(Path(workdir))
        await server.start()
        store = RedisStore(url=server.url)
        try:
            async with OpenAIEmulator(OpenAIEmulatorConfig(answer_chunks=10)) as emu:
                transport = OpenAIRealtimeTransport(
                    emu.client(),
                    SessionConfig(transcription=InputTranscription("whisper-1")),
                    OpenAIRealtimeOptions(websocket_options=emu.websocket_options()),
                    store=store,
                    session_key="bench",
                    store_options=StoreOptions(encryption_key=key),
                )
                await transport.connect()
                period = round((speech + 1.0) / CHUNK)
                spoken = round(speech / CHUNK)
                for seq in range(round(seconds / CHUNK)):
                    talking = seq % period < spoken
                    transport.send_audio(user_audio(seq, speech=talking, rate=RATE))
                    await asyncio.sleep(CHUNK)
                stats = transport.store_stats
                await transport.disconnect()
        finally:
            await store.close()
            await server.stop()
    RealtimeKeeper.snapshot = original  # type: ignore[method-assign]
    assert stats is not None
    print(f"{seconds:g} s of a call, {speech:g} s questions, encrypted={encrypted}")
    print(f"  writes: {stats.writes / seconds:.1f}/s, errors {stats.errors}")
    print(
        f"  bytes: {stats.written_bytes / max(1, stats.writes) / 1024:.1f} KiB per write, "
        f"{stats.written_bytes / seconds / 1024:.1f} KiB/s"
    )
    print(
        f"  beat on the loop: mean {statistics.mean(beats) * 1e3:.2f} ms, "
        f"max {max(beats) * 1e3:.2f} ms over {len(beats)} beats"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--speech", type=float, default=3.0)
    parser.add_argument("--encrypted", action="store_true")
    args = parser.parse_args()
    asyncio.run(run(args.seconds, args.speech, args.encrypted))


if __name__ == "__main__":
    main()
