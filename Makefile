# The template's two commands. Both do their own set-up (virtual environment, pip
# installs, Kafka jars through Maven); they need Python 3.11+, Java 17 and Maven.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: venv test demo bench lint clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements-dev.txt
	touch $@

## Run every test: the template's own and, beside them, the rendered project's full suite on a real Kafka.
test: venv
	$(BIN)/pytest -ra --durations=20 tests  # the 20 slowest: where the time goes

## Render a project with the default answers into demo/ and run its pipeline end to end.
demo: venv
	rm -rf demo && $(BIN)/cookiecutter --no-input --output-dir demo .
	$(MAKE) -C demo/color-counts demo

## Render a project with the default answers into bench/ and run its benchmark (default profile,
## under 15 minutes; results in bench/color-counts/bench-out/). BENCH_ARGS passes options on,
## e.g. make bench BENCH_ARGS="--events 100000" or BENCH_ARGS="--scaling"; QUERY another query
## shape (make bench QUERY=stateless), FORMAT=avro or FORMAT=protobuf values under a schema
## registry, each published in a section of its own (a --scaling run's plots too, in "How cost grows").
QUERY ?= count-by-key
FORMAT ?= json
bench: venv
	rm -rf bench && $(BIN)/cookiecutter --no-input --output-dir bench . query=$(QUERY)
	$(MAKE) -C bench/color-counts bench BENCH_ARGS='$(BENCH_ARGS) --format $(FORMAT)'
	$(PYTHON) .ci/publish_bench.py bench/color-counts/bench-out $(QUERY) $(FORMAT) '$(BENCH_ARGS)'

lint: venv
	$(BIN)/ruff check hooks tests .ci

clean:
	rm -rf $(VENV) demo bench
