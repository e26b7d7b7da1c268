"""A voice or temperature the service itself refuses is rolled back by the transport to the
setup that last worked, and the plugin's own view follows it back: the session's options (so
asking for the refused voice again is tried again, not taken as already set) and the model's
(so a new session of the model, an agent handoff's, sets up with the voice that works). Real
AgentSessions on the emulator, which refuses unknown voices as the service does."""

from __future__ import annotations

import asyncio

from livekit.agents import Agent
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.transport import SetupRefusedError

from .lk_helpers import WAIT, text_call, until


def _model(emu: Emulator) -> rr.RealtimeModel:
    return rr.RealtimeModel(api_key="emulator-key", http_options=emu.http_options())


async def test_after_a_refused_voice_a_new_session_of_the_model_sets_up_with_the_working_one() -> (
    None
):
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        model = _model(emu)
        async with text_call(model) as (session, recorder):
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")
            model.update_options(voice="Klingon", temperature=0.2)
            await until(lambda: len(recorder.errors) == 1)
            before = set(emu.ledger.sessions)
            # A new session of the same model, as an agent handoff makes.
            second = model.session()
            try:
                await asyncio.wait_for(second.generate_reply(), WAIT)
            finally:
                await second.aclose()
            new = [r for sid, r in emu.ledger.sessions.items() if sid not in before]

    (error,) = recorder.errors
    assert isinstance(error.error, SetupRefusedError)
    voices = [c.setup.voice for r in new for c in r.connections if c.setup is not None]
    assert voices == ["Puck"], "the new session asked for the refused voice"
    (record,) = new
    assert record.connections[0].setup is not None
    assert record.connections[0].setup.generation.get("temperature") is None


async def test_after_a_refused_voice_asking_for_it_again_is_tried_again() -> None:
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        agent = Agent(instructions="Be brief.")
        async with text_call(_model(emu), agent) as (session, recorder):
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")
            rt = agent.realtime_llm_session
            rt.update_options(voice="Klingon")
            await until(lambda: len(recorder.errors) == 1)
            # The session runs with Puck: Klingon is a change again, and refused again.
            rt.update_options(voice="Klingon")
            await until(lambda: len(recorder.errors) == 2)

    assert all(isinstance(e.error, SetupRefusedError) and e.recoverable for e in recorder.errors)
    # Tried again on the service, not refused on the spot: a setup asking for Klingon came
    # after the session was back on Puck.
    asked = [c.setup.voice for r in emu.ledger.sessions.values() for c in r.connections if c.setup]
    back = asked.index("Puck", asked.index("Klingon"))
    assert "Klingon" in asked[back:], asked
