"""A LiveKit voice agent on Gemini Live that survives the service's connection rotation.

The agent is the usual LiveKit one; only the model's import differs from the Google plugin's.

With a LiveKit server (``LIVEKIT_URL``, ``LIVEKIT_API_KEY``, ``LIVEKIT_API_SECRET`` and
``GOOGLE_API_KEY`` set)::

    python -m examples.livekit_agent dev

Offline, the same agent in an AgentSession with no room, against the bundled emulator: two
questions, a tool call, and the service's goAway between them::

    python -m examples.livekit_agent --offline
"""

from __future__ import annotations

import asyncio
import sys

from livekit.agents import Agent, AgentSession, JobContext, WorkerOptions, cli, function_tool
from livekit.plugins import realtime_resumption

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig


class Assistant(Agent):
    """A short-spoken assistant with one tool."""

    def __init__(self) -> None:
        super().__init__(instructions="You are a friendly voice assistant. Keep answers short.")

    @function_tool
    async def weather(self, city: str = "here") -> str:
        """Tell the weather in a city."""
        return f"sunny in {city}"


async def entrypoint(ctx: JobContext) -> None:
    """The worker's job: the agent in the room it was dispatched to."""
    await ctx.connect()
    session = AgentSession(llm=realtime_resumption.RealtimeModel(voice="Puck"))
    await session.start(agent=Assistant(), room=ctx.room)
    await session.generate_reply(instructions="Greet the user.")


async def offline() -> list[str]:
    """Runs the agent against the emulator; returns the lines it printed."""
    lines: list[str] = []

    def show(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    async with Emulator(EmulatorConfig(answer_chunks=5, chunk_interval=0.02)) as emulator:
        model = realtime_resumption.RealtimeModel(
            api_key="emulator", http_options=emulator.http_options()
        )
        session = AgentSession(llm=model)
        agent = Assistant()
        await session.start(agent)
        moved = asyncio.Event()

        def on_moved(event: realtime_resumption.SessionMovedEvent) -> None:
            report = event.report
            show(f"session moved: {report.outcome.value}, input gap {report.gap_ms:.0f} ms")
            moved.set()

        agent.realtime_llm_session.on("session_moved", on_moved)

        async def ask(question: str) -> None:
            show(f"user: {question}")
            result = await session.run(user_input=question)
            for event in result.events:
                if event.type == "function_call":
                    show(f"tool call: {event.item.name}")
                elif event.type == "message":
                    show(f"agent: {event.item.text_content}")

        try:
            await ask("hello")
            # The service says this about ten minutes into a connection; between turns the
            # session moves at once, with no gap.
            show("service: goAway, 30 s left")
            await emulator.faults.go_away(time_left=30.0)
            async with asyncio.timeout(10):
                await moved.wait()
            await ask("what is the weather")
        finally:
            await session.aclose()
    return lines


if __name__ == "__main__":
    if "--offline" in sys.argv[1:]:
        asyncio.run(offline())
    else:
        cli.run_app(WorkerOptions(entrypoint_fnc=entrypoint))
