"""``citelock gateway``: serve the OpenAI-compatible guard gateway; ``citelock gateway key create|list|revoke``.

With no ``--upstream`` the gateway serves the bundled model, so ``citelock gateway`` works on a fresh machine.
The surfaces come from ``--surface NAME`` (repeatable; the first is the default) with ``--stakes``,
``--on-fail``, ``--on-block`` and ``--show`` applied to each; with ``--config`` they are the file's (what a
blocked answer becomes: each surface's ``[surfaces.NAME.gateway]`` keys ``on_block`` and ``refusal``;
``--on-block`` wins over them). The upstream's API key is read from ``$CITELOCK_UPSTREAM_API_KEY`` and never
leaves the gateway.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, get_args

import typer
from pydantic import ValidationError

from citelock.cli._app import app
from citelock.cli._io import fail
from citelock.constraint import DEFAULT_POLICY, SpanPolicy
from citelock.errors import InputError
from citelock.guard import SurfacePolicy

__all__ = ["gateway_app"]

gateway_app = typer.Typer(
    help="The guard gateway: an OpenAI-compatible endpoint that constrains and guards every answer's citations.",
    invoke_without_command=True,
)
app.add_typer(gateway_app, name="gateway")
key_app = typer.Typer(help="Gateway API keys (stored hashed; each limited to named surfaces).", no_args_is_help=True)
gateway_app.add_typer(key_app, name="key")

_DEFAULT_DB = str(Path(".citelock") / "citelock.db")
DbOption = Annotated[
    str | None,
    typer.Option("--db", help=f"the store: SQLite path or PostgreSQL URL (default: $CITELOCK_DB or {_DEFAULT_DB})"),
]


def _db(db: str | None) -> str:
    return db or os.environ.get("CITELOCK_DB") or _DEFAULT_DB


def _settings(
    surfaces: list[str],
    stakes: str,
    sample_rate: float | None,
    on_fail: str,
    on_block: str,
    show: str | None,
    policy: str,
    db: str,
    upstream: str | None,
    server: str | None,
    model: str | None,
    timeout: float,
) -> object:
    from citelock.gateway import GatewaySettings, GatewaySurface

    if stakes not in ("low", "high"):
        fail(f"--stakes must be low or high, got {stakes!r}")
    if policy not in get_args(SpanPolicy):
        fail(f"--policy must be one of {', '.join(get_args(SpanPolicy))}, got {policy!r}")
    rate = {} if sample_rate is None else {"sample_rate": sample_rate}
    try:
        built = {
            name: GatewaySurface(
                policy=SurfacePolicy(name=name, stakes=stakes, on_fail=on_fail, **rate),
                on_block=on_block,
                show=show,
                span_policy=policy,
            )
            for name in surfaces
        }
        return GatewaySettings(
            surfaces=built, default_surface=surfaces[0], db=db, upstream=upstream, server=server, model=model,
            limits={"timeout_s": timeout},
        )  # fmt: skip
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        fail(f"invalid gateway settings: {problems}")


def _configured(
    path: Path,
    on_block: str | None,
    policy: str,
    db: str | None,
    upstream: str | None,
    server: str | None,
    model: str | None,
    backend: str | None,
    timeout: float,
) -> object:
    from citelock.gateway import GatewaySettings

    if backend is not None and upstream is not None:
        fail("--backend and --upstream both name the upstream; give one")
    try:
        settings = GatewaySettings.from_config(
            str(path), on_block=on_block, span_policy=policy, db=db or os.environ.get("CITELOCK_DB"),  # type: ignore[arg-type]
            upstream=upstream, server=server, model=model, backend=backend, limits={"timeout_s": timeout},
        )  # fmt: skip
    except InputError as exc:
        fail(str(exc))
    except ValidationError as exc:
        fail(f"invalid gateway settings: {'; '.join(e['msg'] for e in exc.errors())}")
    if settings.db is None:
        settings = settings.model_copy(update={"db": _DEFAULT_DB})
    if backend is not None:
        from citelock.config import Config

        entry = Config.load(path).backends.get(backend)
        if entry is None or entry.kind != "openai" or entry.base_url is None:
            fail(f"--backend {backend}: expected an [backends.{backend}] entry with kind = 'openai' and a base_url")
    return settings


@gateway_app.callback()
def gateway(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="interface to bind; 127.0.0.1 keeps it on this machine")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="port")] = 8400,
    workers: Annotated[int, typer.Option(min=1, help="worker processes (stateless; they share the store)")] = 1,
    db: DbOption = None,
    upstream: Annotated[
        str | None,
        typer.Option(
            "--upstream", help="upstream OpenAI-compatible base URL, http://HOST:PORT/v1 (none: bundled model)"
        ),
    ] = None,
    server: Annotated[
        str | None,
        typer.Option("--server", help="the upstream's kind: openai, vllm, sglang, llama.cpp, llama-cpp-python"),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="model sent upstream when a request names none")] = None,
    surface: Annotated[
        list[str] | None, typer.Option("--surface", help="a surface to serve (repeatable; the first is the default)")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="citelock.toml: its surfaces (policies, judges, show) and store are served"),
    ] = None,
    backend: Annotated[
        str | None, typer.Option("--backend", help="an openai [backends.NAME] of --config as the upstream")
    ] = None,
    stakes: Annotated[
        str | None, typer.Option("--stakes", help="high (judge every citation) or low [default: high]")
    ] = None,
    sample_rate: Annotated[
        float | None,
        typer.Option(
            "--sample-rate", min=0.0, max=1.0, help="low stakes: the fraction of citations judged (0: free checks only)"
        ),
    ] = None,
    on_fail: Annotated[str | None, typer.Option("--on-fail", help="block, drop_claim or mark [default: block]")] = None,
    on_block: Annotated[
        str | None,
        typer.Option(
            "--on-block",
            help="error (HTTP 400) or refuse (200, refusal) [default: the config's gateway.on_block, else error]",
        ),
    ] = None,
    show: Annotated[
        str | None, typer.Option("--show", help="streams: immediately, after_checks or after_judge")
    ] = None,
    policy: Annotated[str, typer.Option("--policy", help="span policy when a request names none")] = DEFAULT_POLICY,
    timeout: Annotated[float, typer.Option("--timeout", min=0.001, help="per-request time limit, seconds")] = 120.0,
) -> None:
    """Serve the guard gateway on HOST:PORT until Ctrl-C.

    POST /v1/chat/completions takes a chat completion body plus {"citelock": {"chunks": [...], "surface": NAME,
    "policy": POLICY}}; GET /v1/models, /healthz and /readyz answer too. Once a key exists (citelock gateway key
    create) every request needs 'Authorization: Bearer KEY'.
    """
    if ctx.invoked_subcommand is not None:
        return
    from citelock.gateway import serve

    if config is not None:
        given = [f"--{n}" for n, v in (("stakes", stakes), ("sample-rate", sample_rate), ("on-fail", on_fail),
                                       ("show", show)) if v is not None]  # fmt: skip
        if given or surface:
            fail(f"{', '.join(given + ['--surface'] * bool(surface))}: with --config the surfaces are the file's")
        settings = _configured(config, on_block, policy, db, upstream, server, model, backend, timeout)
    else:
        if backend is not None:
            fail("--backend names a [backends.NAME] entry of a config file: give --config too")
        surfaces = surface or ["default"]
        settings = _settings(
            surfaces, stakes or "high", sample_rate, on_fail or "block", on_block or "error", show, policy, _db(db),
            upstream, server, model, timeout,
        )  # fmt: skip
    where = upstream or (f"backend {backend}" if backend else "the bundled model")
    typer.echo(
        f"citelock gateway on http://{host}:{port}/v1 ({workers} worker(s)) in front of {where}; Ctrl-C stops it"
    )
    serve(settings, host=host, port=port, workers=workers)  # type: ignore[arg-type]


@key_app.command("create")
def key_create(
    surface: Annotated[list[str], typer.Option("--surface", help="a surface the key may call (repeatable)")],
    db: DbOption = None,
    label: Annotated[str | None, typer.Option("--label", help="what the key is for")] = None,
) -> None:
    """Make a gateway key for the named surfaces; the key is printed once, on the last line (only its hash is kept)."""
    from citelock.gateway import GatewayKeys

    target = _db(db)
    try:
        secret = GatewayKeys(target).create(surface, label=label)
    except InputError as exc:
        fail(str(exc))
    typer.echo(f"gateway key for surface(s) {', '.join(surface)} in {target} (shown once; only its hash is stored):")
    typer.echo(secret)


@key_app.command("list")
def key_list(db: DbOption = None) -> None:
    """List the gateway keys (their public ids, surfaces and state; never the secrets)."""
    from citelock.gateway import GatewayKeys

    for key in GatewayKeys(_db(db)).entries():
        state = "revoked" if key.revoked else "active"
        label = f"  {key.label}" if key.label else ""
        typer.echo(f"{key.key_id}  {state}  {','.join(key.surfaces)}  {key.created_at:%Y-%m-%d %H:%M}{label}")


@key_app.command("revoke")
def key_revoke(
    key_id: Annotated[str, typer.Argument(metavar="KEY_ID", help="the key's public id (citelock gateway key list)")],
    db: DbOption = None,
) -> None:
    """Revoke a gateway key: it stops working at once, on every worker."""
    from citelock.gateway import GatewayKeys

    try:
        GatewayKeys(_db(db)).revoke(key_id)
    except KeyError:
        fail(f"no active gateway key has the id {key_id!r} (see citelock gateway key list)")
    typer.echo(f"revoked {key_id}")
