"""Every door of the command line reads the config file (real runs of the app on a real SQLite store)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from citelock import Citelock, Config, FakeBackend
from citelock.cli import app
from citelock.store import ResultStore, ReviewQueue
from support.audit_rows import make_rows, write_jsonl

runner = CliRunner()

CONFIG = """\
store = "${DB_PATH}"

[judges.overlap]
kind = "lexical"

[surfaces.base]
stakes = "high"
on_fail = "drop_claim"

[surfaces.legal]
inherit = "base"
judge = "overlap"

[surfaces.legal.audit]
near_pass_rate = 1.0
pass_rate = 1.0
review_rate = 1.0
fail_rate = 1.0
seed = 3

[surfaces.legal.alarms]
window = 2
min_labels = 5

[surfaces.faq]
stakes = "low"
sample_rate = 0.0
on_fail = "mark"
"""

PROMPT = {
    "messages": [
        {"role": "system", "content": "Answer from the context."},
        {
            "role": "user",
            "content": "Context:\n[c-1] The turbine was serviced in March.\n[c-2] The bridge opened in 1932."
            "\nQuestion: When was the turbine serviced?",
        },
    ],
    "chunks": [
        {"id": "c-1", "text": "The turbine was serviced in March."},
        {"id": "c-2", "text": "The bridge opened in 1932."},
    ],
    "question": "When was the turbine serviced?",
}
ANSWER = {
    "claims": [
        {"text": "The turbine was serviced in March.", "citations": [{"chunk_id": "c-1", "span": "serviced in March"}]},
        {"text": "The bridge opened in 1932.", "citations": [{"chunk_id": "c-2", "span": "opened in 1932"}]},
    ]
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding citelock.toml, the prompt and the answer; the working directory, with DB_PATH set."""
    (tmp_path / "citelock.toml").write_text(CONFIG, encoding="utf-8")
    (tmp_path / "p.json").write_text(json.dumps(PROMPT), encoding="utf-8")
    (tmp_path / "a.json").write_text(json.dumps(ANSWER), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DB_PATH", str(tmp_path / "store.db"))
    monkeypatch.delenv("CITELOCK_DB", raising=False)
    monkeypatch.delenv("CITELOCK_CONFIG", raising=False)
    monkeypatch.delenv("CITELOCK_SURFACE", raising=False)
    return tmp_path


def _cli(*args: Any) -> Any:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _rows(db: Path, table: str) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        names = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
        return conn.execute(f"select count(*) from {table}").fetchone()[0] if table in names else 0


def test_check_runs_the_inherited_surface_and_queues_the_audit_samples(project: Path) -> None:
    db = project / "d.db"
    result = _cli("check", "--prompt", "p.json", "--answer", "a.json", "--surface", "legal", "--db", db, "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    policy = data["policy"]
    assert policy["name"] == "legal" and policy["stakes"] == "high" and policy["on_fail"] == "drop_claim"
    assert policy["audit"] == {"near_pass_rate": 1.0, "pass_rate": 1.0, "near_band": 0.1, "review_rate": 1.0,
                               "fail_rate": 1.0, "seed": 3}  # fmt: skip
    judged = len(data["routes"])
    assert judged == 2  # both citations passed the free checks and were judged
    entries = ReviewQueue(db).items(surface="legal")
    audit = [e for e, _ in entries if e.reason.value == "AUDIT_SAMPLE"]
    assert len(audit) == judged  # every rate is 1: the plan samples every judged citation
    assert {e.claim_index for e in audit} == {0, 1}
    (stored,) = ResultStore(db).latest(surface="legal")
    assert stored.policy is not None and stored.policy.audit is not None and stored.policy.audit.seed == 3
    # the same file read through the library's doors yields the same policy
    config = Config.load()
    assert Citelock.from_config(config, surface="legal", backend=FakeBackend(["{}"])).guard.policy == stored.policy
    openai = pytest.importorskip("openai")
    import citelock

    wrapped = citelock.wrap(
        openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x"), config=config, surface="legal"
    )
    assert wrapped.citelock.guard.policy == stored.policy


def test_a_flag_overrides_one_key_and_the_store_comes_from_the_config(project: Path) -> None:
    result = _cli(
        "check", "--prompt", "p.json", "--answer", "a.json", "--surface", "legal", "--on-fail", "mark", "--json"
    )
    assert result.exit_code == 0, result.stderr
    policy = json.loads(result.stdout)["policy"]
    assert policy["on_fail"] == "mark" and policy["stakes"] == "high" and policy["audit"]["seed"] == 3
    assert _rows(project / "store.db", "queue_events") > 0 or ReviewQueue(project / "store.db").items()


def test_an_unknown_surface_is_refused_with_a_suggestion(project: Path) -> None:
    result = _cli("check", "--prompt", "p.json", "--answer", "a.json", "--surface", "legel", "--db", project / "d.db")
    assert result.exit_code == 2
    assert "surface 'legel' is not in" in result.stderr and "did you mean 'legal'?" in result.stderr
    assert not (project / "d.db").exists()


def test_config_check_reports_a_misspelled_key_and_strict_exits_2(project: Path) -> None:
    text = CONFIG.replace('inherit = "base"\n', 'inherit = "base"\nstakse = "low"\n')
    (project / "citelock.toml").write_text(text, encoding="utf-8")
    line = text.splitlines().index('stakse = "low"') + 1
    result = _cli("config", "check")
    assert result.exit_code == 0, result.stderr
    expected = f"{project / 'citelock.toml'}:{line}: unknown key surfaces.legal.stakse; did you mean 'stakes'?"
    assert expected in result.stderr
    strict = _cli("config", "check", "--strict")
    assert strict.exit_code == 2 and expected in strict.stderr
    # a command run on it warns the same way and still runs; nothing reached the store from config check
    assert not (project / "store.db").exists()


def test_a_wrong_type_exits_2_naming_the_key_and_writes_nothing(project: Path) -> None:
    text = CONFIG.replace('stakes = "low"', 'stakes = "medium"')
    (project / "citelock.toml").write_text(text, encoding="utf-8")
    line = text.splitlines().index('stakes = "medium"') + 1
    result = _cli("config", "check")
    assert result.exit_code == 2
    assert f"citelock.toml:{line}: surfaces.faq.stakes: Input should be 'low' or 'high'" in result.stderr
    db = project / "d.db"
    for args in (
        ("check", "--prompt", "p.json", "--answer", "a.json", "--surface", "legal", "--db", db),
        ("audit", write_jsonl(project / "rows.jsonl", make_rows(3)), "--out", project / "out", "--surface", "legal"),
    ):
        failed = _cli(*args)
        assert failed.exit_code == 2, failed.stderr
        assert "surfaces.faq.stakes" in failed.stderr
    assert not db.exists() and not (project / "store.db").exists() and not (project / "out").exists()


def test_config_show_names_the_origin_of_each_value(project: Path) -> None:
    result = _cli("config", "show", "--surface", "legal")
    assert result.exit_code == 0, result.stderr
    path = project / "citelock.toml"
    lines = result.stdout.splitlines()

    def origin(key: str) -> str:
        (row,) = [r for r in lines if f" {key} = " in r]
        return row.split(f" {key} = ")[0].strip()

    text = CONFIG.splitlines()
    STAKES, JUDGE, ON_FAIL = 'stakes = "high"', 'judge = "overlap"', 'on_fail = "drop_claim"'

    def line(row: str) -> int:
        return text.index(row) + 1

    assert origin("store") == f"file {path}:1 (env DB_PATH)"
    assert origin("surfaces.legal.stakes") == f"file {path}:{line(STAKES)} (inherited from base)"
    assert origin("surfaces.legal.judge") == f"file {path}:{line(JUDGE)}"
    assert origin("surfaces.legal.audit.seed") == f"file {path}:{line('seed = 3')}"
    assert origin("surfaces.legal.sample_rate") == "default"
    as_json = json.loads(_cli("config", "show", "--surface", "legal", "--json").stdout)
    on_fail = f"file {path}:{line(ON_FAIL)} (inherited from base)"
    assert {"key": "surfaces.legal.on_fail", "value": "drop_claim", "origin": on_fail} in as_json["values"]


def test_config_init_writes_a_starter_that_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert _cli("config", "init").exit_code == 0
    assert _cli("config", "init").exit_code == 2  # never overwrites without --force
    checked = _cli("config", "check", "--strict")
    assert checked.exit_code == 0, checked.stderr
    assert "2 surfaces" in checked.stdout


def test_metrics_takes_the_surface_alarms_from_the_config(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from citelock.cli import _metrics

    seen: dict[str, Any] = {}
    real = _metrics.live_rates_from_store

    def spy(target: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return real(target, **kwargs)

    monkeypatch.setattr(_metrics, "live_rates_from_store", spy)
    assert _cli("check", "--prompt", "p.json", "--answer", "a.json", "--surface", "legal").exit_code == 0
    result = _cli("metrics", "--surface", "legal", "--json")
    assert result.exit_code == 0, result.stderr
    assert (seen["window"], seen["min_labels"]) == (2, 5)
    assert _cli("metrics", "--surface", "legal", "--window", "3", "--json").exit_code == 0
    assert seen["window"] == 3  # the flag wins
    listed = json.loads(_cli("queue", "list", "--surface", "legal", "--json").stdout)  # the store from the config
    assert listed["counts"] == {"AUDIT_SAMPLE": 2}


def test_audit_writes_the_plan_samples_from_the_cli(project: Path) -> None:
    rows = write_jsonl(project / "rows.jsonl", make_rows(4))
    result = _cli("audit", rows, "--out", project / "out", "--surface", "legal", "--processes", 1, "--json")
    assert result.exit_code in (0, 1), result.stderr
    results = ResultStore(project / "store.db").latest(surface="legal")
    assert results and all(r.policy is not None and r.policy.audit is not None for r in results)
    sampled = sum(len(r.audit.samples) for r in results if r.audit is not None)
    queued = [e for e, _ in ReviewQueue(project / "store.db").items() if e.reason.value == "AUDIT_SAMPLE"]
    assert sampled > 0 and len(queued) == sampled
    manifest = json.loads((project / "out" / "_manifest.json").read_text(encoding="utf-8"))
    assert manifest["settings"]["policy"]["audit"]["seed"] == 3


def test_the_notice_names_the_config_key_to_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "citelock.toml").write_text('[surfaces.docs]\nstakes = "high"\njudge = "lexical"\n', encoding="utf-8")
    (tmp_path / "p.json").write_text(json.dumps(PROMPT), encoding="utf-8")
    (tmp_path / "a.json").write_text(json.dumps(ANSWER), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = _cli("check", "--prompt", "p.json", "--answer", "a.json", "--surface", "docs")
    (notice,) = [line for line in result.stderr.splitlines() if line.startswith("notice:")]
    assert "set [surfaces.docs.audit] in" in notice and "--from-store" in notice


def test_with_no_config_file_the_flags_alone_still_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "p.json").write_text(json.dumps(PROMPT), encoding="utf-8")
    (tmp_path / "a.json").write_text(json.dumps(ANSWER), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CITELOCK_CONFIG", raising=False)
    args = ["check", "--prompt", "p.json", "--answer", "a.json", "--surface", "docs", "--stakes", "high"]
    result = _cli(*args, "--on-fail", "drop_claim", "--judge", "lexical", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["policy"]["on_fail"] == "drop_claim"
    (notice,) = [line for line in result.stderr.splitlines() if line.startswith("notice:")]
    assert "[surfaces.docs.audit] in citelock.toml" in notice
    assert _cli("config", "show").stdout.startswith("# config file: (none found: defaults)")


@pytest.mark.local_model
def test_the_readme_main_command_runs_with_no_config(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (line,) = [row for row in readme.splitlines() if "&& citelock answer" in row]
    command = line.split("&& citelock answer", 1)[1].split()
    corpus = Path(__file__).resolve().parents[2] / "examples" / "corpus.jsonl"
    args = [str(corpus) if a == "examples/corpus.jsonl" else a for a in command]
    question = " ".join(args[args.index("-q") + 1 : args.index("--chunks")]).strip('"')
    args = [args[0], question, *args[args.index("--chunks") :]] if args[0] == "-q" else args
    done = subprocess.run(
        [sys.executable, "-m", "citelock", "answer", *args, "--db", str(tmp_path / "log.db")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in __import__("os").environ.items() if not k.startswith("CITELOCK_")},
    )
    assert done.returncode in (0, 1), done.stderr
    assert "guard:" in done.stdout and "surface docs" in done.stdout
    assert "[surfaces.docs.audit]" in done.stderr  # the notice names the key to set


def test_answer_runs_the_configured_surface_and_backend_and_queues_audit_samples(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citelock.backends import _registry

    made: list[tuple[str, dict[str, Any]]] = []

    def make(kind: str, **options: Any) -> FakeBackend:
        made.append((kind, options))
        span = "The turbine was serviced in March."
        answer = {"claims": [{"text": span, "citations": [{"chunk_id": "c-1", "span": span}]}]}
        return FakeBackend([answer])

    monkeypatch.setattr(_registry, "make_backend", make)
    monkeypatch.setenv("UP_KEY", "k-9")
    text = (
        CONFIG + '\n[backends.up]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key = { env = "UP_KEY" }\n'
    )
    (project / "citelock.toml").write_text(text, encoding="utf-8")
    chunks = project / "chunks.jsonl"
    chunks.write_text("\n".join(json.dumps(c) for c in PROMPT["chunks"]) + "\n", encoding="utf-8")
    args = ["answer", "-q", "When was the turbine serviced?", "--chunks", chunks, "--surface", "legal", "--json"]
    result = _cli(*args, "--backend", "up", "--policy", "substring")
    assert result.exit_code == 0, result.stderr
    assert made == [("openai", {"base_url": "http://127.0.0.1:9/v1", "api_key": "k-9"})]
    data = json.loads(result.stdout)
    assert data["result"]["policy"]["audit"]["seed"] == 3
    queued = [e for e, _ in ReviewQueue(project / "store.db").items() if e.reason.value == "AUDIT_SAMPLE"]
    assert len(queued) == 1 and queued[0].request_id == data["request_id"]  # logged in the config's store
    unknown = _cli(*args, "--backend", "uup")
    assert unknown.exit_code == 2 and "unknown backend 'uup'" in unknown.stderr and "up" in unknown.stderr


def test_judge_flag_may_name_a_config_judge_and_server_judges_are_built(project: Path) -> None:
    text = CONFIG + '\n[judges.rel]\nkind = "llm"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    text = text.replace(
        "[surfaces.faq]\n", '[surfaces.faq]\nrelevance = "judged"\nrelevance_judge = "rel"\nescalate = "rel"\n'
    )
    (project / "citelock.toml").write_text(text, encoding="utf-8")
    config = Config.load()
    guard = config.guard("faq")
    assert guard.relevance_judge is not None and guard.escalate is not None  # built, not called
    result = _cli("check", "--prompt", "p.json", "--answer", "a.json", "--surface", "faq", "--judge", "overlap",
                  "--stakes", "high", "--sample-rate", "1", "--relevance", "free", "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["policy"]["stakes"] == "high" and data["policy"]["on_fail"] == "mark"
    assert {r["route"] for r in data["routes"]} == {"pass"}  # the overlap judge named by --judge ran
