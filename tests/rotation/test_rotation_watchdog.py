"""Resumed but dead: a resumed connection that never answers gets the user's turn once more,
then the session is rebuilt. Over the real SDK against an endpoint that never answers; the
watchdog's own timing on fast-forwarded loop time."""

from __future__ import annotations

import asyncio

import pytest
from rotation_helpers import FAST, GRACE, MODEL, DeadEndpoint, Recorder

from realtime_resumption.emulator import user_audio
from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.watchdog import ResumeWatchdog, UserTurnRetainer, is_speech
from realtime_resumption.moves import HandleKind, MoveOutcome, MoveReason
from realtime_resumption.transport import ContentTurn, ReplayItem

HISTORY = [ReplayItem("user", text="my name is Ada"), ReplayItem("model", text="Hello Ada")]


def _transport(dead: DeadEndpoint, **options: object) -> GeminiLiveTransport:
    return GeminiLiveTransport(
        api_key="k",
        model=MODEL,
        http_options=dead.http_options(),
        tool_call_grace=GRACE,
        resumption=FAST,
        **options,  # type: ignore[arg-type]
    )


async def test_a_dead_resumed_session_gets_the_turn_again_then_is_rebuilt() -> None:
    async with DeadEndpoint() as dead:
        transport = _transport(dead, resume_watchdog=0.2)
        rec = Recorder(transport)
        await transport.connect()
        transport.replay_history(HISTORY)
        await rec.wait_for("on_resumption_update")
        await dead.go_away()
        await rec.wait_for("on_move")
        assert transport.send_live_text([ContentTurn("user", "are you there?")])
        await rec.wait_for("on_move", 2, timeout=5)
        await transport.disconnect()

    planned, rebuilt = rec.moves
    assert (planned.reason, planned.outcome) == (MoveReason.PLANNED, MoveOutcome.RESUMED)
    assert (rebuilt.reason, rebuilt.handle_kind, rebuilt.outcome) == (
        MoveReason.LOST,
        HandleKind.NONE,
        MoveOutcome.REBUILT,
    )
    # The resumed connection got the turn, then the same turn again as a complete turn.
    resumed = dead.received[1]
    assert resumed[0] == {"realtime_input": {"text": "are you there?"}}
    replayed = resumed[1]["client_content"]
    assert replayed["turnComplete"] is True
    assert replayed["turns"][0]["parts"][0]["text"] == "are you there?"
    # The rebuilt session is fresh and starts from the history.
    assert dead.setups[1]["setup"]["sessionResumption"]["handle"].startswith("dead-endpoint")
    assert dead.setups[2]["setup"]["sessionResumption"] == {}
    seeded = dead.received[2][0]["client_content"]
    assert [t["parts"][0]["text"] for t in seeded["turns"]] == ["my name is Ada", "Hello Ada"]
    assert seeded.get("turnComplete") in (None, False)


async def test_a_dead_resumed_session_with_nothing_to_rebuild_from_is_lost() -> None:
    async with DeadEndpoint() as dead:
        transport = _transport(dead, resume_watchdog=0.1)
        rec = Recorder(transport)
        await transport.connect()
        await rec.wait_for("on_resumption_update")
        await dead.go_away()
        await rec.wait_for("on_move")
        for seq in range(1, 4):
            transport.send_audio(user_audio(seq))  # speech: the watchdog's sign
        await rec.wait_for("on_close", timeout=5)
        await transport.disconnect()

    assert [m.outcome for m in rec.moves] == [MoveOutcome.RESUMED, MoveOutcome.LOST]
    assert rec.names("on_error", "on_close") == ["on_error", "on_close"]
    # The retained audio went back once, as one complete turn of inline audio.
    replays = [m for m in dead.received[1] if "client_content" in m]
    assert len(replays) == 1
    part = replays[0]["client_content"]["turns"][0]["parts"][0]
    assert part["inlineData"]["mime_type"] == "audio/pcm;rate=16000"


@pytest.mark.looptime
async def test_the_watchdog_bound_restarts_with_each_sign_and_stops_at_an_answer() -> None:
    expired: list[tuple[float, bool]] = []
    loop = asyncio.get_running_loop()
    dog = ResumeWatchdog(8.0, lambda first: expired.append((loop.time(), first)))
    start = loop.time()
    dog.user_turn()  # not watching yet: nothing runs
    assert not dog.armed
    dog.watch()
    dog.user_turn()
    await asyncio.sleep(5)
    dog.user_turn()  # the user still speaks: the bound starts again
    await asyncio.sleep(7.9)
    assert expired == []
    await asyncio.sleep(0.2)
    assert expired == [(pytest.approx(start + 13.0), True)]
    dog.user_turn()
    await asyncio.sleep(8.0)
    assert [first for _, first in expired] == [True, False]
    dog.watch()
    dog.user_turn()
    dog.answered()
    await asyncio.sleep(60)
    assert len(expired) == 2 and not dog.watching and not dog.armed
    off = ResumeWatchdog(None, lambda first: expired.append((loop.time(), first)))
    off.watch()
    off.user_turn()
    assert not off.watching and not off.armed
    with pytest.raises(ValueError, match="resume_watchdog"):
        ResumeWatchdog(0, lambda first: None)


def test_the_retained_turn_keeps_the_newest_audio_and_prefers_text() -> None:
    retainer = UserTurnRetainer(16_000, max_seconds=0.05)  # two and a half 20 ms chunks
    for seq in range(1, 6):
        retainer.audio(user_audio(seq))
    turn = retainer.audio_turn(3.0)
    assert turn is not None and turn.pcm == user_audio(4) + user_audio(5)
    assert (turn.sample_rate, turn.sealed_at) == (16_000, 3.0)
    assert retainer.text_turn is None
    retainer.text("hello")
    assert retainer.text_turn == "hello"
    retainer.clear()
    assert retainer.audio_turn(4.0) is None and retainer.text_turn is None
    assert is_speech(user_audio(1)) and not is_speech(user_audio(1, speech=False))
    assert not is_speech(b"")
