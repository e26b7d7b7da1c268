PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean

# Re-install only when the project's metadata changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[pipecat,livekit,demo,dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m examples.demo $(ARGS)

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check plugins frames tests examples
	$(BIN)/ruff format --check plugins frames tests examples

# mypy cannot follow setuptools' package-dir mapping in an editable install, so it checks a
# tree of links laid out as the installed packages are.
TYPECHECK := build/typecheck
typecheck: $(STAMP)
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/realtime_resumption $(TYPECHECK)/livekit/plugins
	for f in plugins/*; do case $$f in plugins/livekit|*__pycache__) ;; *) ln -s ../../../$$f $(TYPECHECK)/realtime_resumption/ ;; esac; done
	ln -s ../../../frames $(TYPECHECK)/realtime_resumption/frames
	ln -s ../../../../plugins/livekit $(TYPECHECK)/livekit/plugins/realtime_resumption
	cd $(TYPECHECK) && ../../$(BIN)/mypy --config-file ../../pyproject.toml --cache-dir ../../.mypy_cache -p realtime_resumption -p livekit.plugins.realtime_resumption

unit: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	for f in tests/benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
