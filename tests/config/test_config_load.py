"""``Config.load``: discovery, environment references, inherit, unknown keys, validation, precedence, the doors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import citelock
from citelock import Citelock, Config, FakeBackend, Guard, InputError, SurfacePolicy, UsageError
from citelock.config import STARTER, Origin, config_json_schema
from citelock.guard import AuditPlan

BASE = """\
store = "${DB_PATH}"
default_surface = "legal"

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
seed = 7

[surfaces.faq]
stakes = "low"
sample_rate = 0.25
on_fail = "mark"
"""


def _write(folder: Path, text: str, name: str = "citelock.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    return {"DB_PATH": str(tmp_path / "d.db")}


def test_discovery_walks_up_and_explicit_and_env_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    _write(
        project,
        '[tool.citelock]\ndefault_surface = "p"\n[tool.citelock.surfaces.p]\nstakes = "low"\n',
        "pyproject.toml",
    )
    _write(project / "src", "[tool.other]\nx = 1\n", "pyproject.toml")  # no [tool.citelock]: passed over
    monkeypatch.chdir(deep)
    found = Config.load(environ={})
    assert found.path == project / "pyproject.toml" and found.surface_names == ("p",)
    assert found.source is not None and found.source.how == "discovered"
    own = _write(project, 'default_surface = "c"\n[surfaces.c]\nstakes = "high"\n')
    assert Config.load(environ={}).path == own  # citelock.toml wins in the same folder
    other = _write(tmp_path, '[surfaces.e]\nstakes = "low"\n', "env.toml")
    assert Config.load(environ={"CITELOCK_CONFIG": str(other)}).surface_names == ("e",)
    explicit = _write(tmp_path, '[surfaces.x]\nstakes = "low"\n', "x.toml")
    assert Config.load(explicit, environ={"CITELOCK_CONFIG": str(other)}).surface_names == ("x",)


def test_no_file_is_every_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = Config.load(environ={})
    assert config.path is None and config.surface_names == () and config.store is None
    assert config.guard().policy is None  # the free checks
    with pytest.raises(UsageError, match="no surface named"):
        config.surface()
    with pytest.raises(InputError, match="no such file"):
        Config.load(tmp_path / "missing.toml")


def test_environment_references_and_a_missing_variable(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        'store = "postgresql://app:${PG_PW}@db/rag"\n[backends.up]\nkind = "openai"\n'
        'base_url = "http://127.0.0.1:9/v1"\napi_key = { env = "UPSTREAM_KEY" }\n',
    )
    config = Config.load(path, environ={"PG_PW": "s3cret", "UPSTREAM_KEY": "k-1"})
    assert config.store == "postgresql://app:s3cret@db/rag"
    assert config.backends["up"].api_key == "k-1"
    assert config.top_level()[0][2].variables == ("PG_PW",)
    with pytest.raises(InputError, match=r"citelock.toml:5: backends.up.api_key reads the environment variable "
                       r"UPSTREAM_KEY, which is not set"):  # fmt: skip
        Config.load(path, environ={"PG_PW": "x"})
    literal = _write(tmp_path, 'store = "a$${b}"\n', "lit.toml")
    assert Config.load(literal, environ={}).store == "a${b}"


def test_inherit_and_overrides_and_origins(tmp_path: Path) -> None:
    config = Config.load(_write(tmp_path, BASE), environ=_env(tmp_path))
    legal = config.surface("legal")
    assert legal.stakes == "high" and legal.on_fail == "drop_claim"  # inherited from base
    assert legal.audit == AuditPlan(near_pass_rate=1.0, pass_rate=1.0, seed=7)
    settings = config.surface_settings("legal", {"on_fail": "mark"}, flags={"on_fail": "--on-fail"})
    assert settings.policy.on_fail == "mark" and settings.origins["on_fail"] == Origin("flag", "--on-fail")
    stakes = settings.origins["stakes"]
    assert stakes.kind == "file" and stakes.line == 8 and stakes.inherited == "base"
    assert settings.origins["audit.seed"].line == 18
    assert config.surface("faq").sample_rate == 0.25
    with pytest.raises(UsageError, match="did you mean 'legal'"):
        config.surface("legel")
    with pytest.raises(UsageError, match=r"sample_rate must be 1\.0"):
        config.surface("legal", sample_rate=0.5)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[surfaces.a]\ninherit = "b"\n[surfaces.b]\ninherit = "a"\n', "inherit in a circle: a -> b -> a"),
        ('[surfaces.a]\ninherit = "bsae"\n[surfaces.base]\nstakes = "low"\n', "did you mean 'base'"),
        ('[surfaces.a]\nstakes = "hihg"\n', r"citelock.toml:2: surfaces.a.stakes: Input should be 'low' or 'high'"),
        ('[surfaces.a]\nsample_rate = "half"\n', "citelock.toml:2: surfaces.a.sample_rate"),
        ('[surfaces.a]\njudge = "overlpa"\n[judges.overlap]\nkind = "lexical"\n', "did you mean 'overlap'"),
        ('[surfaces.a]\nstakes = "high"\nsample_rate = 0.5\n', "sample_rate must be 1.0"),
        ('[judges.j]\nkind = "lexical"\nbase_url = "http://x"\n', "base_url and model are for kind 'llm'"),
        ('default_surface = "nope"\n', "default_surface = 'nope': no such entry"),
        ('[surfaces.a]\nrelevance_judge = "j"\n[judges.j]\nkind = "lexical"\n', "of kind 'llm' with a base_url"),
        ("store = [\n", "not valid TOML"),
        ('[surfaces.a]\nrelevance = "judged"\n', "citelock.toml:2: surfaces.a.relevance = 'judged' asks a relevance"),
    ],
)
def test_a_bad_file_names_the_key_and_what_is_allowed(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(InputError, match=expected):
        Config.load(_write(tmp_path, text), environ={})


def test_unknown_keys_warn_with_line_and_suggestion_and_strict_refuses(tmp_path: Path) -> None:
    path = _write(tmp_path, '[surfaces.legal]\nstakes = "high"\nstakse = "low"\n[surface.x]\n')
    config = Config.load(path, environ={})
    messages = [str(w) for w in config.warnings]
    assert messages == [
        f"{path}:3: unknown key surfaces.legal.stakse; did you mean 'stakes'?",
        f"{path}:4: unknown key surface; did you mean 'surfaces'?",
    ]
    assert config.surface("legal").stakes == "high"  # the unknown key is left out, the rest applies
    with pytest.raises(InputError, match=r"stakse; did you mean 'stakes'\?.*--strict"):
        Config.load(path, strict=True, environ={})


def test_pyproject_lines_are_counted_from_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, '[project]\nname = "x"\n\n[tool.citelock.surfaces.s]\nstaks = "low"\n', "pyproject.toml")
    (warning,) = Config.load(path, environ={}).warnings
    assert str(warning) == f"{path}:5: unknown key surfaces.s.staks; did you mean 'stakes'?"


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    config = Config.load(_write(tmp_path, BASE), environ={**_env(tmp_path), "CITELOCK_DB": "/elsewhere.db"})
    assert config.store == "/elsewhere.db"
    assert (
        Config.load(_write(tmp_path, BASE), environ={**_env(tmp_path), "CITELOCK_SURFACE": "faq"}).default_surface
        == "faq"
    )


def test_inline_thresholds_and_routing_files(tmp_path: Path) -> None:
    from citelock.judges import make_judge
    from citelock.judges._routing import Routing

    judge = make_judge("lexical")
    routing = Routing(pass_at=0.7, fail_below=0.2, judge=judge.name, judge_version=judge.version)
    calibration = {"schema_version": "1", "surfaces": {"*": json.loads(routing.model_dump_json())}}
    (tmp_path / "cal.json").write_text(json.dumps(calibration), encoding="utf-8")
    text = (
        '[judges.t]\nkind = "lexical"\nthresholds = { pass_at = 0.6, fail_below = 0.3 }\n'
        '[surfaces.a]\nstakes = "high"\njudge = "t"\n[surfaces.b]\nstakes = "high"\njudge = "t"\nrouting = "cal.json"\n'
    )
    config = Config.load(_write(tmp_path, text), environ={})
    a = config.surface("a").routing
    assert a is not None and (a.pass_at, a.fail_below, a.judge) == (0.6, 0.3, "lexical")
    b = config.surface("b").routing
    assert b is not None and b.pass_at == 0.7  # the surface's routing file (relative to the config) wins
    Guard.from_config(config, "a")  # the routing applies to the judge it names


def test_the_doors_build_equal_policies(tmp_path: Path) -> None:
    config = Config.load(_write(tmp_path, BASE), environ=_env(tmp_path))
    expected = config.surface("legal")
    assert Guard.from_config(config, "legal").policy == expected
    client = Citelock.from_config(config, surface="legal", backend=FakeBackend(["{}"]))
    assert client.guard.policy == expected
    assert client.log is not None and len(client.sinks) == 2  # the store's queue and results
    assert Citelock.from_config(config, backend=FakeBackend(["{}"])).guard.policy == expected  # default_surface

    openai = pytest.importorskip("openai")
    wrapped = citelock.wrap(openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x"), config=config)
    assert wrapped.citelock.guard.policy == expected
    with pytest.raises(UsageError, match=r"citelock\.Config"):
        Guard.from_config("citelock.toml")  # type: ignore[arg-type]


def test_from_config_keyword_arguments_win(tmp_path: Path) -> None:
    config = Config.load(_write(tmp_path, BASE), environ=_env(tmp_path))
    mine = Guard(SurfacePolicy(name="mine", stakes="low", sample_rate=0.0))
    client = Citelock.from_config(config, surface="legal", guard=mine, backend=FakeBackend(["{}"]), sinks=())
    assert client.guard is mine and client.sinks == ()


def test_the_starter_file_is_valid_and_has_a_high_and_a_low_surface(tmp_path: Path) -> None:
    config = Config.load(_write(tmp_path, STARTER), strict=True, environ={})
    stakes = {name: config.surface(name).stakes for name in config.surface_names}
    assert set(stakes.values()) == {"high", "low"}
    assert config.surface("legal").audit is not None


def test_the_committed_schema_is_the_model_and_accepts_the_starter(tmp_path: Path) -> None:
    import tomllib

    import jsonschema

    from citelock._jsonschema import schemas_dir

    committed = json.loads((schemas_dir() / "config.v1.json").read_text(encoding="utf-8"))
    assert committed == config_json_schema(), "schemas/config.v1.json is stale: run python -m citelock._jsonschema"
    jsonschema.validate(tomllib.loads(STARTER), committed)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"surfaces": {"a": {"stakse": "high"}}}, committed)
    jsonschema.validate({"store": {"env": "PG_URL"}}, committed)
