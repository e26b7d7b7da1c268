"""A caller who talks over the agent: the playout stops (``clear_buffer``), the answer is kept
as interrupted, and the next question is answered."""

from __future__ import annotations

import pytest
from livekit.agents import Agent, AgentSession
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.emulator import Emulator, EmulatorConfig, answer_text_ids

from .lk_helpers import Microphone, Recorder, Speaker, until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SCALE = 0.25
CHUNKS = 30


async def test_talking_over_the_agent_stops_its_playout() -> None:
    """``aec_warmup_duration=None``: LiveKit's echo-cancellation warmup would turn the
    caller's first words over the agent into silence, by design."""
    async with Emulator(EmulatorConfig(time_scale=SCALE, answer_chunks=CHUNKS)) as emu:
        mic = Microphone(pace=SCALE)
        speaker = Speaker()
        session = AgentSession(
            llm=rr.RealtimeModel(api_key="test-key", http_options=emu.http_options()),
            aec_warmup_duration=None,
        )
        session.input.audio = mic
        session.output.audio = speaker
        recorder = Recorder()
        agent = Agent(instructions="You are helpful.")
        await session.start(agent)
        recorder.attach_realtime(agent.realtime_llm_session)
        try:
            mic.say(["tell", "a", "story"])
            await until(lambda: sum(1 for t, _ in speaker.heard if t == 0) >= 5)
            mic.say(["stop", "please"])
            await until(lambda: speaker.cleared >= 1)
            await until(
                lambda: (
                    sum(1 for i in session.history.items if i.type == "message") >= 4
                    and session.agent_state == "listening"
                    and not speaker.playing
                )
            )
        finally:
            mic.close()
            await session.aclose()
            await speaker.aclose()

    heard_first = [k for t, k in speaker.heard if t == 0]
    assert 5 <= len(heard_first) < CHUNKS
    messages = [i for i in session.history.items if i.type == "message"]
    assert [(m.role, m.interrupted) for m in messages] == [
        ("user", False),
        ("assistant", True),
        ("user", False),
        ("assistant", False),
    ]
    assert [m.text_content for m in messages if m.role == "user"] == ["tell a story", "stop please"]
    assert answer_text_ids(messages[3].text_content or "") == [(1, k) for k in range(CHUNKS)]
    assert recorder.fatal_errors == []
