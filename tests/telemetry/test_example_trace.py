"""The README's trace comes from ``examples.telemetry_trace``: one call, two moves, every
answer and connection, printed as a tree."""

from __future__ import annotations

import re

from examples import telemetry_trace


async def test_the_example_prints_one_call_with_two_moves_as_a_tree() -> None:
    lines = await telemetry_trace.main()
    assert lines[0].startswith("(every session span: gen_ai.provider.name=gcp.gemini ")
    assert re.fullmatch(r"call \d+ ms", lines[1])
    spans = [line for line in lines[2:] if not line.lstrip().startswith("·")]
    top = [line.split()[0] for line in spans if re.match(r"  \S", line)]
    assert top == [
        "realtime.connection",
        "realtime.generation",
        "realtime.move",
        "realtime.generation",
        "realtime.move",
        "realtime.generation",
    ]
    moves = [line for line in spans if line.startswith("  realtime.move ")]
    assert "reason=planned outcome=resumed" in moves[0]
    assert "go_away.notice_ms=5000" in moves[0]
    assert "reason=lost outcome=resumed mode=break-before-make" in moves[1]
    # The connections each move dialled are its children.
    nested = [line.split()[0] for line in spans if line.startswith("    ")]
    assert nested and set(nested) == {"realtime.connection"}
    assert any("realtime.move.attempt_failed" in line for line in lines)  # refused while open
