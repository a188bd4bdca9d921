# Recipes the README names. `just --list` shows them.
venv := ".venv"
py := venv / "bin/python"

# create the virtual environment and install localmem with its dev tools
setup:
    test -x {{py}} || python3 -m venv {{venv}}
    {{py}} -m pip install --quiet --upgrade pip
    {{py}} -m pip install --quiet -e '.[dev]'

# ingest the bundled sample conversation and reconstruct context for a question
demo: setup
    {{venv}}/bin/localmem demo

# run the test suite
test: setup
    {{py}} -m pytest

# format check, lint, type check, tests
check: setup
    {{venv}}/bin/ruff format --check .
    {{venv}}/bin/ruff check .
    {{venv}}/bin/mypy
    {{py}} -m pytest

# recall on LoCoMo dev data and latency at 10k turns (data lives outside the repo)
bench data="../shared/data/locomo_dev.json": setup
    {{venv}}/bin/localmem bench locomo --data {{data}}
    {{venv}}/bin/localmem bench latency --turns 10000
