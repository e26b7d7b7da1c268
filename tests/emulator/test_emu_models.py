"""Model profiles: each live model's behaviour as a bundle of settings, and the behaviours the
3.x models brought (a connection's life, its close without notice, the refusal after it)."""

from __future__ import annotations

import dataclasses

import pytest
from google.genai import errors, types

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, wire
from realtime_resumption.testing.emulator.models import MODEL_PROFILES, model_profile

from .emu_helpers import MODEL, handle_after_turn, live_config, read_until_closed

LIFETIME_SCALE = 0.0005
"""A 58-minute connection in 1.74 s."""
COMPRESSION = types.ContextWindowCompressionConfig(sliding_window=types.SlidingWindow())
"""Without it the session would end at its 15-minute cap, long before 58 minutes."""


def _changed(config: EmulatorConfig) -> dict[str, object]:
    """The settings of ``config`` that differ from the bare ``EmulatorConfig()``."""
    base = EmulatorConfig()
    return {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if getattr(config, f.name) != getattr(base, f.name)
    }


def test_the_2_5_profile_is_today_s_service_with_ten_minute_connections() -> None:
    for name in (
        "gemini-2.5-flash-native-audio-preview-12-2025",
        "gemini-live-2.5-flash-native-audio",
        "gemini-live-2.5-flash-preview",
        "2.5",
    ):
        assert _changed(EmulatorConfig.model(name)) == {"rotate_every": 600.0}, name


def test_the_3_8_profile_holds_connections_58_minutes_and_closes_without_notice() -> None:
    config = EmulatorConfig.model("gemini-3.8-live", time_scale=0.5)
    assert _changed(config) == {
        "time_scale": 0.5,
        "rotate_every": 3480.0,
        "rotate_without_go_away": True,
        "refuse_resume_after_deadline": True,
        "non_blocking_tools": True,
        "mid_session_client_content": True,
    }
    # Setup changes in the session: documented on Vertex AI only.
    assert _changed(EmulatorConfig.model("3.8", profile="vertex")) == {
        **_changed(EmulatorConfig.model("3.8")),
        "profile": "vertex",
        "in_session_updates": True,
    }
    assert EmulatorConfig.model("3.8") == EmulatorConfig.model("gemini-3.8-live")
    # The profile's settings are defaults: a change wins over them.
    assert not EmulatorConfig.model("3.8", rotate_without_go_away=False).rotate_without_go_away


def test_the_3_1_profile_is_served_on_the_gemini_api_only() -> None:
    config = EmulatorConfig.model("gemini-3.1-flash-live-preview")
    assert config.resume_instruction_limit == 200 and config.instruction_change == "refuse"
    assert config.refuse_resume_after_video
    with pytest.raises(ValueError, match="Gemini API only"):
        EmulatorConfig.model("gemini-3.1-flash-live-preview", profile="vertex")


def test_every_profile_names_its_sources_and_an_unknown_model_is_refused() -> None:
    for profile in MODEL_PROFILES:
        assert profile.sources, profile.name
        assert model_profile(profile.name) is profile
    with pytest.raises(ValueError, match=r"gemini-3\.8-live"):
        EmulatorConfig.model("gemini-9-live")


def test_bad_lifetime_settings_are_refused() -> None:
    for limit in (0, -5, True, 150.0):
        with pytest.raises(ValueError, match="resume_instruction_limit"):
            EmulatorConfig(resume_instruction_limit=limit)  # type: ignore[arg-type]
    for every in (0.0, -60.0, float("nan")):
        with pytest.raises(ValueError, match="rotate_every"):
            EmulatorConfig(rotate_every=every)


async def _held_connection(
    emu: Emulator, *, vertex: bool = False
) -> tuple[str, str, int, list[types.LiveServerMessage]]:
    """Connect, take the handle after a first answer, then read until the service closes the
    connection: the session id, the handle, the close code and the messages before it."""
    client = emu.client(vertex=vertex)
    setup = live_config(context_window_compression=COMPRESSION)
    async with client.aio.live.connect(model=MODEL, config=setup) as session:
        handle = await handle_after_turn(session)
        code, messages = await read_until_closed(session, timeout=10.0)
    assert session.session_id is not None
    return session.session_id, handle, code, messages


async def _resumed_and_answered(emu: Emulator, handle: str) -> None:
    """Resume the held connection's session with ``handle``; it answers a question."""
    resume = live_config(handle=handle, context_window_compression=COMPRESSION)
    async with emu.client().aio.live.connect(model=MODEL, config=resume) as session:
        await handle_after_turn(session, "still there?")


@pytest.mark.parametrize(("profile", "code"), [("gemini", 1011), ("vertex", 1000)])
async def test_a_3_8_connection_ends_at_58_minutes_without_a_go_away(
    profile: str, code: int
) -> None:
    config = EmulatorConfig.model("gemini-3.8-live", profile=profile, time_scale=LIFETIME_SCALE)
    async with Emulator(config) as emu:
        session_id, _, closed_with, messages = await _held_connection(
            emu, vertex=profile == "vertex"
        )
        await emu.wait_disconnected()
    assert closed_with == code
    assert not [m for m in messages if m.go_away]
    (conn,) = emu.ledger.sessions[session_id].connections
    assert conn.setup_at is not None and conn.closed_at is not None
    assert conn.closed_at - conn.setup_at == pytest.approx(3480 * LIFETIME_SCALE, abs=0.3)
    assert "go_away" not in [m.kind for m in conn.server_messages]
    if profile == "gemini":
        assert conn.close_reason == "Deadline expired before operation could complete."


async def test_the_resume_after_that_close_is_refused_with_1007() -> None:
    config = EmulatorConfig.model("gemini-3.8-live", time_scale=LIFETIME_SCALE)
    async with Emulator(config) as emu:
        session_id, handle, _, _ = await _held_connection(emu)
        resume = live_config(handle=handle, context_window_compression=COMPRESSION)
        with pytest.raises(errors.APIError) as refused:
            async with emu.client().aio.live.connect(model=MODEL, config=resume):
                pass
        await emu.wait_disconnected()
    assert refused.value.code == 1007
    assert [c.refused for c in emu.ledger.sessions[session_id].connections] == [None, "deadline"]


async def test_with_a_go_away_first_the_session_resumes() -> None:
    config = EmulatorConfig.model(
        "gemini-3.8-live", time_scale=LIFETIME_SCALE, rotate_without_go_away=False
    )
    async with Emulator(config) as emu:
        session_id, handle, code, messages = await _held_connection(emu)
        assert code == 1011
        (go_away,) = [m.go_away for m in messages if m.go_away]
        assert go_away.time_left == wire.format_duration(config.scaled(config.notice))
        await _resumed_and_answered(emu, handle)
        await emu.wait_disconnected()
    assert [c.refused for c in emu.ledger.sessions[session_id].connections] == [None, None]


async def test_without_the_refusal_the_resume_after_the_close_works() -> None:
    config = EmulatorConfig.model(
        "gemini-3.8-live", time_scale=LIFETIME_SCALE, refuse_resume_after_deadline=False
    )
    async with Emulator(config) as emu:
        session_id, handle, code, _ = await _held_connection(emu)
        assert code == 1011
        await _resumed_and_answered(emu, handle)
        await emu.wait_disconnected()
    assert [c.refused for c in emu.ledger.sessions[session_id].connections] == [None, None]


LONG_INSTRUCTION = " ".join(["Answer briefly and kindly, in the caller's own language."] * 20)
"""About 280 tokens (four characters a token)."""


@pytest.mark.parametrize(
    ("instruction", "refused"), [("Be brief.", None), (LONG_INSTRUCTION, "instruction-length")]
)
async def test_3_1_refuses_to_resume_a_session_with_a_long_instruction(
    instruction: str, refused: str | None
) -> None:
    config = EmulatorConfig.model("gemini-3.1-flash-live-preview", time_scale=0.01)
    setup = live_config(system_instruction=instruction)
    async with Emulator(config) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=setup) as session:
            handle = await handle_after_turn(session)
        resume = live_config(handle=handle, system_instruction=instruction)
        if refused is None:
            async with emu.client().aio.live.connect(model=MODEL, config=resume) as again:
                await handle_after_turn(again, "still there?")
        else:
            with pytest.raises(errors.APIError) as closed:
                async with emu.client().aio.live.connect(model=MODEL, config=resume):
                    pass
            assert closed.value.code == 1007
        await emu.wait_disconnected()
    assert session.session_id is not None
    connections = emu.ledger.sessions[session.session_id].connections
    assert [c.refused for c in connections] == [None, refused]


async def test_a_deadline_close_can_be_scripted_at_any_moment() -> None:
    config = EmulatorConfig.model("gemini-3.8-live", time_scale=0.01)
    async with Emulator(config) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            handle = await handle_after_turn(session)
            assert await emu.faults.deadline_close() == 1
            code, messages = await read_until_closed(session)
        with pytest.raises(errors.APIError) as refused:
            async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)):
                pass
        await emu.wait_disconnected()
    assert (code, refused.value.code) == (1011, 1007)
    assert not [m for m in messages if m.go_away]
    assert session.session_id is not None
    first, second = emu.ledger.sessions[session.session_id].connections
    assert first.close_reason == "Deadline expired before operation could complete."
    assert second.refused == "deadline"


async def test_3_1_refuses_to_resume_a_session_that_was_sent_video() -> None:
    config = EmulatorConfig.model("gemini-3.1-flash-live-preview", time_scale=0.01)
    frame = types.Blob(data=b"\xff\xd8\xff\xe0 a frame", mime_type="image/jpeg")
    async with Emulator(config) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            await session.send_realtime_input(video=frame)
            handle = await handle_after_turn(session)
        with pytest.raises(errors.APIError) as refused:
            async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)):
                pass
        await emu.wait_disconnected()
    assert refused.value.code == 1007
    assert session.session_id is not None
    connections = emu.ledger.sessions[session.session_id].connections
    assert [c.refused for c in connections] == [None, "video"]
