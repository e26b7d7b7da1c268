"""Redis killed for 10 s mid-call (the target of a store outage): the call goes on untouched, the
outage is reported once, and the call's record is current again within a second of Redis
returning. A real Redis server, killed with SIGKILL and started again (empty, as a Redis that
does not persist comes back), and the emulator over real TLS."""

from __future__ import annotations

import asyncio

from realtime_resumption.gemini.live_options import StoreOptions
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import StoreError
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.testing.redis_server import RedisServer
from realtime_resumption.transport import ContentTurn

from ..livekit.lk_helpers import until
from ..transport.transport_helpers import emulator_config
from .takeover_helpers import answered_call, current, stream_speech

OUTAGE = 10.0
"""Seconds Redis stays down: the target. A Redis outage is wall-clock (a real server process
down for real), so this test takes about as long; it is the longest of the store tests."""
CURRENT_WITHIN = 1.0
"""Seconds after Redis returns within which the record holds the call's state again."""


async def test_a_ten_second_redis_outage_leaves_the_call_unaffected(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        # The defaults a deployment has; a first answer, and the session's first handle.
        a, rec = await answered_call(emu, redis_store, StoreOptions())
        await stream_speech(a, 1, 10)
        await until(lambda: a.store_stats is not None and a.store_stats.writes > 0)

        await redis_server.kill()
        loop = asyncio.get_running_loop()
        down_at = loop.time()
        seq, asked = 11, 0
        while loop.time() - down_at < OUTAGE:
            # The user talks, then asks; each question is answered while Redis is down.
            await stream_speech(a, seq, 25)
            seq += 25
            a.send_content([ContentTurn("user", f"question {asked}")])
            asked += 1
            await rec.wait_for("on_turn_complete", 1 + asked)
        errors = [e for (e,) in rec.of("on_error")]
        assert len(errors) == 1  # once per outage, not once per beat
        assert isinstance(errors[0].error, StoreError) and errors[0].recoverable
        stats = a.store_stats
        assert stats is not None and stats.errors >= OUTAGE / StoreOptions().write_interval / 2

        await redis_server.start()  # back, empty
        back_at = loop.time()
        async with asyncio.timeout(5):
            # Polling: Redis signals no write; the record is read at a beat's tenth.
            while not await current(redis_store, a.resumption_handle):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        current_after = loop.time() - back_at
        a.send_content([ContentTurn("user", "still there?")])
        await rec.wait_for("on_turn_complete", 1 + asked + 1)
        await a.disconnect()

    assert current_after <= CURRENT_WITHIN, f"the record was current {current_after:.2f} s after"
    assert rec.count("on_error") == 1  # nothing more once Redis was back
    assert asked >= 3  # the call went on: answers came all through the outage
    (session,) = emu.ledger.sessions.values()  # never moved, never rebuilt
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.connections == 1
    assert summary.speech_lost == ()
    assert set(range(1, seq)) <= set(summary.audio_consumed)
    assert [t.outcome for t in summary.turns] == ["complete"] * (1 + asked + 1)
