# Two entry points: `make test` and `make demo`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: venv lint test test-slow test-all demo demo-rag paper-dry-run clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e '.[test]'
	touch $@

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# `make test`: every test but the slow ones (multi-process, fault-injection and end-to-end runs of
# seconds to minutes each, marked `slow`); `make test-slow` runs those, `make test-all` both. CI runs both.
# make test runs a worker per core (TEST_WORKERS=1: one process), each test file whole on one worker.
TEST_WORKERS ?= auto
test: lint
	$(BIN)/python -m pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadfile --durations=25

test-slow: venv
	$(BIN)/python -m pytest -q -m slow

test-all: lint
	$(BIN)/python -m pytest -q

# RAG on the bundled Wikipedia set: every head and BM25, SmolLM2 reading the top 5 (40 questions).
RAG_DEMO := $(BIN)/python scripts/eval_rag.py --data bundled --norm cosine dot qnorm dnorm --bm25 --limit 40 \
	--output runs/rag/bundled-reader40

# The head sweeps, predictors and report, then the RAG comparison.
demo: venv
	$(BIN)/python scripts/demo.py
	$(RAG_DEMO)

demo-rag: venv
	$(RAG_DEMO)

# Every paper config on CPU with stand-in data and tiny models (two steps per cell), then the report.
paper-dry-run: venv
	$(BIN)/python scripts/paper_dry_run.py

clean:
	rm -rf runs/demo runs/rag/bundled-reader40 .pytest_cache
