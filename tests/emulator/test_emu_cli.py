"""The command line: documents every fault, prints where to connect, stops on Ctrl-C."""

from __future__ import annotations

import asyncio
import ssl

import pytest
from google import genai
from google.genai import types

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.testing.emulator.__main__ import (
    _config,
    _parse,
    _parser,
    _script_faults,
    main,
)

from .emu_helpers import (
    MODEL,
    command_line,
    exists,
    handle_after_turn,
    interrupt,
    live_config,
    read_until,
)


def test_help_documents_every_fault(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    assert caught.value.code == 0
    text = capsys.readouterr().out
    for flag in (
        "--rotate-every",
        "--notice",
        "--silence-after-go-away",
        "--go-away-at-turn",
        "--go-away-at-chunk",
        "--go-away-on-tool-call",
        "--go-away-when-idle",
        "--drop-every",
        "--refuse-next",
        "--refuse-how",
        "--hang-next",
        "--refuse-resume-while-open",
        "--dead-after-resume",
        "--tool-call-after-turn-complete",
        "--instruction-change",
        "--handle-lifetime",
        "--refuse-close-code",
        "expire_handles",
        "--setup-latency",
        "--round-trip",
        "--update-after-setup",
        "--storm-every",
        "--refuse-all",
        "http429",
        "--slow-setups",
        "--slow-resumed-only",
        "--flap-close-after",
        "--flap-drop-on-first-message",
        "--no-refuse-resume-while-open",
        "--refuse-resume-while-open-when",
        "--pong-latency",
        "--session-cap",
        "--no-session-cap",
        "--handle-validity",
        "--overstay-1008",
        "--any-voice",
        "--model",
        "gemini-3.8-live",
        "--rotate-without-go-away",
        "--refuse-resume-after-deadline",
        "--resume-instruction-limit",
        "--refuse-resume-after-video",
    ):
        assert flag in text


def test_the_service_as_measured_by_default_and_each_kind_setting_by_flag() -> None:
    assert _config(_parser().parse_args([])) == EmulatorConfig()
    kind = _config(
        _parser().parse_args(
            [
                "--no-refuse-resume-while-open",
                "--pong-latency",
                "0",
                "--no-session-cap",
                "--any-voice",
            ]
        )
    )
    assert kind == EmulatorConfig.kind()
    other = _config(
        _parser().parse_args(
            [
                "--refuse-resume-while-open-when",
                "after_setup_complete",
                "--pong-latency",
                "1,2",
                "--session-cap",
                "60",
                "--handle-validity",
                "600",
                "--handle-lifetime",
                "30",
                "--overstay-1008",
            ]
        )
    )
    assert other.refuse_resume_while_open
    assert other.refuse_resume_while_open_when == "after_setup_complete"
    assert (other.pong_latency, other.session_cap) == ((1.0, 2.0), 60.0)
    assert (other.handle_validity, other.handle_lifetime, other.overstay_1008) == (600, 30, True)


def test_a_model_profile_sets_the_defaults_and_flags_still_win() -> None:
    assert _config(_parse([])) == EmulatorConfig()
    for name in ("gemini-3.8-live", "3.8", "2.5", "gemini-3.1-flash-live-preview"):
        assert _config(_parse(["--model", name])) == EmulatorConfig.model(name)
    changed = _parse(
        [
            "--model",
            "3.8",
            "--rotate-every",
            "60",
            "--no-rotate-without-go-away",
            "--time-scale",
            "2",
        ]
    )
    assert _config(changed) == EmulatorConfig.model(
        "3.8", rotate_every=60.0, rotate_without_go_away=False, time_scale=2.0
    )
    flags = _parse(
        [
            "--rotate-every",
            "30",
            "--rotate-without-go-away",
            "--refuse-resume-after-deadline",
            "--resume-instruction-limit",
            "150",
            "--refuse-resume-after-video",
        ]
    )
    cfg = _config(flags)
    assert cfg.refuse_resume_after_video
    assert (cfg.rotate_every, cfg.rotate_without_go_away) == (30.0, True)
    assert (cfg.refuse_resume_after_deadline, cfg.resume_instruction_limit) == (True, 150)


def test_a_model_on_an_api_that_does_not_serve_it_is_reported() -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--model", "3.1", "--profile", "vertex"])
    assert "Gemini API only" in str(caught.value.code)
    with pytest.raises(SystemExit) as caught:
        main(["--model", "gemini-9-live"])
    assert caught.value.code == 2


def test_bad_settings_are_reported() -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--time-scale", "0"])
    assert "time_scale" in str(caught.value.code)
    with pytest.raises(SystemExit) as caught:
        main(["--dead-after-resume", "-1"])
    assert "--dead-after-resume must be >= 0" in str(caught.value.code)
    for bad, message in (
        (["--setup-latency", "soon"], None),
        (["--flap-code", "99"], "--flap-code"),
        (["--slow-setups", "-2"], "--slow-setups"),
    ):
        with pytest.raises(SystemExit) as caught:
            main(bad)
        if message is not None:
            assert message in str(caught.value.code)


async def test_realism_flags_and_hostile_faults_reach_the_emulator() -> None:
    args = _parser().parse_args(
        [
            "--setup-latency",
            "0.1,0.2",
            "--round-trip",
            "0.02",
            "--update-after-setup",
            "--slow-setups",
            "1",
            "--slow-setup-seconds",
            "7",
            "--slow-resumed-only",
            "--flap-close-after",
            "3",
            "--flap-code",
            "1008",
            "--refuse-next",
            "1",
            "--refuse-how",
            "http429",
        ]
    )
    cfg = _config(args)
    assert (cfg.setup_latency, cfg.round_trip, cfg.update_after_setup) == ((0.1, 0.2), 0.02, True)
    emu = Emulator(cfg)
    _script_faults(emu, args)
    faults = emu.faults
    assert faults.take_upgrade_refusal() == 429 and faults.take_upgrade_refusal() is None
    assert faults.take_setup_latency(resumed=False) is None
    assert faults.take_setup_latency(resumed=True) == 7.0
    flap = faults.take_flap()
    assert flap is not None and (flap.close_after, flap.code) == (3.0, 1008)


async def test_new_faults_reach_the_emulator() -> None:
    args = _parser().parse_args(
        [
            "--time-scale",
            "0.01",
            "--dead-after-resume",
            "1",
            "--tool-call-after-turn-complete",
            "--instruction-change",
            "ignore",
        ]
    )
    cfg = _config(args)
    assert cfg.tool_call_after_turn_complete and cfg.instruction_change == "ignore"
    async with Emulator(cfg) as emu:
        _script_faults(emu, args)
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            handle = await handle_after_turn(session)
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)):
            pass
        await emu.wait_disconnected()
    assert [c.dead for c in emu.ledger.sessions[session.session_id].connections] == [False, True]


async def test_serves_until_interrupted() -> None:
    async with command_line(
        "realtime_resumption.testing.emulator",
        "--profile",
        "gemini",
        "--rotate-every",
        "30",
        "--notice",
        "5",
        "--time-scale",
        "0.01",
    ) as process:
        assert process.stdout is not None
        async with asyncio.timeout(20):
            base_url = (await process.stdout.readline()).decode().split()[-1]
            ca_file = (await process.stdout.readline()).decode().split()[-1]
        assert base_url.startswith("https://127.0.0.1:") and exists(ca_file)
        options = types.HttpOptions(
            base_url=base_url, async_client_args={"ssl": ssl.create_default_context(cafile=ca_file)}
        )
        client = genai.Client(api_key="any", http_options=options)
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            messages = await read_until(session, lambda m: m.go_away is not None, timeout=5)
        assert messages[-1].go_away is not None and messages[-1].go_away.time_left == "0.050s"
        assert "1 connection(s)" in await interrupt(process)
        assert not exists(ca_file)
