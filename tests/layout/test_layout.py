"""The package as static tools read it: source roots that import as they install, no import
cycle (in production code or the testing kit), the pure decision modules free of I/O, and
the testing kit kept out of production imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE_ROOTS = (ROOT / "plugins", ROOT / "frames")
TESTING_KIT = "realtime_resumption.testing"
PURE = {
    "realtime_resumption.move_machine",
    "realtime_resumption.move_timing",
    "realtime_resumption.failures",
    "realtime_resumption.outbox",
    "realtime_resumption.silence",
    "realtime_resumption.generation",
}
"""Decision modules: state machines and rules, with the I/O at their callers."""
DATA = {
    "realtime_resumption.handles",
    "realtime_resumption.move_reports",
    "realtime_resumption.redaction",
    "realtime_resumption.transport",
}
"""Value types and pure helpers the decision modules may use."""


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for root in SOURCE_ROOTS:
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[str]:
    """Every module ``name`` imports, ``TYPE_CHECKING`` blocks included (tools read those)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


def _graph(include: set[str]) -> dict[str, set[str]]:
    return {
        name: {dep for dep in _imports(name, MODULES[name]) if dep in include and dep != name}
        for name in include
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph[node]):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_source_roots_hold_the_import_names() -> None:
    assert "realtime_resumption" in MODULES
    assert "realtime_resumption.frames" in MODULES
    assert "livekit.plugins.realtime_resumption" in MODULES
    import realtime_resumption.frames

    assert Path(realtime_resumption.frames.__file__ or "") == MODULES["realtime_resumption.frames"]


def test_no_import_cycle_anywhere() -> None:
    """Production code and the testing kit alike, type-only imports included."""
    assert _cycles(_graph(set(MODULES))) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_production_code_never_imports_the_testing_kit() -> None:
    for name, path in MODULES.items():
        if name.startswith(TESTING_KIT) or name == "realtime_resumption":
            continue  # the package's lazy exports name the emulator without importing it
        assert not [dep for dep in _imports(name, path) if dep.startswith(TESTING_KIT)], name


def test_decision_modules_do_no_io() -> None:
    for name in PURE:
        deps = set(_imports(name, MODULES[name]))
        assert not deps & {"asyncio", "websockets", "google.genai", "socket"}, name
        assert all(dep in PURE or dep in DATA or dep not in MODULES for dep in deps), name


def test_production_imports_need_no_testing_extra() -> None:
    """With trustme absent, the transport and the adapters import; the emulator says which
    extra it needs."""
    code = (
        "import sys; sys.modules['trustme'] = None\n"
        "import realtime_resumption.gemini, realtime_resumption.pipecat\n"
        "import livekit.plugins.realtime_resumption\n"
        "try:\n"
        "    import realtime_resumption.testing.emulator\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "pip install 'realtime-resumption[testing]'" in out.stdout


PUBLIC_CORE = {
    "realtime_resumption",
    "realtime_resumption.frames",
    "realtime_resumption.gemini",
    "realtime_resumption.generation",
    "realtime_resumption.move_reports",
    "realtime_resumption.openai",
    "realtime_resumption.redaction",
    "realtime_resumption.resumption",
    "realtime_resumption.store",
    "realtime_resumption.telemetry",
    "realtime_resumption.transport",
}
"""What the framework adapters may import of the core: its public modules, and the Gemini and
OpenAI transports' packages (never their parts)."""


def test_the_adapters_use_only_the_cores_public_modules() -> None:
    adapters = [
        name
        for name in MODULES
        if name.startswith(("realtime_resumption.pipecat", "livekit.plugins.realtime_resumption"))
    ]
    assert adapters
    for name in adapters:
        core = {
            dep
            for dep in _imports(name, MODULES[name])
            if dep in MODULES
            and dep.startswith("realtime_resumption")
            and not dep.startswith("realtime_resumption.pipecat")
        }
        assert core <= PUBLIC_CORE, (name, sorted(core - PUBLIC_CORE))


def test_no_two_modules_share_a_name() -> None:
    """One meaning per name: a module's name says what it holds, across the whole package."""
    # ``__main__`` is the name ``python -m`` requires of each package's command line.
    names = [
        name.rpartition(".")[2]
        for name, path in MODULES.items()
        if path.name not in ("__init__.py", "__main__.py")
    ]
    assert sorted({n for n in names if names.count(n) > 1}) == []


GEMINI_SDK = "google.genai"
GEMINI_KIT = ("realtime_resumption.testing.emulator", "realtime_resumption.testing.pytest_plugin")
"""The testing kit's Gemini Live emulator and its fixtures (a google-genai client pointed at
it): they speak Gemini's wire as the SDK does."""


def _names_imported(path: Path) -> Iterator[str]:
    """Every name an import in ``path`` reaches, in full: ``from google import genai`` reaches
    ``google.genai`` (``TYPE_CHECKING`` blocks and imports inside functions included)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def _imports_gemini_sdk(path: Path) -> bool:
    return any(
        name == GEMINI_SDK or name.startswith(GEMINI_SDK + ".") for name in _names_imported(path)
    )


def test_only_gemini_packages_import_google_genai() -> None:
    """The core (the move machine, the failure policy, the replay rules, history, the store
    record, telemetry, the generation lifecycle) and the adapters' framework code know no
    provider's SDK: what is Gemini's lives in a ``gemini`` package."""
    outside = sorted(
        name
        for name, path in MODULES.items()
        if "gemini" not in name.split(".")
        and not name.startswith(GEMINI_KIT)
        and _imports_gemini_sdk(path)
    )
    assert outside == []


def test_the_sdk_rule_sees_every_form_of_import(tmp_path: Path) -> None:
    forms = {
        "import google.genai": True,
        "from google import genai": True,
        "from google.genai import types": True,
        "if TYPE_CHECKING:\n    from google.genai.types import Content": True,
        "def f():\n    import google.genai.live": True,
        "from google import auth": False,
        "from . import genai": False,
    }
    for code, found in forms.items():
        module = tmp_path / "module.py"
        module.write_text(code + "\n")
        assert _imports_gemini_sdk(module) is found, code
