"""A move costs the event loop little: a replay is written a bounded batch per loop turn, and
sessions told to move at once spread their moves.

The write loop is measured by counting loop turns, never by the wall clock: a ticker task
counts the turns, and every write notes the count, so the writes that share one count were
made in one turn.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence

from google.genai import types

from realtime_resumption.emulator import Emulator, EmulatorConfig
from realtime_resumption.gemini.connection import WRITE_BATCH, ConnectionHooks, _Connection
from realtime_resumption.gemini.messages import ClientMessage

MODEL = "gemini-2.0-flash-live-001"
FRAME = b"\x10\x00" * 320  # 20 ms of quiet PCM16 at 16 kHz
HELD_SECONDS = 30


async def test_a_30_s_replay_is_written_a_batch_per_loop_turn() -> None:
    turn = 0
    writes_per_turn: Counter[int] = Counter()
    failed: list[ClientMessage] = []
    done = asyncio.Event()
    total = HELD_SECONDS * 50

    def on_written(_: _Connection, message: ClientMessage) -> None:
        writes_per_turn[turn] += 1
        if sum(writes_per_turn.values()) == total:
            done.set()

    def on_failed(_: _Connection, messages: Sequence[ClientMessage], error: Exception) -> None:
        failed.extend(messages)
        done.set()

    async def ticker() -> None:
        nonlocal turn
        while True:
            turn += 1
            await asyncio.sleep(0)

    hooks = ConnectionHooks(
        message=lambda conn, message: None,
        receive_error=lambda conn, error: None,
        written=on_written,
        write_failed=on_failed,
        closed=lambda conn, code, reason: None,
    )
    async with Emulator(EmulatorConfig(time_scale=0.05)) as emu:
        conn = _Connection(
            client=emu.client(),
            model=MODEL,
            config=types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO]),
            dial_gen=1,
            handle_supplied=False,
            hooks=hooks,
            owns_client=True,
        )
        await conn.open(5)
        ticking = asyncio.create_task(ticker())
        try:
            # The replay a move queues at once for the new connection: 30 s of held audio.
            for _ in range(total):
                conn.enqueue(ClientMessage.audio(FRAME))
            conn.start()
            async with asyncio.timeout(30):
                await done.wait()
        finally:
            ticking.cancel()
            await asyncio.wait({ticking})
            await conn.close()
    assert failed == []
    assert sum(writes_per_turn.values()) == total
    # Bounded work per turn: never more than one batch, so the replay took many turns.
    assert max(writes_per_turn.values()) <= WRITE_BATCH
    assert len(writes_per_turn) >= total // WRITE_BATCH
