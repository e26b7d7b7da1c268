"""The demo runs its whole script on the emulator and reports nothing lost."""

from __future__ import annotations

import pytest

from examples import demo


def test_demo_survives_rotations_a_drop_and_a_refused_attempt(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Five times faster than `make demo`; the longer notice keeps the goAway's wait for a
    # resumable point as long, in the demo's seconds, as the resumption margins need in real ones.
    status = demo.main(
        ["--target", "emulator", "--time-scale", "0.2", "--duration", "40", "--notice", "8"]
    )
    out = capsys.readouterr().out
    assert "FAULT: the connection drops" in out
    assert "move: lost" in out
    assert "RESUMED after 2 attempt(s)" in out, "the refused attempt was retried"
    assert out.count("move: planned") >= 2
    assert "tool call get_weather" in out
    assert "answers cut             0" in out
    assert "client audio lost       0 chunk(s)" in out
    assert "tool calls stranded     0" in out
    assert out.rstrip().endswith("nothing lost")
    assert status == 0


def test_demo_refuses_real_gemini_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(SystemExit) as exited:
        demo.main(["--target", "gemini"])
    assert exited.value.code == 2
