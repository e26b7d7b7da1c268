"""Bad input to the send methods gets a clear error (or the documented fallback) before
anything is queued; a chunk the input buffer cannot hold is refused, never dropped."""

from __future__ import annotations

import array
from typing import Any

import pytest

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.outbox import OutboxLimits
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.transport import ContentTurn, NotConnectedError, ReplayItem, ToolResult

from .transport_helpers import make_transport


def _offline() -> GeminiLiveTransport:
    return GeminiLiveTransport(api_key="k")


def _received(emu: Emulator) -> list[int]:
    (session,) = emu.ledger.sessions.values()
    return list(session.audio_received)


@pytest.mark.parametrize("audio", ["hello", [0, 0], 7, None, {"pcm": b"\0\0"}])
def test_send_audio_takes_only_bytes_like_pcm(audio: Any) -> None:
    transport = _offline()
    with pytest.raises(TypeError, match=r"send_audio takes bytes \(bytes, bytearray"):
        transport.send_audio(audio)
    assert transport.get_diagnostics().total_sends["audio"].attempted == 0


def test_an_odd_byte_count_is_refused_as_pcm16() -> None:
    with pytest.raises(ValueError, match="even number of bytes, not 3"):
        _offline().send_audio(b"\0\0\0")


async def test_any_buffer_of_pcm_is_sent_as_its_bytes(emu: Emulator) -> None:
    transport = make_transport(emu)
    await transport.connect()
    chunks = [user_audio(seq, speech=False) for seq in (1, 2, 3)]
    transport.send_audio(bytearray(chunks[0]))
    transport.send_audio(memoryview(chunks[1]))
    samples = array.array("h")
    samples.frombytes(chunks[2])
    transport.send_audio(samples)  # an int16 buffer: its bytes, not its item count
    await transport.disconnect()
    assert _received(emu) == [1, 2, 3]


async def test_a_chunk_longer_than_the_input_bound_is_refused_and_evicts_nothing(
    emu: Emulator,
) -> None:
    transport = make_transport(emu, input_buffer=OutboxLimits(max_audio_seconds=1.0))
    await transport.connect()
    transport.send_audio(user_audio(1, speech=False))
    long_chunk = user_audio(2, speech=False, ms=2000)
    with pytest.raises(ValueError, match="longer than the input buffer holds"):
        transport.send_audio(long_chunk)
    transport.send_audio(user_audio(3, speech=False, ms=1000))  # exactly the bound: taken
    sends = transport.get_diagnostics().total_sends["audio"]
    stats = transport.get_diagnostics().input
    await transport.disconnect()
    assert _received(emu) == [1, 3]
    assert (sends.attempted, sends.refused) == (3, 1)
    assert stats is not None and stats.audio_chunks_dropped == 0


@pytest.mark.parametrize(
    "turns",
    [None, "hello", b"hello", [None], ["hello"], [ContentTurn("user", 5)]],  # type: ignore[arg-type]
)
def test_send_live_text_never_raises_on_bad_turns(turns: Any) -> None:
    assert _offline().send_live_text(turns) is False


@pytest.mark.parametrize("turns", [None, "hello", [("user", "hi")]])
def test_send_content_refuses_what_is_not_turns(turns: Any) -> None:
    with pytest.raises(TypeError, match="send_content takes"):
        _offline().send_content(turns)


def test_send_content_refuses_an_unknown_role() -> None:
    with pytest.raises(ValueError, match="'user' or 'model'"):
        _offline().send_content([ContentTurn("system", "be brief")])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "mime", "error", "match"),
    [
        ("jpeg", "image/jpeg", TypeError, "send_file takes bytes"),
        ([1, 2], "image/jpeg", TypeError, "send_file takes bytes"),
        (b"\xff\xd8", None, TypeError, "MIME type as a str"),
        (b"\xff\xd8", "jpeg", ValueError, "not a MIME type"),
    ],
)
def test_send_file_checks_data_and_mime_type(
    data: Any, mime: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        _offline().send_file(data, mime)
    with pytest.raises(error, match=match.replace("send_file", "send_inline_file")):
        _offline().send_inline_file(data, mime)


@pytest.mark.parametrize(
    ("result", "error"),
    [
        ({"id": "fc-1", "name": "f", "response": {}}, TypeError),
        (ToolResult("fc-1", "f", ["not", "a", "mapping"]), TypeError),  # type: ignore[arg-type]
        (ToolResult("", "f", {}), ValueError),
        (ToolResult("fc-1", "f", {}, "soon"), ValueError),  # type: ignore[arg-type]
    ],
)
def test_send_tool_result_checks_the_result(result: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="send_tool_result"):
        _offline().send_tool_result(result)


@pytest.mark.parametrize("items", [None, "my name is Ada", [{"role": "user", "text": "x"}]])
def test_replay_history_refuses_what_is_not_replay_items(items: Any) -> None:
    with pytest.raises(TypeError, match="replay_history takes"):
        _offline().replay_history(items)


def test_replay_history_takes_replay_items() -> None:
    # Offline: the items pass the check, then the send is refused for want of a session.
    with pytest.raises(NotConnectedError, match="not connected"):
        _offline().replay_history([ReplayItem("user", "my name is Ada")])
