"""A caller who talks over the agent: the playout stops (``clear_buffer``), the answer is kept
as interrupted, and the next question is answered."""

from __future__ import annotations

from livekit.agents import Agent

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, answer_text_ids

from .lk_helpers import until, voice_call

SCALE = 0.25
CHUNKS = 30


async def test_talking_over_the_agent_stops_its_playout() -> None:
    async with (
        Emulator(EmulatorConfig(time_scale=SCALE, answer_chunks=CHUNKS)) as emu,
        voice_call(emu, Agent(instructions="You are helpful."), pace=SCALE) as call,
    ):
        call.mic.say(["tell", "a", "story"])
        await until(lambda: sum(1 for t, _ in call.speaker.heard if t == 0) >= 5)
        call.mic.say(["stop", "please"])
        await until(lambda: call.speaker.cleared >= 1)
        await call.settled(messages=4)
        messages = call.messages()

    heard_first = [k for t, k in call.speaker.heard if t == 0]
    assert 5 <= len(heard_first) < CHUNKS
    assert [(m.role, m.interrupted) for m in messages] == [
        ("user", False),
        ("assistant", True),
        ("user", False),
        ("assistant", False),
    ]
    assert [m.text_content for m in messages if m.role == "user"] == ["tell a story", "stop please"]
    assert answer_text_ids(messages[3].text_content or "") == [(1, k) for k in range(CHUNKS)]
    assert call.recorder.fatal_errors == []
