"""Instruction counts for the benchmarks: unlike CPU time, they repeat on a shared machine.

A benchmark runs itself again as a child under ``valgrind --tool=callgrind --instr-atstart=no``
(:func:`count`), and the child turns counting on and off around the part it measures
(:func:`measure`), so imports and set-up are not counted. Valgrind slows the child down many
times: run the calls at a time scale that leaves it room.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence

_CHILD = "BENCH_CALLGRIND"
"""Set in the child's environment: only then does :func:`measure` reach valgrind."""


def measure(state: str) -> None:
    """Count (``"on"``) or stop counting (``"off"``) in this process when it runs under
    :func:`count`; nothing otherwise."""
    if os.environ.get(_CHILD):
        subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], check=True)


def count(
    script: str, arguments: Sequence[str], what: str, out_file: str = "/dev/null"
) -> tuple[int, str]:
    """Run ``script`` with ``arguments`` under callgrind: the instructions counted while it
    measured, and its standard output. ``what`` names the run in the error when it fails;
    ``out_file`` keeps callgrind's profile (per function: ``callgrind_annotate out_file``)."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out_file}",
        sys.executable,
        script,
        *arguments,
    ]
    env = {**os.environ, _CHILD: "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or found is None:
        raise RuntimeError(f"{what} failed under valgrind:\n{done.stderr[-3000:]}")
    return int(found.group(1)), done.stdout
