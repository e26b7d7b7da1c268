"""The quickstart's session answers, moves between turns, and answers again."""

from __future__ import annotations

import re

from examples import quickstart


async def test_quickstart_moves_between_turns_and_keeps_answering() -> None:
    lines = await quickstart.main()
    # The emulator is the service as measured: it refuses a resume while the old connection is
    # open, so the move closes it first and holds input for the 0.3 s setup (and a little).
    moved = re.fullmatch(r"move 1: resumed, input gap (\d+) ms", lines[4])
    assert moved is not None, lines[4]
    assert 0 < int(moved[1]) <= 300 + 150
    assert lines[:4] + lines[5:] == [
        "user: hello",
        "answer gen_1",
        "answer gen_1 ended: generation_complete",
        "service: goAway, 5 s left",
        "user: are you still there",
        "answer gen_2",
        "answer gen_2 ended: generation_complete",
    ]
