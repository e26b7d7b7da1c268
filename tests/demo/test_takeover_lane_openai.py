"""`make demo ARGS="--takeover --openai"` end to end: ``python -m examples.demo --takeover
--openai`` as the Makefile runs it, on the OpenAI Realtime emulator: three real worker
processes (Pipecat pipelines on ``OpenAIRealtimeLLMService``, a LiveKit ``AgentSession`` on the
plugin's OpenAI ``RealtimeModel``), two of them killed with SIGKILL mid-question, one real
``redis-server``. The figures are read back from the report it writes (the emulator's ledger)
and checked here, not only its exit status. The call runs in real time (about 30 s), each step
bounded by the lane and the whole run by ``RUN_TIMEOUT``.

The reading of the ledger is tested apart, on records made here (the lane's verdict is tested
with the Gemini lane's, in ``test_takeover_lane.py``)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest

from examples import demo, takeover
from examples.demo.openai_takeover import OpenAILedger, recalled_words
from examples.demo.takeover_lane import (
    NEXT,
    QUESTION,
    RECALL,
    REST,
    SCRIPTS,
    Kill,
)
from realtime_resumption.testing.openai_emulator import (
    AnswerRecord,
    ItemRecord,
    OpenAIEmulator,
    SessionRecord,
)

from .test_takeover_lane import run_demo

RUN_TIMEOUT = 55.0
"""Three worker processes, each importing its framework: CI's budget for the lane."""


@pytest.fixture(scope="module")
def lane(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("demo-out")
    status, output = asyncio.run(
        run_demo("--takeover", "--openai", "--out", str(out), timeout=RUN_TIMEOUT)
    )
    report: dict[str, Any] = json.loads((out / "report-takeover-openai.json").read_text())
    return {"status": status, "output": output, "report": report}


def test_each_next_worker_takes_the_call_over_in_a_new_session(lane: dict[str, Any]) -> None:
    report = lane["report"]
    assert lane["status"] == 0, lane["output"]
    assert report["provider"] == "openai"
    assert report["failures"] == []
    # OpenAI Realtime keeps nothing of a session: each worker opened its own and was given the
    # call (rebuilt), one connection each.
    assert report["takeovers"] == ["takeover rebuilt", "takeover rebuilt"]
    assert report["sessions"] == report["connections"] == 3
    assert "the call survived both workers" in lane["output"]


def test_a_pipecat_bot_dies_running_the_tool_then_a_livekit_agent_mid_question_within_the_bound(
    lane: dict[str, Any],
) -> None:
    report = lane["report"]
    bound = takeover.SPEECH_LOST_BOUND * 1000
    assert report["bound_ms"] == pytest.approx(bound)
    pipecat, livekit = (Kill(**kill) for kill in report["kills"])
    assert pipecat.worker.startswith("pipecat worker")
    assert livekit.worker.startswith("livekit worker")
    assert (pipecat.moment, livekit.moment) == ("tool call in flight", "mid-question")
    # The agent had sent KILL_AFTER chunks of its question at least.
    assert livekit.said_ms >= takeover.KILL_AFTER * takeover.CHUNK * 1000
    for kill in (pipecat, livekit):
        assert kill.lost_ms <= bound, kill
    # The question was whole before the tool ran: nothing of it may be missing.
    assert pipecat.lost_ms == 0


def test_the_tool_call_is_answered_once(lane: dict[str, Any]) -> None:
    report = lane["report"]
    assert report["tool_calls_issued"] == 1
    assert report["tool_responses"] == 1
    assert report["tool_responses_stray"] == 0


def test_no_speech_is_heard_twice(lane: dict[str, Any]) -> None:
    # What a session committed is given to the next as the conversation, not replayed.
    assert lane["report"]["heard_twice_ms"] == 0


def test_the_last_question_is_answered_recalling_what_the_first_worker_heard(
    lane: dict[str, Any],
) -> None:
    report = lane["report"]
    assert report["next_answered"]
    # The question said to the dead Pipecat bot, and the one begun with it and finished with
    # the dead LiveKit agent, each one turn, heard by the session that answered the last.
    first, finished = " ".join(QUESTION), " ".join(NEXT + REST)
    assert first in report["context"] and finished in report["context"]
    assert first in report["recalled"] and finished in report["recalled"]


def test_the_takeover_flag_picks_the_openai_call() -> None:
    args = demo.parse_args(["--takeover", "--openai"])
    assert args.takeover and args.openai
    with pytest.raises(SystemExit):
        demo.parse_args(["--openai", "--model", "3.8"])
    assert [step.framework for step in SCRIPTS["openai"]] == ["pipecat", "livekit", "pipecat"]


# --- the ledger's reading and the verdict, on records made here ---------------------------


def _session(index: int, items: list[ItemRecord], answers: list[AnswerRecord]) -> SessionRecord:
    session = SessionRecord(f"sess_{index}", index, "/v1/realtime", "ga", 0.0, "gpt-realtime")
    session.items.extend(items)
    session.answers.extend(answers)
    return session


def _answer(item_id: str, calls: tuple[str, ...] = ()) -> AnswerRecord:
    return AnswerRecord(f"resp_{item_id}", 1, item_id or None, 10, calls=calls, outcome="complete")


def _said(item_id: str, text: str, speech: tuple[int, ...]) -> ItemRecord:
    return ItemRecord(item_id, "message", "user", "speech", text, speech)


def _given(item: ItemRecord) -> ItemRecord:
    return replace(item, source="client", speech=())


def _ledger(sessions: list[SessionRecord]) -> OpenAILedger:
    emulator = OpenAIEmulator()
    emulator.ledger.sessions.extend(sessions)
    return OpenAILedger(emulator)


def _call(answer: str = "sunny") -> list[ItemRecord]:
    output = ItemRecord("out", "function_call_output", None, "client", answer, call_id="c1")
    return [
        _said("q1", " ".join(QUESTION), (1, 2)),
        ItemRecord("fc", "function_call", None, "model", TOOL_NAME, call_id="c1"),
        output,
    ]


TOOL_NAME = takeover.TOOL
LAST = (*NEXT, *REST, RECALL)


def test_the_ledger_counts_an_answer_carried_to_the_next_session_once() -> None:
    call = _call()
    heard = "[3.0] heard " + " ".join(QUESTION) + ", result sunny [3.1] "
    first = _session(0, [*call, ItemRecord("a1", "message", "assistant", "model", heard)], [])
    first.answers += [_answer("", ("c1",)), _answer("a1")]
    question = _said("q2", " ".join(LAST), (3, 4))
    recall = "[4.0] heard " + " ".join(LAST) + ", recall " + " ".join(QUESTION) + " [4.1] [4.2] "
    second = _session(
        1,
        [
            *(_given(i) for i in first.items),
            question,
            ItemRecord("a2", "message", "assistant", "model", recall),
        ],
        [_answer("a2")],
    )
    ledger = _ledger([first, second])
    assert ledger.tool_answered()
    assert ledger.answered(QUESTION) and ledger.answered(LAST)
    assert not ledger.answered(NEXT)
    seen = ledger.figures(LAST)
    assert (seen.tool_calls_issued, seen.tool_responses, seen.tool_responses_stray) == (1, 1, 0)
    assert seen.kept == frozenset({1, 2, 3, 4})
    assert seen.context == (" ".join(QUESTION),)
    assert seen.recalled == " ".join(QUESTION)
    assert seen.resent == 0 and seen.heard_twice == 0 and seen.next_answered


def test_the_ledger_counts_a_second_answer_and_a_resent_conversation() -> None:
    # The next session holds the carried answer and a second one: answered twice; a user
    # message given after it heard the caller is the conversation given again.
    first = _session(0, _call(), [_answer("", ("c1",))])
    again = ItemRecord("out2", "function_call_output", None, "client", "rain", call_id="c1")
    stray = ItemRecord("out3", "function_call_output", None, "client", "?", call_id="nope")
    resent = ItemRecord("hist", "message", "user", "client", "a previously saved conversation")
    second = _session(
        1,
        [*(_given(i) for i in first.items), again, stray, _said("q2", "hello", (2, 9)), resent],
        [],
    )
    seen = _ledger([first, second]).figures(LAST)
    assert (seen.tool_responses, seen.tool_responses_stray) == (2, 1)
    assert seen.resent == 1
    # The question's speech, committed in the first session, committed again in the second.
    assert seen.heard_twice == 1
    assert not seen.next_answered and seen.recalled is None and seen.context == ()


def test_recalled_words_are_read_without_the_chunk_ids() -> None:
    text = "[5.0] heard please recall, recall a b [5.1] c, result x [5.2] "
    assert recalled_words(text) == "a b c"
    assert recalled_words("[5.0] heard hello [5.1] ") == ""
