# The template's two commands. Both do their own set-up (virtual environment, pip
# installs, Kafka jars through Maven); they need Python 3.11+, Java 17 and Maven.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: venv test demo lint clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements-dev.txt
	touch $@

## Run every test: the template's own, then the rendered project's full suite on a real Kafka.
test: venv
	$(BIN)/pytest tests

## Render a project with the default answers into demo/ and run its pipeline end to end.
demo: venv
	rm -rf demo && $(BIN)/cookiecutter --no-input --output-dir demo .
	$(MAKE) -C demo/color-counts demo

lint: venv
	$(BIN)/ruff check hooks tests

clean:
	rm -rf $(VENV) demo
