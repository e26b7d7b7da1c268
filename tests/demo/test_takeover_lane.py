"""`make demo ARGS=--takeover` end to end: ``python -m examples.demo --takeover`` as the Makefile
runs it, with three real worker processes (Pipecat pipelines and a LiveKit ``AgentSession``)
two of which are killed with SIGKILL, a real ``redis-server`` and the emulator. The figures are
read back from the report it writes (the emulator's ledger) and checked here, not only its
exit status. The workers' frameworks run on their own timers: the call runs in real time
(about 30 s), each step bounded by the lane and the whole run by ``RUN_TIMEOUT``."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from examples import demo, takeover
from examples.demo.takeover_lane import NEXT, QUESTION, REST, Kill, TakeoverRun

ROOT = Path(__file__).parents[2]
RUN_TIMEOUT = 300.0
"""Three worker processes, each importing its framework, on a shared machine."""


async def run_demo(*args: str, timeout: float = RUN_TIMEOUT) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "examples.demo", *args,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, output.decode()


@pytest.fixture(scope="module")
def lane(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("demo-out")
    status, output = asyncio.run(run_demo("--takeover", "--out", str(out)))
    report: dict[str, Any] = json.loads((out / "report-takeover.json").read_text())
    return {"status": status, "output": output, "report": report}


def test_the_call_goes_on_after_each_worker_is_killed(lane: dict[str, Any]) -> None:
    report = lane["report"]
    assert lane["status"] == 0, lane["output"]
    assert report["failures"] == []
    # Each next worker resumed the same server session: the context kept, not rebuilt.
    assert report["takeovers"] == ["takeover resumed", "takeover resumed"]
    assert report["sessions"] == 1
    assert report["connections"] == 3
    assert "the call survived both workers" in lane["output"]


def test_speech_lost_at_each_kill_is_within_the_bound(lane: dict[str, Any]) -> None:
    report = lane["report"]
    bound = takeover.SPEECH_LOST_BOUND * 1000
    assert report["bound_ms"] == pytest.approx(bound)
    tool_kill, question_kill = (Kill(**kill) for kill in report["kills"])
    assert tool_kill.moment == "tool call in flight"
    assert question_kill.moment == "mid-question"
    # The killed worker was mid-question: it had sent KILL_AFTER chunks of speech at least.
    assert question_kill.said_ms >= takeover.KILL_AFTER * takeover.CHUNK * 1000
    for kill in (tool_kill, question_kill):
        assert kill.lost_ms <= bound, kill
    # The question was whole before the tool ran: nothing of it may be missing.
    assert tool_kill.lost_ms == 0


def test_the_tool_call_in_flight_is_answered_once(lane: dict[str, Any]) -> None:
    report = lane["report"]
    assert report["tool_runs_killed"] == 1  # the first worker died while its tool ran
    assert report["tool_responses"] == 1
    assert report["tool_responses_stray"] == 0


def test_the_next_question_is_answered_with_the_old_context(lane: dict[str, Any]) -> None:
    report = lane["report"]
    assert report["next_answered"]
    # What the user said to the first worker, which is dead, is in the session that answered
    # the question the third worker finished.
    assert " ".join(QUESTION) in report["context"]
    assert " ".join(NEXT + REST) not in report["context"]  # the answered turn itself


def _survived(provider: str = "gemini") -> TakeoverRun:
    """A run whose call survived whole, as each service's lane reports one."""
    gemini = TakeoverRun(
        provider="gemini",
        kills=(Kill("a", "tool call in flight", 800, 0), Kill("b", "mid-question", 500, 120)),
        takeovers=("takeover resumed", "takeover resumed"),
        sessions=1,
        connections=3,
        answers=("complete", "cut", "complete", "complete"),
        tool_calls_issued=2,
        tool_runs_killed=1,
        tool_responses=1,
        tool_responses_stray=0,
        next_answered=True,
        context=("Greet the user.", " ".join(QUESTION)),
        recalled=None,
        resent=None,
        heard_twice_ms=None,
        bound_ms=300,
    )
    if provider == "gemini":
        return gemini
    said = ("Greet the user.", " ".join(QUESTION), " ".join(NEXT + REST))
    return replace(
        gemini,
        provider="openai",
        kills=(Kill("a", "mid-question", 1300, 60), Kill("b", "mid-question", 1300, 80)),
        takeovers=("takeover rebuilt", "takeover rebuilt"),
        sessions=3,
        answers=("complete",) * 5,
        tool_calls_issued=1,
        tool_runs_killed=0,
        context=said,
        recalled=" ".join(said),
        resent=0,
        heard_twice_ms=0,
    )


@pytest.mark.parametrize(
    ("provider", "broken", "says"),
    [
        ("gemini", {"sessions": 2, "takeovers": ("takeover resumed",) * 2}, "rebuilt"),
        ("gemini", {"takeovers": ("takeover resumed", "takeover rebuilt")}, "takeovers"),
        ("gemini", {"kills": (Kill("b", "mid-question", 500, 320),)}, "320 ms of speech lost"),
        ("gemini", {"tool_responses": 2}, "answered 2 times"),
        ("gemini", {"next_answered": False}, "not answered"),
        ("gemini", {"context": ("Greet the user.",)}, "context lacks"),
        ("openai", {"takeovers": ("takeover resumed", "takeover rebuilt")}, "takeovers"),
        ("openai", {"kills": (Kill("b", "mid-question", 1300, 320),)}, "320 ms of speech"),
        ("openai", {"tool_responses": 2}, "answered 2 times"),
        ("openai", {"tool_responses_stray": 1}, "1 stray"),
        ("openai", {"heard_twice_ms": 40}, "40 ms of speech heard twice"),
        ("openai", {"next_answered": False}, "not answered"),
        ("openai", {"recalled": "Greet the user."}, "did not recall"),
    ],
)
def test_the_lane_fails_when_the_call_does_not_survive_whole(
    provider: str, broken: dict[str, Any], says: str, tmp_path: Path
) -> None:
    from rich.console import Console

    from examples.demo.takeover_lane import REPORTS, report_takeover

    assert _survived(provider).failures() == []
    run = replace(_survived(provider), **broken)
    assert any(says in failure for failure in run.failures()), run.failures()
    assert report_takeover(run, tmp_path, Console(file=io.StringIO())) == 1
    written = json.loads((tmp_path / REPORTS[provider]).read_text())
    assert written["failures"] == run.failures()


def test_takeover_is_not_a_live_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "not-a-real-key")
    with pytest.raises(SystemExit):
        demo.parse_args(["--live", "--takeover"])


async def test_plain_demo_needs_no_redis() -> None:
    check = (
        "import sys; from examples import demo; demo.main(['--list']);"
        " print('redis loaded' if 'redis' in sys.modules else 'no redis')"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", check, cwd=ROOT, stdout=asyncio.subprocess.PIPE
    )
    output, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0
    assert output.decode().splitlines()[-1] == "no redis"
