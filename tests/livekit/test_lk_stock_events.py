"""What a LiveKit app sees of a call is what it saw with the stock Google model: the same
realtime events in the same order (a generation opens when the user starts speaking, the
user's turn ends with it), the resumption handle to save, and the constructor's messages."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from google.genai import types
from livekit.agents import Agent, AgentSession, function_tool
from livekit.agents.voice.events import AgentStateChangedEvent, UserStateChangedEvent
from livekit.plugins import google
from livekit.plugins import realtime_resumption as rr

from realtime_resumption import Secret, redact
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from .lk_helpers import ModelKind, make_model, until, voice_call

SCALE = 0.25
CHUNKS = 10


@function_tool
async def lookup(city: str = "") -> str:
    """Look up the weather in a city."""
    return "sunny"


async def _call_events(kind: ModelKind) -> list[tuple[str, Any]]:
    """A voice call of two questions (the second with a tool call) on the ``kind`` model:
    the realtime session's events and the AgentSession's user and agent states, in order."""
    events: list[tuple[str, Any]] = []
    async with (
        Emulator(EmulatorConfig(time_scale=SCALE, answer_chunks=CHUNKS)) as emu,
        voice_call(
            emu, Agent(instructions="Be helpful.", tools=[lookup]), pace=SCALE, kind=kind
        ) as call,
    ):
        rt = call.agent.realtime_llm_session
        for name in ("input_speech_started", "input_speech_stopped", "generation_created"):
            rt.on(name, lambda _, name=name: events.append((name, None)))
        rt.on(
            "input_audio_transcription_completed",
            lambda ev: events.append(("final" if ev.is_final else "partial", ev.transcript)),
        )

        def user_state(ev: UserStateChangedEvent) -> None:
            events.append(("user", ev.new_state))

        def agent_state(ev: AgentStateChangedEvent) -> None:
            if ev.new_state in ("speaking", "listening"):
                events.append(("agent", ev.new_state))

        call.session.on("user_state_changed", user_state)
        call.session.on("agent_state_changed", agent_state)
        call.mic.say(["hello", "there"])
        await call.settled(messages=2)
        call.mic.say(["please", "lookup", "the", "weather"])
        await call.settled(messages=4)
        await until(lambda: events.count(("input_speech_stopped", None)) >= 3)
    return events


# The stock plugin still sets LiveConnectConfig.generation_config, which google-genai deprecates.
@pytest.mark.filterwarnings(
    "ignore:Setting `LiveConnectConfig.generation_config`:DeprecationWarning"
)
async def test_speech_and_generation_events_come_as_with_the_stock_model() -> None:
    stock, ours = [await _call_events(kind) for kind in ("stock", "ours")]

    def realtime(events: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        return [e for e in events if e[0] not in ("partial", "user", "agent")]

    # The same events in the same order: one generation per turn, opened (with the speech
    # start) at the user's first words, plus one for the answer to the tool's result; each
    # generation's end stops the user's speech and makes their words final.
    assert realtime(ours) == realtime(stock)
    assert realtime(ours).count(("input_speech_stopped", None)) == 3
    for events in (stock, ours):
        # The generation exists before the first transcript of the user's words.
        first_partial = next(i for i, e in enumerate(events) if e[0] == "partial")
        assert events.index(("generation_created", None)) < first_partial
        # The user goes back to listening at the end of the answer, not at its start.
        spoke = events.index(("agent", "speaking"))
        assert ("user", "listening") not in events[:spoke]
        assert events.index(("final", "hello there")) > spoke


async def test_generation_created_comes_when_the_user_starts_speaking() -> None:
    """At the service's own pace: the generation opens at the user's first words, well
    before the answer (the stock model's timing), not at the model's first output."""
    async with (
        Emulator(EmulatorConfig(time_scale=1.0, answer_chunks=CHUNKS)) as emu,
        voice_call(emu, Agent(instructions="Be helpful."), pace=1.0) as call,
    ):
        rt = call.agent.realtime_llm_session
        created: list[float] = []
        first_words: list[float] = []
        rt.on("generation_created", lambda _: created.append(time.monotonic()))
        rt.on("input_audio_transcription_completed", lambda _: first_words.append(time.monotonic()))
        done = call.mic.say(["one", "two", "three", "four"], speech_chunks=50)
        await until(lambda: bool(created))
        # One second of speech is still to come, then the service's silence detection.
        assert not done.is_set()
        assert first_words and created[0] <= first_words[0]
        await call.settled(messages=2)


async def _handle_after_a_turn(kind: ModelKind, emu: Emulator) -> Any:
    """``session_resumption_handle`` of a ``kind`` session: before it connected, and once
    the handle after its first answer arrived."""
    session = AgentSession(llm=make_model(kind, emu), aec_warmup_duration=None)
    agent = Agent(instructions="Be brief.")
    await session.start(agent)
    try:
        rt: Any = agent.realtime_llm_session
        assert rt.session_resumption_handle is None
        result = await session.run(user_input="hello")
        result.expect.next_event().is_message(role="assistant")
        await until(lambda: rt.session_resumption_handle is not None)
        return rt.session_resumption_handle
    finally:
        await session.aclose()


@pytest.mark.filterwarnings(
    "ignore:Setting `LiveConnectConfig.generation_config`:DeprecationWarning"
)
async def test_the_resumption_handle_is_there_to_save_and_resumes_the_session() -> None:
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        assert isinstance(await _handle_after_a_turn("stock", emu), str)
        saved = await _handle_after_a_turn("ours", emu)
        assert isinstance(saved, Secret) and saved not in repr(saved)
        # Saved by the app, it resumes the conversation on a new model.
        model = rr.RealtimeModel(
            api_key="k",
            http_options=emu.http_options(),
            session_resumption=types.SessionResumptionConfig(handle=saved),
        )
        rt = model.session()
        try:
            assert rt.session_resumption_handle == saved
            generation = await rt.generate_reply()
            async for message in generation.message_stream:
                async for _ in message.audio_stream:
                    pass
        finally:
            await rt.aclose()
    ours_record = next(r for r in emu.ledger.sessions.values() if len(r.connections) == 2)
    assert ours_record.connections[1].resumed_from == redact(saved)
    assert len(emu.ledger.sessions) == 2


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"vertexai": True, "project": "p", "tool_response_scheduling": "WHEN_IDLE"},
        {"api_key": "k", "credentials": object()},
        {"api_key": "k", "model": "gemini-live-2.5-flash-native-audio"},
        {"vertexai": True, "project": "p", "model": "gemini-3.1-flash-live-preview"},
    ],
    ids=[
        "vertex-scheduling",
        "credentials-on-gemini",
        "vertex-model-on-gemini",
        "gemini-on-vertex",
    ],
)
def test_the_constructor_warns_as_the_stock_model_does(
    kwargs: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    warnings: dict[str, list[str]] = {}
    for name, factory in (
        ("stock", google.realtime.RealtimeModel),
        ("ours", rr.RealtimeModel),
    ):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            factory(**kwargs)
        warnings[name] = _messages(caplog)
    assert warnings["ours"] == warnings["stock"]
    assert warnings["ours"]


@pytest.mark.parametrize(
    ("kwargs", "env"),
    [
        ({}, {}),
        ({"vertexai": True}, {"GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent.json"}),
        ({"api_key": "k", "model": "gemini-3.8-live", "thinking_config": "level"}, {}),
    ],
    ids=["no-key", "vertex-without-project", "thinking-level-on-3.8"],
)
def test_the_constructor_refuses_as_the_stock_model_does(
    kwargs: dict[str, Any], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if kwargs.get("thinking_config") == "level":
        kwargs = {**kwargs, "thinking_config": types.ThinkingConfig(thinking_level="LOW")}
    errors: dict[str, str] = {}
    for kind, factory in (("stock", google.realtime.RealtimeModel), ("ours", rr.RealtimeModel)):
        with pytest.raises(Exception) as raised:
            factory(**kwargs)
        errors[kind] = f"{type(raised.value).__name__}: {raised.value}"
    assert errors["ours"] == errors["stock"]
