"""``python -m examples.livekit_agent --offline`` runs the example agent against the emulator."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


async def test_the_offline_example_answers_moves_and_calls_its_tool() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "examples.livekit_agent",
        "--offline",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(60):
            stdout, _ = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0
    assert stdout.decode().splitlines() == [
        "user: hello",
        "agent: [0.0] [0.1] [0.2] [0.3] [0.4] ",
        "service: goAway, 30 s left",
        "session moved: resumed, input gap 0 ms",
        "user: what is the weather",
        "tool call: weather",
        "agent: [1.0] [1.1] [1.2] [1.3] [1.4] ",
    ]
