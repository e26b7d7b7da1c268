"""``make demo ARGS=--openai``'s real code on a shorter call: ours loses nothing across the
caps and the drop, and what the stock stacks lose is what the emulator's conversation ledger
holds (speech per item, answers cut), as openai-realtime-facts.md says stock does at the cap.

Every stack is the real one: stock Pipecat's ``OpenAIRealtimeLLMService`` in a Pipecat
pipeline, stock LiveKit's ``openai.realtime.RealtimeModel`` (its 20-minute restart, and with
the restart off) in an ``AgentSession``, ours on each, over real TLS WebSockets to a bundled
OpenAI emulator each, its clock scaled so the 60-minute cap comes every 10 s; the caller
streams 24 kHz audio in real time. Shortened: shorter questions and answers, caps every 10 s.
"""

from __future__ import annotations

import asyncio

import pytest

from examples import demo
from examples.demo.compare import Comparison, compare_openai
from examples.demo.openai_call import ACROSS_CAP, OpenAIPlan
from examples.demo.openai_lanes import openai_lanes
from examples.demo.run import LaneRun
from realtime_resumption.testing.openai_emulator import CAP_CLOSE_CODE

SHORT = OpenAIPlan(cap=10.0, answer_chunks=5, speech=0.5, pause=0.4, answer_timeout=4.0)
CHUNK = 0.02


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    out = tmp_path_factory.mktemp("demo-out")
    return asyncio.run(compare_openai(openai_lanes(SHORT), SHORT, out))


def _run(comparison: Comparison, key: str) -> LaneRun:
    return next(run for run in comparison.runs if run.lane.key == key)


def _speech_lost_by_ledger(run: LaneRun) -> list[int]:
    """The caller's speech chunks that no session's items hold, as the ledger counts them."""
    sent = [a.seq for a in run.microphone.audio if a.speech]
    return run.ledger.summary().speech_lost(sent)


def test_ours_loses_nothing_across_the_caps_and_the_drop(comparison: Comparison) -> None:
    ours = [f for f in comparison.results if f.ours]
    assert [f.key for f in ours] == ["pipecat-ours", "livekit-ours"]
    for f in ours:
        run = _run(comparison, f.key)
        summary = run.ledger.summary()
        assert f.answers_cut == 0 and summary.answers_cut == 0, f
        assert f.user_speech_lost == 0 and _speech_lost_by_ledger(run) == [], f
        assert f.user_audio_heard_twice == 0 and summary.speech_heard_twice == (), f
        assert f.tool_calls_stranded == 0, f
        assert f.answered == f.questions, f
        assert f.recalled is True, f
        assert f.alive_after_caps == (True, True), f
        assert f.survived and f.errors == (), f
        assert not f.lost_anything
        # It moved before every cap (no session met one) and carried on past the drop.
        assert all(s.closed_by != "cap" for s in run.ledger.sessions), f
        causes = [m.cause for m in f.moves]
        assert causes.count("planned") >= SHORT.caps and causes[-1] == "drop", causes
        assert all(m.recovered_at is not None for m in f.moves), f
    assert comparison.status == 0
    assert comparison.picture.stat().st_size > 10_000


def test_stock_pipecat_ends_at_the_first_cap(comparison: Comparison) -> None:
    f = next(f for f in comparison.results if f.key == "pipecat-stock")
    run = _run(comparison, "pipecat-stock")
    (session,) = run.ledger.sessions
    assert session.closed_by == "cap" and session.close_code == CAP_CLOSE_CODE
    assert session.closed_at is not None
    # Everything the caller says after the cap reaches no session.
    after = {
        a.seq for a in run.microphone.audio if a.speech and a.at - run.origin > session.closed_at
    }
    lost = set(_speech_lost_by_ledger(run))
    assert after and after <= lost
    assert f.user_speech_lost == pytest.approx(len(lost) * CHUNK)
    assert not f.survived and f.alive_after_caps == (False, False) and f.recalled is False
    [move] = f.moves
    assert move.cause == "cap" and move.recovered_at is None
    # A non-fatal ErrorFrame for every audio frame sent to the closed socket.
    assert len(f.errors) > 100
    assert all("1001" in text for _, text in f.errors)
    assert f.ledger["speech_chunks_lost"] == len(lost)


def test_stock_livekit_at_the_cap_loses_the_question_spoken_across_it(
    comparison: Comparison,
) -> None:
    f = next(f for f in comparison.results if f.key == "livekit-stock-cap")
    run = _run(comparison, "livekit-stock-cap")
    closes = [s.closed_by for s in run.ledger.sessions]
    assert closes[: SHORT.caps + 1] == ["cap"] * SHORT.caps + ["drop"], closes
    # It reconnects and replays its mirror as text: the call goes on, the early word is
    # recalled; but what the capped session had not committed is gone.
    lost = _speech_lost_by_ledger(run)
    across = next(a for a in run.record.asked if a.question == ACROSS_CAP)
    assert lost and set(lost) <= set(across.utterance.seqs)
    assert f.user_speech_lost == pytest.approx(len(lost) * CHUNK)
    assert f.ledger["speech_chunks_lost"] == len(lost)
    assert f.move_question_delay is None
    assert f.recalled is True
    assert f.alive_after_caps == (True, True)
    assert f.answers_cut >= run.ledger.summary().answers_cut
    assert [m.cause for m in f.moves][: SHORT.caps + 1] == ["cap"] * SHORT.caps + ["drop"]
    # A recoverable error event per close it did not start.
    assert len(f.errors) == SHORT.caps + 1
    assert all("recoverable" in text for _, text in f.errors)


def test_stock_livekit_restarts_every_scaled_twenty_minutes_and_loses_speech_there(
    comparison: Comparison,
) -> None:
    f = next(f for f in comparison.results if f.key == "livekit-stock")
    run = _run(comparison, "livekit-stock")
    sessions = run.ledger.sessions
    # Its own restart, a third of the cap, comes before the cap: no session meets the cap.
    assert all(s.closed_by != "cap" for s in sessions)
    restarts = [m for m in f.moves if m.cause == "restart"]
    assert len(restarts) >= 2 * SHORT.caps
    # What the caller was saying when it restarted is lost: each lost chunk belongs to a
    # question spoken across a session's end.
    lost = set(_speech_lost_by_ledger(run))
    assert f.user_speech_lost == pytest.approx(len(lost) * CHUNK)
    ends = [s.closed_at for s in sessions if s.closed_at is not None]
    for asked in run.record.asked:
        seqs = set(asked.utterance.seqs)
        if seqs & lost:
            utterance = asked.utterance
            assert utterance.started_at is not None and utterance.finished_at is not None
            started = utterance.started_at - run.origin
            # The framework sends its input in 100 ms pieces and the commit follows the last:
            # a restart just after the speech ended still takes its tail.
            finished = utterance.finished_at - run.origin + 0.5
            assert any(started <= end <= finished for end in ends), asked.question


def test_openai_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.parse_args(["--openai"]).openai
    assert demo.parse_args(["--openai", "--takeover"]).takeover  # the takeover on OpenAI
    for other in (["--readme"], ["--model", "3.8"]):
        with pytest.raises(SystemExit):
            demo.parse_args(["--openai", *other])
    assert demo.main(["--openai", "--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert "livekit-stock-cap" in listed and "pipecat-ours" in listed


def test_an_openai_lane_refuses_the_gemini_call() -> None:
    """An OpenAI lane given no OpenAI endpoint says so instead of dialling api.openai.com."""
    from examples.demo.call import CallRecord, Ear
    from examples.demo.stacks import StackContext

    lane = openai_lanes(SHORT)[0]
    context = StackContext(None, Ear(lambda: 0.0), CallRecord(), lambda: 0.0, lambda k, t: None)
    with pytest.raises(ValueError, match="--openai"):
        lane.factory(context)
