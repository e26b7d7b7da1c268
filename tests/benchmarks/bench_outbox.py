"""Cost and memory of the input log over a long call (a script, not a test).

The outbox keeps every client message since the oldest handle a move could resume from, so
its memory must stay bounded however long the call runs. This feeds it an hour of 20 ms
audio chunks by default, with a turn and a resumption handle every ten seconds, and prints
the time per chunk (submit + mark as written) and the memory it holds at the end and at peak.

    python tests/benchmarks/bench_outbox.py [--minutes 60] [--handle-every 10]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from loguru import logger

from realtime_resumption.outbox import MessageKind, Outbox

CHUNK = 0.02
PAYLOAD = bytes(640)  # 20 ms of 16 kHz PCM16


def run(chunks: int, handle_every: int, *, traced: bool) -> tuple[float, int, int, int]:
    """(microseconds per chunk, entries retained, bytes held at the end, peak bytes)."""
    outbox: Outbox[bytes] = Outbox()
    outbox.attach_fresh(1, 0.0)
    if traced:
        tracemalloc.start()
    now = 0.0
    start = time.perf_counter()
    for index in range(1, chunks + 1):
        now += CHUNK
        outbox.submit(PAYLOAD, MessageKind.AUDIO, now, audio_seconds=CHUNK)
        entry = outbox.next_unsent()
        assert entry is not None
        outbox.mark_sent(entry, 1, index, now)
        if index % handle_every == 0:
            outbox.turn_completed()
            outbox.record_handle(f"handle-{index:012d}", 1, now + 0.05)
    elapsed = time.perf_counter() - start
    held = peak = 0
    if traced:
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return elapsed / chunks * 1e6, outbox.stats.retained, held, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="length of the call")
    parser.add_argument("--handle-every", type=float, default=10.0, help="seconds between turns")
    args = parser.parse_args()
    logger.remove()
    chunks = int(args.minutes * 60 / CHUNK)
    every = max(1, int(args.handle_every / CHUNK))
    micros, _, _, _ = run(chunks, every, traced=False)
    _, retained, held, peak = run(chunks, every, traced=True)
    print(
        f"outbox over {args.minutes:g} min of 20 ms audio ({chunks} chunks), "
        f"a handle every {args.handle_every:g} s"
    )
    print(f"  submit + mark written    {micros:8.1f} us per chunk")
    print(f"  entries held at the end  {retained:8d}")
    print(f"  memory held at the end   {held / 1e6:8.2f} MB (peak {peak / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
