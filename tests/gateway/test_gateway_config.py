"""The gateway on a config file (``citelock gateway --config``): its surfaces, their judges and show policies, the
store, and an ``openai`` backend as the upstream (its key read from the environment by each worker)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from citelock.cli import app
from citelock.errors import InputError
from citelock.gateway import DEFAULT_REFUSAL, GatewaySettings, create_app
from support.fake_upstream import CHUNKS, fake_upstream
from support.gateway_server import served

CONFIG = """\
store = "{db}"
default_surface = "support"

[judges.overlap]
kind = "lexical"

[backends.up]
kind = "openai"
base_url = "{url}"
server = "llama.cpp"
api_key = {{ env = "GW_TEST_UPSTREAM_KEY" }}

[surfaces.legal]
stakes = "high"
on_fail = "drop_claim"
judge = "overlap"

[surfaces.legal.stream]
show = "after_checks"

[surfaces.support]
stakes = "low"
sample_rate = 0.0
"""


def test_the_config_s_surfaces_store_and_backend_are_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GW_TEST_UPSTREAM_KEY", "sk-from-env")
    with fake_upstream() as upstream:
        path = tmp_path / "citelock.toml"
        path.write_text(CONFIG.format(db=tmp_path / "cfg.db", url=upstream.url), encoding="utf-8")
        settings = GatewaySettings.from_config(str(path), backend="up", on_block="refuse")
        assert set(settings.surfaces) == {"legal", "support"} and settings.default_surface == "support"
        assert settings.db == str(tmp_path / "cfg.db")
        assert settings.surfaces["legal"].show == "after_checks" and settings.surfaces["legal"].on_block == "refuse"
        with served(create_app(settings)) as url:
            body = {"model": "good", "messages": [{"role": "user", "content": "When does the ferry leave Arden?"}]}
            legal = httpx.post(
                f"{url}/v1/chat/completions", json={**body, "citelock": {"chunks": CHUNKS, "surface": "legal"}}
            )
            assert legal.status_code == 200, legal.text
            record = legal.json()["citelock"]
            assert legal.headers["x-citelock-surface"] == "legal"
            assert record["result"]["policy"]["stakes"] == "high"
            assert {s["judge"] for s in record["result"]["support"]} == {"lexical"}  # the config's judge ran
            plain = httpx.post(f"{url}/v1/chat/completions", json={**body, "citelock": {"chunks": CHUNKS}})
            assert plain.headers["x-citelock-surface"] == "support"
        assert set(upstream.authorizations) == {"Bearer sk-from-env"}
    assert (tmp_path / "cfg.db").is_file()


def test_config_flags_that_do_not_fit_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GW_TEST_UPSTREAM_KEY", "sk-from-env")
    path = tmp_path / "citelock.toml"
    path.write_text(CONFIG.format(db=tmp_path / "x.db", url="http://127.0.0.1:9/v1"), encoding="utf-8")
    runner = CliRunner()
    done = runner.invoke(app, ["gateway", "--config", str(path), "--stakes", "low"])
    assert done.exit_code == 2 and "--stakes" in done.output and "the file's" in done.output
    done = runner.invoke(app, ["gateway", "--backend", "up"])
    assert done.exit_code == 2 and "give --config too" in done.output
    done = runner.invoke(app, ["gateway", "--config", str(path), "--backend", "nope"])
    assert done.exit_code == 2 and "--backend nope" in done.output


def test_on_block_and_the_refusal_text_are_surface_keys_of_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citelock.config import Config

    monkeypatch.setenv("GW_TEST_UPSTREAM_KEY", "sk-from-env")
    path = tmp_path / "citelock.toml"
    text = CONFIG.format(db=tmp_path / "x.db", url="http://127.0.0.1:9/v1")
    text += '\n[surfaces.legal.gateway]\non_block = "refuse"\nrefusal = "Please ask the clerk."\n'
    path.write_text(text, encoding="utf-8")
    settings = GatewaySettings.from_config(str(path))
    legal, support = settings.surfaces["legal"], settings.surfaces["support"]
    assert (legal.on_block, legal.refusal) == ("refuse", "Please ask the clerk.")
    assert (support.on_block, support.refusal) == ("error", DEFAULT_REFUSAL)  # unset: the defaults
    flagged = GatewaySettings.from_config(str(path), on_block="error")  # a flag wins over the file
    assert (
        flagged.surfaces["legal"].on_block == "error" and flagged.surfaces["legal"].refusal == "Please ask the clerk."
    )
    rows = {key: (value, origin) for key, value, origin in Config.load(path).surface_settings("legal").rows()}
    assert rows["gateway.on_block"][0] == "refuse" and rows["gateway.on_block"][1].kind == "file"
    assert rows["gateway.refusal"][0] == "Please ask the clerk."
    path.write_text(text.replace('on_block = "refuse"', 'on_block = "shrug"'), encoding="utf-8")
    with pytest.raises(InputError, match="on_block"):
        GatewaySettings.from_config(str(path))
