"""Whether a chunk of user audio is silence: what a move need not replay.

The replay rule cannot always place a handle exactly in the input (``outbox``, *Arrival*), so
audio written close to a handle's arrival may or may not be in its snapshot. Replaying speech
there costs a few milliseconds heard twice, losing it costs the user's words; replaying silence
costs the service a duplicate pause and saves nothing. So within that window only speech is
replayed, and this module says which chunk is which: its loudness (RMS of PCM16) below
:data:`SILENCE_LEVEL`. The outbox also holds speech rather than wall time (``outbox``,
*Held silence*), so it asks the level of every audio chunk once, as it is submitted: the test
is on the audio path, and is kept cheap there (a stride, and the sum of squares in C).
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Sequence
from typing import Final

SILENCE_LEVEL: Final = 100.0
"""RMS (PCM16) below which audio is silence: about -50 dBFS, under a quiet room's microphone
noise and far under speech (-40 to -20 dBFS), so the test errs towards calling a chunk speech
(replayed) rather than silence (skipped)."""

_BIG_ENDIAN: Final = sys.byteorder == "big"


def rms(pcm: bytes, stride: int = 1) -> float:
    """Loudness of little-endian PCM16 audio (0 for no whole sample), from every
    ``stride``-th sample: a stride of 4 still sees 80 samples of a 20 ms chunk, spread over
    all of it, at a quarter of the cost (what a test run on every chunk can afford)."""
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    whole = len(pcm) - len(pcm) % 2
    samples: Sequence[int]
    if _BIG_ENDIAN:
        swapped = array("h")
        swapped.frombytes(pcm[:whole])
        swapped.byteswap()
        samples = swapped[::stride]
    else:
        # A view, not a copy: the samples are read in place.
        samples = memoryview(pcm)[:whole].cast("h")[::stride]
    if not samples:
        return 0.0
    # hypot sums the squares in C (exactly rounded), several times faster than a Python sum.
    return math.hypot(*samples) / math.sqrt(len(samples))


def is_silent(pcm: bytes, level: float = SILENCE_LEVEL) -> bool:
    """Whether ``pcm`` (little-endian PCM16) is quieter than ``level``."""
    return rms(pcm) < level
