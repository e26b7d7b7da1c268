"""Nothing heard twice, nothing lost: without ``transparent`` the outbox places a handle's
snapshot in the input by the measured network round trip (never the setup time), so a
resumed session gets exactly the audio that was still on its way when the snapshot was
taken. The network is a delaying proxy (pings are delayed like data, as on a real link)."""

from __future__ import annotations

import pytest

from .replay_measure import measure

MOVES = 3


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_planned_moves_replay_what_the_snapshot_lacks_and_no_more(profile: str) -> None:
    figures = await measure(profile, round_trip=0.01, moves=MOVES)
    # At most the one frame per move that lands within the round trip's jitter of the
    # boundary is misplaced; a margin that follows the setup time (0.3 s on the service)
    # replays a setup's worth of audio at every move.
    assert figures.heard_twice + figures.lost <= MOVES, figures
