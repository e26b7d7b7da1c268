"""``python -m examples.livekit_agent --offline`` runs the example agent against the emulator."""

from __future__ import annotations

import asyncio
import re
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
    lines = stdout.decode().splitlines()
    # The emulator is the service as measured: it refuses a resume while the old connection is
    # open, so the move closes it first and holds input for the 0.3 s setup (and a little).
    moved = re.fullmatch(r"session moved: resumed, input gap (\d+) ms", lines[3])
    assert moved is not None, lines[3]
    assert 0 < int(moved[1]) <= 300 + 150
    assert lines[:3] + lines[4:] == [
        "user: hello",
        "agent: [0.0] [0.1] [0.2] [0.3] [0.4] ",
        "service: goAway, 30 s left",
        "user: what is the weather",
        "tool call: weather",
        "agent: [1.0] [1.1] [1.2] [1.3] [1.4] ",
    ]
