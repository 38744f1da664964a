"""``citelock gateway key create|list|revoke`` and the settings ``citelock gateway`` builds from its options."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from citelock.cli import app
from citelock.cli._gateway import _settings
from citelock.gateway import KEY_PREFIX, GatewayKeys, GatewaySettings

runner = CliRunner()


def test_key_create_prints_the_key_once_on_the_last_line_and_stores_only_its_hash(tmp_path: Path) -> None:
    db = tmp_path / "gw.db"
    done = runner.invoke(app, ["gateway", "key", "create", "--db", str(db), "--surface", "support", "--surface", "kb"])
    assert done.exit_code == 0, done.output
    secret = done.output.strip().splitlines()[-1]
    assert secret.startswith(KEY_PREFIX) and len(secret) > 40
    key = GatewayKeys(db).lookup(secret)
    assert key is not None and key.surfaces == ("support", "kb")
    assert key.allows("kb") and not key.allows("legal")
    assert secret.encode() not in db.read_bytes()  # only the SHA-256 is stored
    listed = runner.invoke(app, ["gateway", "key", "list", "--db", str(db)])
    assert key.key_id in listed.output and secret not in listed.output and "active" in listed.output
    revoked = runner.invoke(app, ["gateway", "key", "revoke", "--db", str(db), key.key_id])
    assert revoked.exit_code == 0 and GatewayKeys(db).lookup(secret) is None
    assert GatewayKeys(db).any()  # the gateway stays locked after its last key is revoked
    again = runner.invoke(app, ["gateway", "key", "revoke", "--db", str(db), key.key_id])
    assert again.exit_code == 2 and "no active gateway key" in again.output


def test_key_create_refuses_a_bad_surface_name(tmp_path: Path) -> None:
    done = runner.invoke(app, ["gateway", "key", "create", "--db", str(tmp_path / "gw.db"), "--surface", "no spaces"])
    assert done.exit_code == 2 and "surface name 'no spaces' is not valid" in done.output


def test_the_options_build_the_settings_every_worker_gets() -> None:
    built = _settings(["support", "kb"], "low", 0.0, "drop_claim", "refuse", "after_checks", "quote", "x.db",
                      "http://127.0.0.1:9/v1", "vllm", None, 30.0)  # fmt: skip
    assert isinstance(built, GatewaySettings)
    assert built.default_surface == "support" and set(built.surfaces) == {"support", "kb"}
    surface = built.surfaces["kb"]
    assert surface.policy.sample_rate == 0.0 and surface.policy.on_fail == "drop_claim"
    assert surface.on_block == "refuse" and surface.show == "after_checks" and surface.span_policy == "quote"
    assert GatewaySettings.model_validate_json(built.model_dump_json()) == built  # what --workers N hands over


def test_bad_options_exit_2_naming_the_option(tmp_path: Path) -> None:
    import typer

    with pytest.raises(typer.Exit) as caught:
        _settings(["s"], "medium", None, "block", "error", None, "substring", "x.db", None, None, None, 1.0)
    assert caught.value.exit_code == 2
    done = runner.invoke(app, ["gateway", "--db", str(tmp_path / "x.db"), "--on-block", "explode"])
    assert done.exit_code == 2 and "on_block" in done.output


def test_no_key_id_starts_with_a_dash_so_revoke_always_parses(tmp_path: Path) -> None:
    keys = GatewayKeys(tmp_path / "ids.db")
    secrets = [keys.create(["support"]) for _ in range(300)]  # 1 in 64 random ids began with '-'
    ids = [key.key_id for key in map(keys.lookup, secrets) if key is not None]
    assert len(ids) == 300 and all(not key_id.startswith("-") for key_id in ids)
