"""Many concurrent sessions on one emulator."""

from __future__ import annotations

import asyncio

from realtime_resumption.testing.emulator import Emulator

from .emu_helpers import MODEL, ask, audio_ids, config, live_config, read_turn

SESSIONS = 200


async def test_200_concurrent_sessions() -> None:
    # A generous setup timeout: 200 TLS handshakes at once take a while on a small machine.
    async with Emulator(config(answer_chunks=3, setup_timeout=3000)) as emu:
        client = emu.client()
        started = asyncio.Event()
        open_now = 0

        async def one(i: int) -> tuple[str, list[tuple[int, int]]]:
            nonlocal open_now
            async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
                open_now += 1
                if open_now == SESSIONS:
                    started.set()
                await asyncio.wait_for(started.wait(), 30)  # all open at once
                await ask(session, f"hello {i}")
                ids = audio_ids(await read_turn(session, timeout=30))
                assert session.session_id is not None
                return session.session_id, ids

        results = await asyncio.gather(*(one(i) for i in range(SESSIONS)))
        await emu.wait_disconnected(timeout=30)
    assert len({sid for sid, _ in results}) == SESSIONS
    assert all(ids == [(0, 0), (0, 1), (0, 2)] for _, ids in results)
    summary = emu.ledger.summary()
    assert len(summary.sessions) == SESSIONS
    assert all(s.answers_cut == () and s.turns[0].delivered == 3 for s in summary.sessions.values())
