"""Whether a chunk of user audio is silence: what a move need not replay.

The replay rule cannot place a handle exactly in the input (``gemini.outbox``, *Arrival*), so
audio written close to a handle's arrival may or may not be in its snapshot. Replaying speech
there costs a few milliseconds heard twice, losing it costs the user's words; replaying silence
costs the service a duplicate pause and saves nothing. So within that window only speech is
replayed, and this module says which chunk is which: its loudness (RMS of PCM16) below
:data:`SILENCE_LEVEL`. The test is run only on the few chunks a move must decide about, never on
the audio path.
"""

from __future__ import annotations

import math
import sys
from array import array
from operator import mul
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
    samples = array("h")
    samples.frombytes(pcm[: len(pcm) - len(pcm) % 2])
    if not samples:
        return 0.0
    if _BIG_ENDIAN:
        samples.byteswap()
    if stride > 1:
        samples = samples[::stride]
    return math.sqrt(sum(map(mul, samples, samples)) / len(samples))


def is_silent(pcm: bytes, level: float = SILENCE_LEVEL) -> bool:
    """Whether ``pcm`` (little-endian PCM16) is quieter than ``level``."""
    return rms(pcm) < level
