"""One way for the benchmarks to report a cProfile run: saved for pstats or snakeviz, and its
top entries printed by own and by cumulative time."""

from __future__ import annotations

import cProfile
import io
import pstats


def report(profiler: cProfile.Profile, path: str) -> None:
    """Save ``profiler``'s run to ``path`` and print its top 25 by own time, 40 by cumulative."""
    profiler.dump_stats(path)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)
    print(out.getvalue())
