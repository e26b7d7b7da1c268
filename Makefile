PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint typecheck suite matrix bench mutate mutate-report clean

# Re-install only when the project's metadata changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[pipecat,livekit,demo,dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m examples.demo $(ARGS)

test: lint typecheck suite matrix

# The edit-test loop: lint, types, the layout rules, the unit tests (tests/unit mirrors the
# package) and the transport on the emulator (tests/transport), under two minutes. `make test`
# is the whole suite and the version matrix, what CI runs.
check: lint typecheck
	$(BIN)/python -m pytest -q tests/layout tests/unit tests/transport

lint: $(STAMP)
	$(BIN)/ruff check plugins frames tests examples .ci
	$(BIN)/ruff format --check plugins frames tests examples .ci

typecheck: $(STAMP)
	$(BIN)/mypy -p realtime_resumption -p realtime_resumption.frames -p livekit.plugins.realtime_resumption
	$(BIN)/mypy .ci/matrix.py

suite: $(STAMP)
	$(BIN)/python -m pytest -q

# The core's tests on each pair of google-genai and websockets in .ci/matrix, two cells at a
# time, each an overlay of the two pinned packages over the default install (.ci/matrix.py).
# One cell: make matrix CELLS=genai3.6-ws13
matrix: $(STAMP)
	$(BIN)/python .ci/matrix.py $(CELLS)

bench: $(STAMP)
	for f in tests/benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

# Mutation testing of the core's decision modules, one module a run (CPU-heavy; not part of
# `make test` nor of CI):  make mutate MODULE=outbox   (one of MUTATE_MODULES)
# It prints the module's mutation score and every surviving mutant with its diff. mutmut derives a
# mutant's module name from its file's path and only knows a src/ root, so it runs in a copy laid
# out that way: build/mutate/src/realtime_resumption holds copies of the package (frames
# included), beside copies of tests/ and pyproject.toml ([tool.mutmut] there picks the tests). The
# editable install's finder comes after sys.path, so the tests import the mutated copies.
# MUTATE_CHILDREN bounds the parallel test processes (the machine is shared).
MUTATE_MODULES := outbox move_machine move_timing failures resumption generation
MODULE ?= failures
MUTATE_CHILDREN ?= 1
MUTATE := build/mutate
$(VENV)/.installed-mutate: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[pipecat,livekit,demo,dev,mutate]"
	touch $@
mutate: $(VENV)/.installed-mutate
	@case " $(MUTATE_MODULES) " in *" $(MODULE) "*) ;; *) echo "MODULE must be one of: $(MUTATE_MODULES)"; exit 2;; esac
	rm -rf $(MUTATE) && mkdir -p $(MUTATE)/src
	cp -r plugins/realtime_resumption $(MUTATE)/src/realtime_resumption
	cp -r frames/realtime_resumption/frames $(MUTATE)/src/realtime_resumption/frames
	cp -r tests pyproject.toml $(MUTATE)/
	find $(MUTATE) -name __pycache__ -prune -exec rm -rf {} +
	cd $(MUTATE) && ../../$(BIN)/mutmut run --max-children $(MUTATE_CHILDREN) "realtime_resumption.$(subst /,.,$(MODULE)).*"
	$(MAKE) --no-print-directory mutate-report MODULE=$(MODULE)

# The last run's score and survivors again (also after a run stopped with ^C).
mutate-report:
	cd $(MUTATE) && ../../$(BIN)/python -c "$$MUTATE_SCORE" src/realtime_resumption/$(MODULE).py

# The score of one module from mutmut's record of it: killed (or timed out) of those tested (a run
# stopped with ^C leaves the rest "not checked": the score is then of those it reached).
define MUTATE_SCORE
import collections, json, subprocess, sys
from mutmut.stats import status_by_exit_code
codes = json.load(open(f"mutants/{sys.argv[1]}.meta"))["exit_code_by_key"]
status = {name: status_by_exit_code[code] for name, code in codes.items()}
counts = collections.Counter(status.values())
tested = sum(n for s, n in counts.items() if s not in ("not checked", "skipped"))
caught = counts["killed"] + counts["timeout"]
print(f"{sys.argv[1]}: mutation score {caught}/{tested} = {100 * caught / max(tested, 1):.1f}% ({dict(counts)})")
for name in sorted(n for n, s in status.items() if s not in ("killed", "timeout", "not checked")):
    print(f"--- {status[name]}: {name}", flush=True)
    subprocess.run([sys.executable, "-m", "mutmut", "show", name], check=False)
endef
export MUTATE_SCORE

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
