"""The smallest useful program: a Gemini Live session that moves to a new connection.

It starts the bundled emulator, asks a question, has the emulator announce the end of the
connection (goAway), asks again, and prints what the transport reported: each answer's
generation start and end, and the move with its outcome.

    python -m examples.quickstart
"""

from __future__ import annotations

import asyncio

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import MoveReport
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.transport import ContentTurn, GenerationEndReason


async def main() -> list[str]:
    """Runs the session; returns the lines it printed."""
    lines: list[str] = []

    def show(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    async with Emulator(EmulatorConfig(answer_chunks=5, chunk_interval=0.02)) as emulator:
        # A client you pass in stays yours: close it when the call ends (google-genai 3.x no
        # longer closes a client when it is collected).
        client = emulator.client()
        transport = GeminiLiveTransport(client=client)
        answered = asyncio.Event()
        moved = asyncio.Event()

        def generation_end(generation_id: str, reason: GenerationEndReason) -> None:
            show(f"answer {generation_id} ended: {reason.value}")
            answered.set()

        def move(report: MoveReport) -> None:
            show(f"move {report.number}: {report.outcome.value}, input gap {report.gap_ms:.0f} ms")
            moved.set()

        transport.on_generation_start = lambda generation_id: show(f"answer {generation_id}")
        transport.on_generation_end = generation_end
        transport.on_move = move

        async def ask(question: str) -> None:
            answered.clear()
            show(f"user: {question}")
            transport.send_live_text([ContentTurn("user", question)])
            async with asyncio.timeout(10):
                await answered.wait()

        await transport.connect()
        await ask("hello")
        # The service says this about ten minutes into a connection; between turns, the
        # transport moves the session at once, without a gap.
        show("service: goAway, 5 s left")
        await emulator.faults.go_away(time_left=5.0)
        async with asyncio.timeout(10):
            await moved.wait()
        await ask("are you still there")
        await transport.disconnect()
        await client.aio.aclose()
    return lines


if __name__ == "__main__":
    asyncio.run(main())
