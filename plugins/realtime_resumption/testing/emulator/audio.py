"""Audio that carries its identity: user chunks with a sequence number, answer chunks with an id.

Identity travels in a short header at the start of each chunk, written as PCM16 samples whose
values are 0..15 (one nibble each): a few samples of near-silence that survive any transport
that passes the bytes through, and that a VAD cannot mistake for speech. The rest of a user
chunk is a tone (speech) or zeros (silence); the rest of an answer chunk is a soft tone.
Foreign audio (a real microphone) simply carries no header.
"""

from __future__ import annotations

import math
import struct
import sys
from array import array
from dataclasses import dataclass, replace
from functools import lru_cache
from operator import mul

USER_RATE = 16_000
"""Sample rate of user audio (``audio/pcm;rate=16000``)."""
ANSWER_RATE = 24_000
"""Sample rate of answer audio (``audio/pcm;rate=24000``)."""

_USER_MAGIC = (0xE, 0x1, 0xD, 0x2, 0xC, 0x3, 0xB, 0x4)
_ANSWER_MAGIC = (0xA, 0x5, 0xF, 0x0, 0x9, 0x6, 0x8, 0x7)
_MAX_WORD_BYTES = 255
_SPEECH_AMPLITUDE = 6000
_ANSWER_AMPLITUDE = 3000
_BIG_ENDIAN = sys.byteorder == "big"


def _magic_bytes(magic: tuple[int, ...]) -> bytes:
    return b"".join(n.to_bytes(2, "little") for n in magic)


_USER_MAGIC_BYTES = _magic_bytes(_USER_MAGIC)
_ANSWER_MAGIC_BYTES = _magic_bytes(_ANSWER_MAGIC)


def _nibbles(value: int, count: int) -> list[int]:
    return [(value >> (4 * (count - 1 - i))) & 0xF for i in range(count)]


def _checksum(nibbles: list[int]) -> list[int]:
    return _nibbles(sum(nibbles) & 0xFF, 2)


def _samples_to_bytes(samples: list[int]) -> bytes:
    return struct.pack(f"<{len(samples)}h", *samples)


@lru_cache(maxsize=64)
def _tone(rate: int, count: int, amplitude: int, hz: float) -> bytes:
    return _samples_to_bytes(
        [round(amplitude * math.sin(2 * math.pi * hz * i / rate)) for i in range(count)]
    )


def _user_header(seq: int, word: bytes) -> list[int]:
    fields = _nibbles(seq, 8) + _nibbles(len(word), 2)
    for byte in word:
        fields += _nibbles(byte, 2)
    return list(_USER_MAGIC) + fields + _checksum(fields)


def user_audio(
    seq: int, *, speech: bool = True, ms: int = 20, word: str | None = None, rate: int = USER_RATE
) -> bytes:
    """``ms`` of mono PCM16 user audio at ``rate`` (16 kHz by default, as Gemini Live takes it;
    OpenAI Realtime takes 24 kHz) carrying ``seq`` (0 .. 2**32-1).

    ``speech=False`` is silence for the emulator's VAD. ``word`` is what the emulator
    recognises in this chunk: the input transcription of an audio turn is the words of its
    chunks, in order, so an audio turn can name a declared function.
    """
    if not 0 <= seq < 2**32:
        raise ValueError("seq must fit in 32 bits")
    encoded = (word or "").encode()
    if len(encoded) > _MAX_WORD_BYTES:
        raise ValueError(f"word is longer than {_MAX_WORD_BYTES} bytes")
    header = _user_header(seq, encoded)
    total = rate * ms // 1000
    if total < len(header):
        raise ValueError(f"{ms} ms is too short to carry this chunk's header")
    body_count = total - len(header)
    if speech:
        body = _tone(rate, body_count, _SPEECH_AMPLITUDE, 220.0)
    else:
        body = bytes(2 * body_count)
    return _samples_to_bytes(header) + body


def answer_audio(turn: int, chunk: int, *, ms: int) -> bytes:
    """The answer audio chunk ``chunk`` of answer turn ``turn``: ``ms`` of 24 kHz PCM16."""
    fields = _nibbles(turn, 8) + _nibbles(chunk, 8)
    header = list(_ANSWER_MAGIC) + fields + _checksum(fields)
    total = max(ANSWER_RATE * ms // 1000, len(header))
    # A pitch that steps with the chunk makes answers audible as such in the demo.
    body = _tone(ANSWER_RATE, total - len(header), _ANSWER_AMPLITUDE, 330.0 + 20.0 * (chunk % 8))
    return _samples_to_bytes(header) + body


def _read_nibbles(data: bytes, pos: int, count: int) -> list[int] | None:
    end = pos + 2 * count
    if end > len(data):
        return None
    out = []
    for i in range(pos, end, 2):
        low, high = data[i], data[i + 1]
        if high or low > 0xF:
            return None
        out.append(low)
    return out


def _value(nibbles: list[int]) -> int:
    value = 0
    for n in nibbles:
        value = (value << 4) | n
    return value


def _answer_at(data: bytes, pos: int) -> tuple[int, int] | None:
    fields = _read_nibbles(data, pos + len(_ANSWER_MAGIC_BYTES), 18)
    if fields is None or fields[16:] != _checksum(fields[:16]):
        return None
    return _value(fields[:8]), _value(fields[8:16])


def answer_chunk_id(data: bytes) -> tuple[int, int] | None:
    """(turn, chunk) of an answer audio chunk the emulator produced; None for anything else."""
    if not data.startswith(_ANSWER_MAGIC_BYTES):
        return None
    return _answer_at(data, 0)


def answer_chunk_ids(data: bytes) -> list[tuple[int, int]]:
    """Every (turn, chunk) found anywhere in ``data``, e.g. audio a client re-chunked."""
    found = []
    pos = data.find(_ANSWER_MAGIC_BYTES)
    while pos >= 0:
        ident = _answer_at(data, pos)
        if ident is not None:
            found.append(ident)
        pos = data.find(_ANSWER_MAGIC_BYTES, pos + 2)
    return found


@dataclass(frozen=True)
class UserChunk:
    """A user audio chunk recognised in the input stream."""

    seq: int
    word: str | None
    level: float = 0.0
    """RMS level (PCM16) of the chunk's audio as it arrived: from its header to the next
    chunk's, or to the end of the message that completed it (a body split across messages is
    measured on its first part)."""


def _user_at(data: bytes, pos: int) -> UserChunk | bool | None:
    """The chunk whose header starts at ``pos``; None if invalid, False if cut off."""
    start = pos + len(_USER_MAGIC_BYTES)
    head = _read_nibbles(data, start, 10)
    if head is None:
        return False if len(data) < start + 20 else None
    length = _value(head[8:10])
    rest = _read_nibbles(data, start + 20, 2 * length + 2)
    if rest is None:
        return False if len(data) < start + 20 + 2 * (2 * length + 2) else None
    fields = head + rest[:-2]
    if rest[-2:] != _checksum(fields):
        return None
    word = bytes(_value(rest[i : i + 2]) for i in range(0, 2 * length, 2))
    return UserChunk(_value(head[:8]), word.decode(errors="replace") or None)


def user_audio_seqs(data: bytes) -> list[int]:
    """The sequence numbers of every user chunk in ``data`` (see ``user_audio``)."""
    return [chunk.seq for chunk in UserAudioDecoder().feed(data)]


class UserAudioDecoder:
    """Finds user chunks in a stream of audio messages, even when a header spans two messages."""

    _MAX_CARRY = 2 * (len(_USER_MAGIC) + 10 + 2 * _MAX_WORD_BYTES + 2)

    def __init__(self) -> None:
        self._carry = b""

    def feed(self, data: bytes) -> list[UserChunk]:
        """The chunks completed by ``data``, in order."""
        buf = self._carry + data if self._carry else data
        self._carry = b""
        found: list[tuple[int, UserChunk]] = []
        end = len(buf)
        pos = buf.find(_USER_MAGIC_BYTES)
        while pos >= 0:
            chunk = _user_at(buf, pos)
            if chunk is False:
                self._carry = buf[pos : pos + self._MAX_CARRY]
                end = pos
                break
            if isinstance(chunk, UserChunk):
                found.append((pos, chunk))
            pos = buf.find(_USER_MAGIC_BYTES, pos + 2)
        else:
            # The magic itself may be split across two messages.
            tail = len(_USER_MAGIC_BYTES) - 1
            self._carry = buf[-tail:] if len(buf) >= tail else buf
        if not found:
            return []
        bounds = [p for p, _ in found[1:]] + [end]
        return [
            replace(chunk, level=rms(buf[start:stop]))
            for (start, chunk), stop in zip(found, bounds, strict=True)
        ]


def rms(data: bytes) -> float:
    """Root-mean-square level of little-endian PCM16 ``data``."""
    samples = array("h")
    samples.frombytes(data[: len(data) & ~1])
    if not samples:
        return 0.0
    if _BIG_ENDIAN:
        samples.byteswap()
    return math.sqrt(sum(map(mul, samples, samples)) / len(samples))


def pcm_duration(data: bytes, rate: int = USER_RATE) -> float:
    """Seconds of mono PCM16 audio in ``data``."""
    return len(data) / (2 * rate)
