"""``interrupt()`` cancels the answer in progress (README, LiveKit), as a real AgentSession calls
it: ``AgentSession.interrupt()`` mid-answer.

With automatic activity detection off (the client marks the user's turns, as LiveKit's own turn
detection does), an interruption is an ``activityStart`` on the wire, so the emulator's ledger
shows whether the answer was stopped at the service: it must end ``interrupted`` with most of
its chunks never produced. An ``interrupt()`` that does nothing lets the model talk on to the
end (the AgentSession's own playout stops either way, so the speaker cannot tell).
"""

from __future__ import annotations

from google.genai import types
from livekit.agents import Agent, AgentSession
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from .lk_helpers import Speaker, until

CHUNKS = 400
"""Long enough (1.6 s of production at this scale) that the answer is still running when
interrupted, even on a loaded machine."""
SCALE = 0.1


async def test_interrupting_the_agent_stops_its_answer_at_the_service() -> None:
    async with Emulator(EmulatorConfig(time_scale=SCALE, answer_chunks=CHUNKS)) as emu:
        model = rr.RealtimeModel(
            api_key="test-key",
            http_options=emu.http_options(),
            realtime_input_config=types.RealtimeInputConfig(
                automatic_activity_detection=types.AutomaticActivityDetection(disabled=True)
            ),
        )
        speaker = Speaker()
        session = AgentSession(llm=model, aec_warmup_duration=None)
        session.output.audio = speaker
        await session.start(Agent(instructions="You are helpful."))
        try:
            run = session.run(user_input="tell me a long story")
            await until(lambda: sum(1 for t, _ in speaker.heard if t == 0) >= 3)
            await session.interrupt()
            result = await run
            message = result.expect.next_event().is_message(role="assistant").event().item
            assert message.interrupted
            (session_record,) = emu.ledger.sessions.values()
            await until(lambda: session_record.turns[0].outcome != "running")
            turn = session_record.turns[0]
        finally:
            await session.aclose()
            await speaker.aclose()

    assert turn.outcome == "interrupted"
    assert turn.produced < CHUNKS
    heard = [k for t, k in speaker.heard if t == 0]
    assert 3 <= len(heard) < CHUNKS
