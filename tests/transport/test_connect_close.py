"""Connecting, closing and dial generations, against the emulator over real TLS."""

from __future__ import annotations

import asyncio
import time

import pytest

from realtime_resumption.gemini import Credential, GeminiLiveTransport
from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import (
    ConnectError,
    ContentTurn,
    DialAbandonedError,
    GenerationEndReason,
    NotConnectedError,
    ReconnectState,
    TransportError,
)

from .transport_helpers import (
    MODEL,
    Recorder,
    connected_and_answered,
    emulator_config,
    kind_emulator_config,
    make_transport,
)

HELLO = [ContentTurn("user", "hello there")]


def _kinds(rec: Recorder) -> list[str]:
    return [event.kind for (event,) in rec.of("on_connection_lifecycle")]


async def test_connect_reports_attempt_setup_and_session_ready(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    assert not transport.is_connected
    await transport.connect()
    assert transport.is_connected
    (session_id,) = emu.ledger.sessions
    assert rec.of("on_session_ready") == [(session_id,)]
    attempt, setup = (event for (event,) in rec.of("on_connection_lifecycle"))
    assert (attempt.kind, attempt.connect_attempt_id, attempt.handle_supplied) == (
        "attempt",
        "att_1",
        False,
    )
    assert (setup.kind, setup.transport_generation, setup.session_id) == (
        "setup-ok",
        1,
        session_id,
    )
    assert (transport.current_dial_gen, transport.current_transport_generation) == (1, 1)
    await transport.disconnect()
    assert _kinds(rec)[-1] == "generation-close"
    assert rec.of("on_close") == [(1000, "closed by the client")]
    assert not transport.is_connected


async def test_nothing_is_left_running_after_disconnect(emu: Emulator) -> None:
    baseline = asyncio.all_tasks()
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    transport.send_content(HELLO)
    await rec.wait_for("on_audio_output", 3)
    transport.send_content(HELLO)
    await transport.disconnect()
    await transport.disconnect()  # idempotent
    await emu.wait_disconnected()
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - baseline == set()
    (conn,) = next(iter(emu.ledger.sessions.values())).connections
    assert conn.closed_by == "client"
    assert rec.count("on_close") == 1


async def test_sends_are_refused_before_connect_and_after_disconnect(emu: Emulator) -> None:
    transport = make_transport(emu)
    with pytest.raises(NotConnectedError, match="not connected"):
        transport.send_content(HELLO)
    await transport.connect()
    await transport.disconnect()
    with pytest.raises(NotConnectedError, match="disconnected"):
        transport.send_audio(b"\0\0" * 160)
    with pytest.raises(NotConnectedError):
        transport.commit_audio()
    assert transport.send_live_text(HELLO) is False
    sends = transport.get_diagnostics().total_sends
    assert (sends["content"].attempted, sends["content"].refused) == (1, 1)
    assert (sends["audio"].refused, sends["audio_stream_end"].refused, sends["text"].refused) == (
        1,
        1,
        1,
    )


async def test_a_server_that_never_answers_setup_fails_connect_with_a_timeout(
    emu: Emulator,
) -> None:
    transport = make_transport(emu, setup_timeout=0.3)
    rec = Recorder(transport)
    emu.faults.hang_next()
    started = asyncio.get_running_loop().time()
    with pytest.raises(ConnectError) as caught:
        await transport.connect()
    assert asyncio.get_running_loop().time() - started < 3
    assert caught.value.failure.kind == "timeout"
    assert "setupComplete" in str(caught.value)
    assert _kinds(rec) == ["attempt", "setup-failed"]
    assert transport.current_dial_gen == 2  # the dial, then its failure
    assert transport.current_transport_generation == 0
    assert rec.count("on_session_ready") == 0
    # The transport can dial again.
    await transport.connect()
    assert transport.is_connected
    await transport.disconnect()


async def test_a_refused_upgrade_keeps_the_provider_text_apart(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    emu.faults.refuse_next(how="http503")
    with pytest.raises(ConnectError) as caught:
        await transport.connect()
    failure = caught.value.failure
    assert (failure.kind, failure.code) == ("refused", 503)
    assert failure.provider_text is not None and "unavailable" in failure.provider_text
    assert failure.provider_text not in str(caught.value)
    assert failure.provider_text not in repr(failure)
    (failed,) = [e for (e,) in rec.of("on_connection_lifecycle") if e.kind == "setup-failed"]
    assert failed.failure == failure
    await transport.disconnect()


async def test_a_refused_handle_closes_the_attempt_before_setup(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    with pytest.raises(ConnectError) as caught:
        await transport.reconnect(ReconnectState(resumption_handle="unknown-handle-1234"))
    failure = caught.value.failure
    assert (failure.kind, failure.code) == ("closed", emu.config.refuse_close_code)
    assert _kinds(rec) == ["attempt", "attempt-close", "setup-failed"]
    (attempt, close, _) = (event for (event,) in rec.of("on_connection_lifecycle"))
    assert attempt.handle_supplied
    assert close.code == emu.config.refuse_close_code
    assert rec.count("on_close") == 0
    await transport.disconnect()


async def test_a_close_right_after_setup_surfaces_once(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    emu.faults.refuse_next(how="close1011")
    await transport.connect()
    await rec.wait_for("on_close")
    assert rec.of("on_close") == [(1011, "Internal error encountered.")]
    assert _kinds(rec) == ["attempt", "setup-ok", "generation-close"]
    assert not transport.is_connected
    with pytest.raises(NotConnectedError):
        transport.send_content(HELLO)
    await transport.disconnect()
    assert rec.count("on_close") == 1


async def test_go_away_reports_the_raw_notice_and_seconds(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    await emu.faults.go_away(20.0, close_at_deadline=False)
    await emu.faults.go_away(None, close_at_deadline=False)
    await rec.wait_for("on_go_away", 2)
    await transport.disconnect()
    (raw, seconds), (no_raw, no_seconds) = rec.of("on_go_away")
    assert seconds == pytest.approx(20.0 * emu.config.time_scale)
    assert raw is not None and raw.endswith("s")
    assert (no_raw, no_seconds) == (None, None)


async def test_the_deadline_close_after_go_away_is_reported(emu: Emulator) -> None:
    # Without rotation the transport only reports the notice, and the close ends the session.
    transport = make_transport(emu, rotation=False)
    rec = Recorder(transport)
    await transport.connect()
    emu.faults.go_away(1.0)
    await rec.wait_for("on_close")
    await transport.disconnect()
    expected = 1011 if emu.config.profile == "gemini" else 1000
    assert [code for code, _ in rec.of("on_close")] == [expected]


async def test_resumption_updates_keep_the_latest_resumable_handle(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    transport.send_content(HELLO)
    await rec.wait_for("on_turn_complete")
    # The handle that follows the turn (Vertex AI: a little after it).
    await rec.wait(lambda r: r.names()[-1] == "on_resumption_update")
    await transport.disconnect()
    (session,) = emu.ledger.sessions.values()
    latest_index = len(session.handles) - 1
    updates = rec.of("on_resumption_update")
    latest = [handle for handle, resumable, _ in updates if handle and resumable][-1]
    assert transport.resumption_handle == latest
    if emu.config.profile == "gemini":
        # Mid-answer, the Gemini API sends no handle and marks the session not resumable.
        assert (None, False, None) in updates
    assert all(index is None for _, _, index in updates)

    # The next connect resumes the session from that handle.
    await transport.connect()
    await transport.disconnect()
    assert [c.resumed_handle_index for c in session.connections] == [None, latest_index]
    attempts = [e for (e,) in rec.of("on_connection_lifecycle") if e.kind == "attempt"]
    assert [a.handle_supplied for a in attempts] == [False, True]


async def test_clear_resumption_makes_the_next_dial_fresh(emu: Emulator) -> None:
    transport = make_transport(emu)
    await connected_and_answered(transport)
    await transport.disconnect()
    assert transport.resumption_handle is not None
    transport.clear_resumption()
    assert transport.resumption_handle is None
    await transport.connect()
    await transport.disconnect()
    assert len(emu.ledger.sessions) == 2


async def _reconnect_after_an_answer(emu: Emulator) -> Recorder:
    """An answered turn, ``reconnect()``, another answered turn."""
    transport = make_transport(emu)
    rec = await connected_and_answered(transport)
    await transport.reconnect()
    assert transport.is_connected
    assert transport.current_transport_generation == 2
    transport.send_content(HELLO)
    await rec.wait_for("on_generation_end", 2)
    await transport.disconnect()
    return rec


async def test_reconnect_resumes_on_a_new_connection(emu: Emulator) -> None:
    """On the service as measured: the dial beside the open connection is refused, the old
    connection closes, and the same handle resumes the session."""
    rec = await _reconnect_after_an_answer(emu)
    (session,) = emu.ledger.sessions.values()
    first, refused, resumed = session.connections
    assert refused.refused == "open-session" and refused.resumed_from is not None
    assert resumed.established and resumed.resumed_from == refused.resumed_from
    assert first.closed_at is not None and resumed.setup_at is not None
    assert first.closed_at <= resumed.setup_at, "the old connection closed first"
    (move,) = rec.moves
    assert move.outcome is MoveOutcome.RESUMED
    # The move replaced the first connection: only the session's end is a close.
    assert [c for (c, _) in rec.of("on_close")] == [1000]


async def test_reconnect_on_a_kind_service_resumes_beside_the_open_connection(
    profile: str,
) -> None:
    """Where the service takes a resume while the old connection is open (make-before-break),
    one dial does it."""
    async with Emulator(kind_emulator_config(profile)) as emu:
        rec = await _reconnect_after_an_answer(emu)
    (session,) = emu.ledger.sessions.values()
    assert len(session.connections) == 2
    assert session.connections[1].resumed_from is not None
    assert [c for (c, _) in rec.of("on_close")] == [1000]
    closes = [e for (e,) in rec.of("on_connection_lifecycle") if e.kind == "generation-close"]
    assert [c.connect_attempt_id for c in closes] == ["att_1", "att_2"]


async def test_reconnect_without_a_handle_replays_history_into_a_fresh_session(
    emu: Emulator,
) -> None:
    from realtime_resumption.transport import ReplayItem

    transport = make_transport(emu)
    await transport.connect()
    transport.clear_resumption()
    history = (ReplayItem("user", text="my name is Ada"), ReplayItem("model", text="Hello Ada"))
    await transport.reconnect(ReconnectState(conversation_history=history))
    await transport.disconnect()
    assert len(emu.ledger.sessions) == 2
    fresh = list(emu.ledger.sessions.values())[1]
    messages = fresh.connections[0].client_messages
    assert [m.kind for m in messages] == ["setup", "client_content"]
    assert messages[1].text is not None and "my name is Ada" in messages[1].text


async def test_abort_incumbent_during_a_dial_delivers_nothing_afterwards(
    emu: Emulator,
) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    aborted: list[asyncio.Task[str]] = []

    def on_lifecycle(event: object) -> None:
        rec._recorder("on_connection_lifecycle")(event)
        if getattr(event, "kind", None) == "attempt":
            aborted.append(transport.abort_incumbent())  # type: ignore[arg-type]

    transport.on_connection_lifecycle = on_lifecycle
    with pytest.raises(DialAbandonedError):
        await transport.connect()
    assert await aborted[0] == "closed"
    assert transport.current_dial_gen == 2
    assert not transport.is_connected
    await emu.wait_disconnected()
    # The dial completed on the server, but the transport installed and delivered nothing.
    (session,) = emu.ledger.sessions.values()
    assert session.connections[0].setup_at is not None
    assert session.connections[0].closed_by == "client"
    assert rec.names() == ["on_connection_lifecycle"]
    assert transport.resumption_handle is None
    await transport.disconnect()


async def test_abort_incumbent_strands_a_live_connection(profile: str) -> None:
    async with Emulator(emulator_config(profile, answer_chunks=200)) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        transport.send_content(HELLO)
        await rec.wait_for("on_audio_output", 2)
        task = transport.abort_incumbent()
        # Stranded at once: the answer ended, nothing more is delivered, sends are refused.
        assert rec.of("on_generation_end") == [("gen_1", GenerationEndReason.DISCONNECTED)]
        delivered = len(rec.events)
        with pytest.raises(NotConnectedError):
            transport.send_content(HELLO)
        assert await task == "closed"
        await emu.wait_disconnected()
        assert len(rec.events) == delivered
        assert rec.count("on_close") == 0
        assert transport.resumption_handle is None
        assert transport.current_dial_gen == 2
        assert await transport.abort_incumbent() == "closed"
        await transport.disconnect()


async def test_disconnect_abandons_a_dial_in_flight(emu: Emulator) -> None:
    baseline = asyncio.all_tasks()
    transport = make_transport(emu, setup_timeout=5)
    rec = Recorder(transport)
    emu.faults.hang_next()
    dial = asyncio.create_task(transport.connect())
    await rec.wait_for("on_connection_lifecycle")
    await transport.disconnect()
    with pytest.raises(DialAbandonedError):
        await dial
    await emu.wait_disconnected()
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - baseline == set()


async def test_connect_twice_is_refused(emu: Emulator) -> None:
    transport = make_transport(emu)
    await transport.connect()
    with pytest.raises(TransportError, match="already connected"):
        await transport.connect()
    await transport.disconnect()


async def _transparent_indexes(emu: Emulator) -> list[int | None]:
    """The client message indexes of a transparent session's resumption updates, through a
    turn after two audio chunks."""
    transport = make_transport(emu, transparent=True)
    rec = Recorder(transport)
    await transport.connect()
    transport.send_audio(b"\0\0" * 160)
    transport.send_audio(b"\0\0" * 160)
    transport.send_content(HELLO)
    await rec.wait_for("on_turn_complete")
    await rec.wait(lambda r: r.of("on_resumption_update")[-1][2] == 3)
    await transport.disconnect()
    return [index for _, _, index in rec.of("on_resumption_update")]


async def test_vertex_transparent_resumption_reports_the_client_message_index() -> None:
    async with Emulator(emulator_config("vertex")) as emu:
        indexes = await _transparent_indexes(emu)
    assert all(index is not None for index in indexes)
    assert indexes == sorted(indexes)
    assert indexes[-1] == 3  # the two chunks and the turn


async def test_vertex_transparent_handle_after_setup_counts_only_the_setup() -> None:
    """A service that issues a handle right after setupComplete: its index is the setup's."""
    async with Emulator(emulator_config("vertex", update_after_setup=True)) as emu:
        indexes = await _transparent_indexes(emu)
    assert indexes[0] == 0  # only the setup was consumed
    assert all(index is not None for index in indexes)
    assert indexes == sorted(indexes)


async def test_a_failing_credential_provider_fails_the_dial_clearly(emu: Emulator) -> None:
    async def provide() -> Credential:
        raise RuntimeError("vault unreachable")

    transport = GeminiLiveTransport(
        model=MODEL, http_options=emu.http_options(), credential_provider=provide
    )
    with pytest.raises(ConnectError, match="credential provider failed") as caught:
        await transport.connect()
    assert caught.value.failure.kind == "error"
    assert transport.current_dial_gen == 2
    await transport.disconnect()


def test_transparent_is_refused_in_gemini_api_mode() -> None:
    with pytest.raises(ValueError, match="Vertex AI"):
        GeminiLiveTransport(api_key="k", transparent=True)


def test_construction_refuses_mixed_or_bad_options() -> None:
    with pytest.raises(ValueError, match="either a ready client"):
        GeminiLiveTransport(client=object(), api_key="k")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="response_modality"):
        GeminiLiveTransport(api_key="k", response_modality="video")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="setup_timeout"):
        GeminiLiveTransport(api_key="k", setup_timeout=0)
    with pytest.raises(TypeError, match="tools"):
        GeminiLiveTransport(api_key="k", tools=[42])


async def test_credential_expiry_is_reported_then_the_connection_closes(profile: str) -> None:
    async with Emulator(emulator_config(profile)) as emu:
        issued: list[Credential] = []

        async def provide() -> Credential:
            credential = Credential(f"short-lived-{len(issued)}", time.time() + 0.3)
            issued.append(credential)
            return credential

        vertex = profile == "vertex"
        transport = GeminiLiveTransport(
            model=MODEL,
            vertexai=vertex,
            project="emulator-project" if vertex else None,
            location="us-central1" if vertex else None,
            http_options=emu.http_options(),
            credential_provider=provide,
            rotation=False,  # with rotation the session moves instead of closing
        )
        rec = Recorder(transport)
        await transport.connect()
        await rec.wait_for("on_close")
        assert rec.names("on_credential_expiry", "on_close") == [
            "on_credential_expiry",
            "on_close",
        ]
        assert rec.of("on_close") == [(1000, "credential expired")]
        assert "short-lived" not in repr(issued[0])
        # A new dial asks for a new credential.
        await transport.connect()
        await transport.disconnect()
    assert len(issued) == 2


async def test_a_reconnect_while_connect_dials_is_refused_and_leaves_that_connect_be(
    emu: Emulator,
) -> None:
    transport = make_transport(emu, setup_timeout=10.0)
    rec = Recorder(transport)
    emu.faults.slow_setups(1, 2.0)
    connecting = asyncio.create_task(transport.connect())
    await rec.wait(lambda r: "attempt" in _kinds(r))
    with pytest.raises(TransportError, match="connect is under way"):
        await transport.reconnect()
    await connecting
    assert transport.is_connected
    assert _kinds(rec) == ["attempt", "setup-ok"]
    assert len(emu.ledger.sessions) == 1
    transport.send_content(HELLO)
    await rec.wait_for("on_turn_complete")
    await transport.disconnect()
