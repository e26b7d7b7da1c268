"""Vertex AI with transparent resumption: a goAway mid-answer moves the session when the answer
is over, and the next question is answered on the new connection."""

from __future__ import annotations

from google.oauth2.credentials import Credentials
from livekit.agents import Agent, AgentSession
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, answer_text_ids

from .lk_helpers import Recorder, until

CHUNKS = 10


async def test_vertex_transparent_session_moves_after_the_answer() -> None:
    config = EmulatorConfig(profile="vertex", time_scale=0.1, answer_chunks=CHUNKS)
    async with Emulator(config) as emu:
        model = rr.RealtimeModel(
            vertexai=True,
            project="emulator-project",
            location="us-central1",
            credentials=Credentials(token="emulator-token"),  # type: ignore[no-untyped-call]
            http_options=emu.http_options(),
            transparent=True,
        )
        assert model.provider == "Vertex AI"
        session = AgentSession(llm=model, aec_warmup_duration=None)
        agent = Agent(instructions="Be brief.")
        recorder = Recorder()
        await session.start(agent)
        recorder.attach_realtime(agent.realtime_llm_session)
        try:
            emu.faults.go_away_at(turn=0, chunk=2, time_left=30.0)
            first = await session.run(user_input="hello")
            await until(lambda: len(recorder.moves) == 1)
            second = await session.run(user_input="hello again")
        finally:
            await session.aclose()
    texts = [
        result.expect.next_event().is_message(role="assistant").event().item.text_content or ""
        for result in (first, second)
    ]
    assert [answer_text_ids(t) for t in texts] == [
        [(turn, k) for k in range(CHUNKS)] for turn in range(2)
    ]
    assert recorder.moves[0].report.outcome is MoveOutcome.RESUMED
    assert recorder.reconnected == 1
    (record,) = emu.ledger.sessions.values()
    assert all(c.setup is not None and c.setup.transparent for c in record.connections)
    (summary,) = emu.ledger.summary().sessions.values()
    assert summary.answers_cut == ()
