"""The silence test the replay rule uses on the chunks of its uncertain window."""

from __future__ import annotations

import math
import random
import struct

import pytest

from realtime_resumption.silence import SILENCE_LEVEL, is_silent, rms
from realtime_resumption.testing.emulator.audio import user_audio


def tone(amplitude: int, count: int = 320) -> bytes:
    return struct.pack(f"<{count}h", *(round(amplitude * math.sin(i / 5)) for i in range(count)))


def test_rms_of_known_signals() -> None:
    assert rms(b"") == 0.0
    assert rms(b"\x01") == 0.0, "no whole sample"
    assert rms(struct.pack("<4h", 3, -3, 3, -3)) == 3.0
    assert math.isclose(rms(tone(1000, 3200)), 1000 / math.sqrt(2), rel_tol=0.02)


def test_speech_is_not_silence_and_a_quiet_room_is() -> None:
    assert not is_silent(tone(300))  # about -40 dBFS: quiet speech
    assert is_silent(tone(60))  # about -55 dBFS: a quiet room's noise
    assert is_silent(bytes(640))
    assert SILENCE_LEVEL == 100.0


def test_the_emulators_marked_chunks_are_what_they_say() -> None:
    assert is_silent(user_audio(7, speech=False))
    assert not is_silent(user_audio(7, speech=True))


def test_a_strided_level_tells_speech_from_silence_as_the_full_one_does() -> None:
    for chunk in (tone(300), tone(60), tone(1000), bytes(640)):
        assert math.isclose(rms(chunk, stride=4), rms(chunk), rel_tol=0.1, abs_tol=1.0)
    for seq in range(50):
        for speech in (False, True):
            chunk = user_audio(seq, speech=speech)
            assert (rms(chunk, stride=4) < SILENCE_LEVEL) is (not speech)
    assert rms(b"\x01\x00", stride=4) == 1.0, "one sample is enough"


def test_a_stride_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="stride"):
        rms(bytes(640), stride=0)


@pytest.mark.parametrize("stride", [1, 3, 4])
def test_the_level_is_the_rms_of_the_strided_samples(stride: int) -> None:
    rng = random.Random(stride)
    samples = [rng.randint(-32768, 32767) for _ in range(321)]
    pcm = struct.pack(f"<{len(samples)}h", *samples) + b"\x7f"  # an odd byte is no sample
    picked = samples[::stride]
    expected = math.sqrt(sum(s * s for s in picked) / len(picked))
    assert math.isclose(rms(pcm, stride=stride), expected, rel_tol=1e-12)
