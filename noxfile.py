"""The project's task runner: ``nox -s SESSION`` (``nox -l`` lists them).

Sessions:

- ``lint``: ruff check and ruff format --check.
- ``typecheck``: mypy --strict.
- ``tests``: the fast lane: every test that needs no compiled extension, model, server, database, browser,
  cluster or external data set (markers ``local_model``, ``server``, ``postgres``, ``browser``, ``ray``,
  ``shared_data`` deselected), skips forbidden as in CI. Extra arguments go to pytest: ``nox -s tests -- -k queue``.
- ``integration``: the README's one test command, ``bash scripts/test.sh`` (its own ``.venv`` with every extra,
  a throwaway PostgreSQL, chromium, ruff, mypy, the whole suite and ``mkdocs build --strict``), as CI runs it.
- ``docs``: ``mkdocs build --strict`` (a broken link or docstring reference fails), into ``site/``.
- ``bench``: a short run of the cheap benchmarks, or the benchmark given: ``nox -s bench -- benchmarks/X.py ...``.
- ``generate``: rewrite every generated file (reason and exit tables, CLI and API reference, JSON Schemas).

Environments: by default each session gets its own virtualenv under ``.nox/`` with the extras it needs (what
a fresh machine runs). ``nox -R -s tests`` reuses those virtualenvs and skips the installs (the fast way to
repeat a session). ``nox --no-venv -s tests`` runs in the current environment instead (e.g. an activated
``.venv`` made by ``scripts/test.sh``) and installs nothing.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import nox

nox.options.sessions = ["lint", "typecheck", "tests", "docs"]

LINT_PATHS = ["src", "tests", "benchmarks", "examples", "scripts", "docs/_griffe", "noxfile.py"]


def _declared_markers() -> list[str]:
    """The markers declared in pyproject.toml (``[tool.pytest.ini_options] markers``), in their order."""
    with (Path(__file__).parent / "pyproject.toml").open("rb") as handle:
        lines = tomllib.load(handle)["tool"]["pytest"]["ini_options"]["markers"]
    return [line.split(":", 1)[0].strip() for line in lines]


# The markers of tests that need more than pip-installed wheels (or minutes): every marker pyproject.toml declares.
# The fast lane deselects them; the list is read from there, so a new marker is deselected where it is declared.
HEAVY_MARKERS = _declared_markers()
FAST_LANE = "not (" + " or ".join(HEAVY_MARKERS) + ")"
# Every extra that installs from wheels alone: no compiler (llama-cpp-python is in local, server and bench), no
# model package (local, gemma, research). llguidance, of the local extra, is a wheel: the grammar tests need it.
WHEEL_EXTRAS = "openai,instructor,postgres,audit,ray,eval,review,dev,docs"
GRAMMAR = "llguidance>=1.0"


def _python(session: nox.Session) -> str:
    """The interpreter to run: the session's virtualenv's, or with ``--no-venv`` the one running nox."""
    return sys.executable if session.venv_backend == "none" else "python"


def _install(session: nox.Session, *args: str) -> None:
    """``pip install`` into the session's virtualenv; nothing with ``--no-venv`` (the environment is the caller's)."""
    if session.venv_backend == "none":
        session.log("no virtualenv (--no-venv): using the current environment, installing nothing")
        return
    session.install(*args)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff: lint and format check."""
    _install(session, "ruff>=0.6")
    session.run(_python(session), "-m", "ruff", "check", *LINT_PATHS)
    session.run(_python(session), "-m", "ruff", "format", "--check", *LINT_PATHS)


@nox.session
def typecheck(session: nox.Session) -> None:
    """Mypy --strict over the package (configuration in pyproject.toml)."""
    _install(session, "-e", f".[{WHEEL_EXTRAS}]", GRAMMAR)
    session.run(_python(session), "-m", "mypy")


@nox.session
def tests(session: nox.Session) -> None:
    """The fast lane: no compiled extension, model, server, database, browser, cluster or external data."""
    _install(session, "-e", f".[{WHEEL_EXTRAS}]", GRAMMAR)
    session.run(
        _python(session),
        "-m",
        "pytest",
        "-q",
        "-m",
        FAST_LANE,
        # one worker per core (pytest-xdist), a test file's tests on one worker: module fixtures stay shared
        "-n",
        "auto",
        "--dist",
        "loadfile",
        *session.posargs,
        env={"CITELOCK_NO_SKIP": "1"},
    )


@nox.session(venv_backend="none")
def integration(session: nox.Session) -> None:
    """Everything, exactly as CI runs it: the README's test command (scripts/test.sh makes its own .venv)."""
    session.run("bash", "scripts/test.sh", *session.posargs, external=True)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site strictly: a broken link, page or docstring reference fails."""
    _install(session, "-e", ".[docs]")
    # NO_MKDOCS_2_WARNING: Material's banner about a future MkDocs 2, not about this site.
    session.run(
        _python(session), "-m", "mkdocs", "build", "--strict", *session.posargs, env={"NO_MKDOCS_2_WARNING": "1"}
    )


@nox.session
def bench(session: nox.Session) -> None:
    """The cheap benchmarks, briefly; or one benchmark with its arguments (``nox -s bench -- benchmarks/X.py``)."""
    _install(session, "-e", ".[bench,audit]")
    if session.posargs:
        session.run(_python(session), *session.posargs)
        return
    session.run(_python(session), "benchmarks/bench_import.py", "--repeat", "3")
    session.run(_python(session), "benchmarks/bench_guard.py", "--answers", "50")
    session.run(_python(session), "benchmarks/bench_policy.py", "--per-class", "10")


@nox.session
def generate(session: nox.Session) -> None:
    """Rewrite every generated file: the reason and exit tables, the CLI and API reference, the JSON Schemas."""
    _install(session, "-e", f".[{WHEEL_EXTRAS}]")
    python = _python(session)
    session.run(python, "scripts/gen_reason_table.py")
    session.run(python, "scripts/gen_cli_reference.py")
    session.run(python, "scripts/gen_api_reference.py")
    session.run(python, "scripts/gen_config_reference.py")
    session.run(python, "-m", "citelock._jsonschema")
