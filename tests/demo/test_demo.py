"""`make demo`'s real code on a shorter call: ours loses nothing, the stock stacks fail as
framework-facts.md says they do, measured from the emulator's ledger and what the caller heard.

Every stack is the real one: stock Pipecat's ``GeminiLiveLLMService`` in a Pipecat pipeline,
stock LiveKit's Google ``RealtimeModel`` in an ``AgentSession``, over the real google-genai SDK
and TLS WebSockets to the bundled emulator. The call runs in real time (the frameworks' own
timers are not scaled), shortened: no questions at rest, a 6 s goAway notice, a 2 s slow setup.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from examples import demo
from examples.demo.call import Plan
from examples.demo.run import emulator_config
from realtime_resumption.testing.emulator import EmulatorConfig

SHORT = Plan(notice=6.0, slow_setup=2.0, answer_chunks=30, answer_timeout=5.0, at_rest=False)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("demo-out")
    status = demo.main(["--out", str(out)], plan=SHORT)
    data: dict[str, Any] = json.loads((out / "report.json").read_text())
    data["status"] = status
    data["picture"] = (out / "timeline.png").stat().st_size
    return data


def _stack(report: dict[str, Any], key: str) -> dict[str, Any]:
    stack: dict[str, Any] = report["stacks"][key]
    return stack


def test_ours_loses_nothing(report: dict[str, Any]) -> None:
    ours = [s for s in report["stacks"].values() if s["ours"]]
    assert ours
    for stack in ours:
        assert stack["answers_cut"] == 0, stack
        assert stack["user_speech_lost"] == 0, stack
        # Silence in the replay's uncertain window is not replayed: a little may be missing.
        assert stack["user_audio_lost"] <= 0.5 * len(stack["moves"]), stack
        assert stack["tool_calls_stranded"] == 0, stack
        assert stack["survived"], stack
        assert stack["answered"] == stack["questions"], stack
        assert [m["cause"] for m in stack["moves"]] == ["goAway", "drop"], stack
        assert all(m["resumed"] for m in stack["moves"]), stack
        assert stack["errors"] == [], stack
        assert not stack["lost_anything"]
    assert report["status"] == 0
    assert report["picture"] > 10_000


def test_stock_pipecat_dies_silently_after_a_refused_reconnect(report: dict[str, Any]) -> None:
    stack = _stack(report, "pipecat-stock")
    assert not stack["survived"]
    drop = stack["moves"][-1]
    assert drop["cause"] == "drop" and drop["recovered_at"] is None
    # The refused reconnect is only logged: nothing tells the application the session is
    # gone. What may surface is a send that met a closing socket (the goAway's deadline
    # close, or the drop itself), as the failed write it was.
    assert all(text.startswith("Send error") for _, text in stack["errors"]), stack["errors"]
    # It ignores the goAway and reconnects when the server closes: what the user says while
    # the replacement sets up is dropped, the question asked then included.
    go_away = stack["moves"][0]
    assert go_away["cause"] == "goAway" and go_away["recovered_at"] is not None
    assert go_away["audio_lost"] >= 0.8 * SHORT.slow_setup
    assert stack["move_question_delay"] is None
    # It re-sends the earlier tool result after the reconnect.
    assert stack["tool_results_resent"] >= 1


def test_stock_livekit_cuts_the_answer_and_a_failed_reconnect_is_fatal(
    report: dict[str, Any],
) -> None:
    stack = _stack(report, "livekit-stock")
    # goAway: it closes at once, mid-answer, and holds the user's audio until the replacement
    # is set up.
    assert stack["answers_cut"] >= 1
    go_away = stack["moves"][0]
    assert go_away["cause"] == "goAway" and go_away["recovered_at"] is not None
    assert go_away["input_stall"] >= 0.8 * SHORT.slow_setup
    assert not stack["survived"]
    assert any("fatal" in text for _, text in stack["errors"])
    drop = stack["moves"][-1]
    assert drop["cause"] == "drop" and drop["recovered_at"] is None


def test_live_needs_a_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(SystemExit) as exited:
        demo.main(["--live", "--minutes", "12"])
    assert exited.value.code == 2
    assert "GOOGLE_API_KEY" in capsys.readouterr().err


def test_live_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "not-a-real-key")
    args = demo.parse_args(["--live", "--minutes", "12"])
    assert args.live and args.minutes == 12.0
    with pytest.raises(SystemExit):
        demo.parse_args(["--live", "--minutes", "0"])


def test_the_model_lane_runs_on_the_model_s_service() -> None:
    """``--model 3.8``: every lane's emulator is the gemini-3.8-live profile (connections end
    without a goAway, the resume after refused), so the script ends the connection with its
    deadline close where the goAway would have come; the default call keeps the 2.5 service."""
    args = demo.parse_args(["--model", "3.8"])
    assert args.model == "3.8"
    assert emulator_config(SHORT, args.model) == EmulatorConfig.model(
        "gemini-3.8-live", profile="gemini", answer_chunks=SHORT.answer_chunks
    )
    default = emulator_config(SHORT, demo.parse_args([]).model)
    assert default == EmulatorConfig(profile="gemini", answer_chunks=SHORT.answer_chunks)
    assert not default.rotate_without_go_away
    for other in (["--takeover"], ["--readme"]):
        with pytest.raises(SystemExit):
            demo.parse_args(["--model", "3.8", *other])
    with pytest.raises(SystemExit):
        demo.parse_args(["--model", "gemini-9-live"])
