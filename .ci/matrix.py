"""Run the version matrix of `.ci/matrix` (``make matrix``).

Each cell is an overlay, ``build/matrix/<cell>``: the pinned google-genai and websockets
installed there with ``pip install --target --no-deps`` (and any requirement of theirs the
default install does not meet), put first on ``PYTHONPATH`` over the default virtualenv. Before
its tests, a cell proves which versions it runs: it prints them and where they were imported
from, and fails when the overlay did not take. Cells run ``--jobs`` at a time (2 by default).

Usage: python .ci/matrix.py [--jobs N] [--timeout SECONDS] [CELL ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINS = ROOT / ".ci" / "matrix"
BUILD = ROOT / "build" / "matrix"
PACKAGES = ("google-genai", "websockets")

# Run inside a cell's environment: the versions it imports and where from, and any requirement
# of the overlaid packages that the environment does not meet.
PROBE = """
import importlib.metadata as md, json, sys
from packaging.requirements import Requirement
import google.genai, websockets
unmet = []
for name in sys.argv[1:]:
    for text in md.requires(name) or ():
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            have = md.version(req.name)
        except md.PackageNotFoundError:
            have = None
        if have is None or not req.specifier.contains(have, prereleases=True):
            unmet.append(str(req))
print(json.dumps({
    "versions": {name: md.version(name) for name in sys.argv[1:]},
    "files": {"google-genai": google.genai.__file__, "websockets": websockets.__file__},
    "unmet": unmet,
}))
"""


@dataclass(frozen=True)
class Cell:
    name: str
    pins: dict[str, str]
    paths: tuple[str, ...]
    default: bool = False
    """The default install is this cell: ``make test`` runs the whole suite on it, so the
    matrix only proves its versions."""

    @property
    def overlay(self) -> Path:
        return BUILD / self.name


@dataclass(frozen=True)
class Found:
    """What a cell's environment imports: each package's version and file, and the
    requirements of the overlaid packages it does not meet."""

    versions: dict[str, str]
    files: dict[str, str]
    unmet: list[str]


@dataclass
class Result:
    cell: Cell
    ok: bool
    seconds: float
    summary: str


def read_pins() -> list[Cell]:
    suites: dict[str, list[str]] = {}
    cells: list[Cell] = []
    for number, raw in enumerate(PINS.read_text().splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        if words[0] == "suite" and len(words) >= 3:
            suites[words[1]] = words[2:]
        elif words[0] == "cell" and len(words) >= 5:
            name, genai, ws, *names = words[1:]
            default = names == ["default"]
            unknown = [n for n in names if n not in suites and not default]
            if unknown:
                raise SystemExit(f"{PINS}:{number}: unknown suite {unknown[0]!r}")
            paths = tuple(p for n in names if not default for p in suites[n])
            pins = {"google-genai": genai, "websockets": ws}
            cells.append(Cell(name, pins, paths, default))
        else:
            raise SystemExit(f"{PINS}:{number}: not a suite or cell line: {raw!r}")
    return cells


def check_upper_bounds(cells: list[Cell]) -> None:
    """pyproject.toml's upper bound of each package is the newest version the matrix runs."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for package in PACKAGES:
        newest = max((c.pins[package] for c in cells), key=_version_key)
        [spec] = [d for d in deps if re.match(rf"{re.escape(package)}\s*[<>=!~]", d)]
        if f"<={newest}" not in spec.replace(" ", ""):
            raise SystemExit(
                f"pyproject.toml's {spec!r} does not end at {newest}, the newest {package} "
                f"in {PINS.relative_to(ROOT)}"
            )


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def cell_env(cell: Cell) -> dict[str, str]:
    env = dict(os.environ)
    if cell.default:
        return env
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(cell.overlay), env.get("PYTHONPATH", "")) if p
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def probe(cell: Cell) -> Found:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *PACKAGES],
        env=cell_env(cell),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return Found(**json.loads(out.stdout))


def pip_target(cell: Cell, requirements: list[str]) -> None:
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--upgrade"),
            *("--target", str(cell.overlay), *requirements),
        ],
        check=True,
        timeout=600,
    )


def build(cell: Cell) -> str:
    """Make the cell's overlay (reused while its pins are unchanged) and prove it took: the
    line to print, or SystemExit saying what is wrong."""
    stamp = cell.overlay / ".pins"
    wanted = json.dumps(cell.pins, sort_keys=True)
    if not cell.default and not (stamp.exists() and stamp.read_text() == wanted):
        shutil.rmtree(cell.overlay, ignore_errors=True)
        cell.overlay.mkdir(parents=True)
        pip_target(cell, [f"{name}=={version}" for name, version in cell.pins.items()])
        # What the pinned packages need and the default install lacks goes in the overlay too.
        for _ in range(3):
            unmet = probe(cell).unmet
            if not unmet:
                break
            pip_target(cell, unmet)
        stamp.write_text(wanted)
    found = probe(cell)
    versions, files, unmet = found.versions, found.files, found.unmet
    home = Path(sys.prefix) if cell.default else cell.overlay
    wrong = [
        f"{name} {versions[name]} from {files[name]}"
        for name, version in cell.pins.items()
        if versions[name] != version or not files[name].startswith(str(home))
    ]
    if wrong or unmet:
        raise SystemExit(
            f"{cell.name}: the overlay did not take: {', '.join(wrong) or 'requirements'}"
            + (f"; unmet: {', '.join(unmet)}" if unmet else "")
        )
    return f"{cell.name}: " + ", ".join(
        f"{name} {versions[name]} ({Path(files[name]).parent.relative_to(ROOT)})"
        for name in PACKAGES
    )


def run(cell: Cell, timeout: float) -> Result:
    if cell.default:
        return Result(cell, True, 0.0, "the default install: the whole suite runs on it")
    log = BUILD / f"{cell.name}.log"
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *cell.paths],
            cwd=ROOT,
            env=cell_env(cell),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        timed_out = False
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            # A failed cell like any other: the table still shows every cell.
            timed_out = True
        except BaseException:
            process.kill()
            process.wait()
            raise
        if timed_out:
            process.kill()
            code = process.wait()
    seconds = time.monotonic() - started
    lines = log.read_text().splitlines()
    summary = next((line for line in reversed(lines) if " in " in line), "no summary")
    if timed_out:
        summary = f"timed out after {timeout:.0f} s"
    if code != 0:
        print(f"--- {cell.name} failed; the end of {log.relative_to(ROOT)}:", flush=True)
        print("\n".join(lines[-60:]), flush=True)
    return Result(cell, code == 0, seconds, summary.strip("= "))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="*", help="cells to run (default: all)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a cell may take")
    args = parser.parse_args()
    cells = read_pins()
    check_upper_bounds(cells)
    chosen = [c for c in cells if not args.cells or c.name in args.cells]
    if len(chosen) != len(args.cells or chosen):
        raise SystemExit(f"unknown cell; the cells are {', '.join(c.name for c in cells)}")
    BUILD.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    for cell in chosen:
        print(build(cell), flush=True)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda cell: run(cell, args.timeout), chosen))
    print(f"matrix ({time.monotonic() - started:.0f} s, {args.jobs} at a time):")
    for r in results:
        pins = " ".join(f"{name} {r.cell.pins[name]}" for name in PACKAGES)
        status = "ok  " if r.ok else "FAIL"
        print(f"  {status} {r.cell.name:16} {pins:34} {r.seconds:5.0f} s  {r.summary}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
