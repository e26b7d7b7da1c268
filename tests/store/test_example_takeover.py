"""The takeover example runs: a Pipecat bot's worker killed with SIGKILL mid-question, a LiveKit
agent's worker taking the call over and answering, then the other way round, with real worker
processes, a real Redis server and the emulator; the figures it prints hold."""

from __future__ import annotations

import asyncio

from examples import takeover


async def test_each_framework_takes_over_the_other_s_call_killed_mid_question() -> None:
    async with asyncio.timeout(240):  # four worker processes, each importing its framework
        results = await takeover.main()

    assert [(r.first, r.second) for r in results] == [
        ("pipecat", "livekit"),
        ("livekit", "pipecat"),
    ]
    for result in results:
        assert result.sessions == 1  # the same server session, resumed: not rebuilt
        assert result.connections == 2
        assert result.moved == "takeover resumed"
        # The greeting, then the question the user began in the killed worker and ended in
        # the next, answered.
        assert result.answers == ("complete", "complete")
        assert result.spoken_before_kill >= takeover.KILL_AFTER
        # At most one write interval of the user's speech lost (and the chunks in flight).
        assert result.speech_lost * takeover.CHUNK <= takeover.SPEECH_LOST_BOUND
