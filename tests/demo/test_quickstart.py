"""The quickstart's session answers, moves between turns, and answers again."""

from __future__ import annotations

from examples import quickstart


async def test_quickstart_moves_between_turns_and_keeps_answering() -> None:
    lines = await quickstart.main()
    assert lines == [
        "user: hello",
        "answer gen_1",
        "answer gen_1 ended: generation_complete",
        "service: goAway, 5 s left",
        "move 1: resumed, input gap 0 ms",
        "user: are you still there",
        "answer gen_2",
        "answer gen_2 ended: generation_complete",
    ]
