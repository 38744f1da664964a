"""``citelock answer``: answer a question from a chunks file with constrained, guarded citations."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Literal

import typer
from pydantic import ValidationError

from citelock.backends import _registry
from citelock.cli._app import EXIT_FINDINGS, EXIT_OK, EXIT_RUNTIME, app
from citelock.cli._config import load_config
from citelock.cli._io import fail, iter_json_lines, shown, text_option
from citelock.cli._surface_options import (
    NO_SURFACE,
    SurfaceOptions,
    SurfaceSetup,
    free_guard,
    surface_options,
    surface_setup,
)
from citelock.constraint import DEFAULT_POLICY, POLICY_ORDER, SchemaOptions, SpanPolicy
from citelock.errors import UnparsedAnswerError
from citelock.pipeline import Citelock, GuardedAnswer, Sink
from citelock.prompt import lexical_top_k
from citelock.records import Chunk
from citelock.render import RenderStyle
from citelock.store import ResultStore, ReviewQueue

__all__ = ["answer", "default_db", "model_label", "read_chunks"]

_SERVER_BACKENDS = ("openai", "instructor")


def _backend_help() -> str:
    return "; ".join(f"{info.name}: {info.summary}" for info in _registry.BACKENDS.values())


def _known_backend(name: str | None) -> str | None:
    if name is not None and (not name.strip() or not name.isprintable()):
        raise typer.BadParameter(f"expected a backend name, got {name!r}")
    return name


def _named_backend(name: str | None, config: Path | None) -> tuple[str, dict[str, str]]:
    """The backend's kind and options: a built-in name, else a ``[backends.NAME]`` entry of the config file.

    Without ``--backend``: the config's ``default_backend``, else ``local``. Exit 2 on an unknown name.
    """
    if name in _registry.BACKENDS:
        return name, {}
    loaded = load_config(config, warn=False)
    chosen = name or loaded.data.default_backend
    if chosen is None:
        return "local", {}
    entry = loaded.backends.get(chosen)
    if entry is None:
        known = [*_registry.BACKENDS, *loaded.backends]
        fail(f"--backend: unknown backend {chosen!r}; expected one of {', '.join(known)}")
    return entry.kind, {k: v for k, v in entry.model_dump(exclude={"kind"}).items() if v is not None}


def default_db() -> Path:
    """The prompt log database: ``$CITELOCK_DB`` or ``./.citelock/citelock.db``."""
    return Path(os.environ.get("CITELOCK_DB") or Path(".citelock") / "citelock.db")


def read_chunks(path: Path) -> list[Chunk]:
    """Read a JSON-lines file (or ``-``) of chunks: ``{"id", "text"}``, optional source/rank/strategy/metadata."""
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for number, line in iter_json_lines(path, "chunks"):
        try:
            chunk = Chunk.model_validate_json(line)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "(row)"
            fail(
                f"chunks file {shown(path)} line {number}: {where}: {err['msg']}; "
                'expected {"id": "...", "text": "..."}'
            )
        if chunk.id in seen:
            fail(f"chunks file {shown(path)} line {number}: id {chunk.id!r} already used on line {seen[chunk.id]}")
        seen[chunk.id] = number
        chunks.append(chunk)
    if not chunks:
        fail(f"chunks file {shown(path)} has no chunks")
    return chunks


@app.command()
@surface_options
def answer(
    question: Annotated[str, typer.Option("--question", "-q", help="the question to answer")],
    chunks_path: Annotated[
        Path,
        typer.Option(
            "--chunks",
            help="CHUNKS.jsonl, one chunk record per line. Without --top-k the file IS the retrieved set: every "
            "chunk goes into the prompt, in file order.",
        ),
    ],
    backend: Annotated[
        str | None,
        typer.Option(
            callback=_known_backend,
            help=f"the backend, by name: {_backend_help()}; or a [backends.NAME] entry of the config file "
            "(default: its default_backend, else local)",
            show_default=False,
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="--backend openai or instructor: the server's base URL, e.g. http://127.0.0.1:8080/v1"
        ),
    ] = None,
    server_kind: Annotated[
        str | None,
        typer.Option(
            "--server", help="--backend openai or instructor: server kind (openai, vllm, llama.cpp, llama-cpp-python)"
        ),
    ] = None,
    policy: Annotated[
        Literal["quote", "quote_sentence", "substring", "sentence", "id"],
        typer.Option(
            help="span policy requested (downgraded, with the reason, if the backend cannot take it). substring "
            "(the default, as in the library): each citation's span is verbatim text of the chunk it cites; quote: "
            "each claim is itself copied verbatim from that chunk (support by construction; JSON-Schema servers "
            "get its sentence form, quote_sentence)"
        ),
    ] = DEFAULT_POLICY,
    model: Annotated[
        str | None,
        typer.Option(
            help="local, naive: the bundled model, smollm2 (SmolLM2-135M-Instruct, default) or gemma3 (270M base); "
            "openai, instructor: the server's model name (default: the first it lists)"
        ),
    ] = None,
    top_k: Annotated[
        int | None,
        typer.Option(
            "--top-k",
            min=1,
            help="treat --chunks as a corpus: keep the K chunks ranked best by a simple lexical BM25 retriever",
        ),
    ] = None,
    render: Annotated[
        Literal["footnotes", "links", "none"], typer.Option(help="how citation markers are shown")
    ] = "footnotes",
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="generation budget (default: the schema's bound)")
    ] = None,
    no_abstain: Annotated[
        bool,
        typer.Option(
            "--no-abstain",
            help="remove the abstention from the schema: the answer always has at least one claim (for surfaces "
            "that must answer; the guard still checks every claim). Constrained backends only",
        ),
    ] = False,
    db: Annotated[
        Path | None,
        typer.Option(
            help="prompt log database (default: $CITELOCK_DB or ./.citelock/citelock.db); with a surface, "
            "findings are queued and results stored there too"
        ),
    ] = None,
    options: SurfaceOptions = NO_SURFACE,
    as_json: Annotated[bool, typer.Option("--json", help="print the GuardedAnswer record as JSON")] = False,
    stream: Annotated[
        bool,
        typer.Option(
            "--stream",
            help="stream the answer: each claim appears once the surface allows it (after its checks, or its judge "
            "on a high-stakes surface), marked when it passes or with its reason, then the footnotes and the guard "
            "line",
        ),
    ] = False,
) -> None:
    """Answer a question from chunks with citations constrained by construction and checked by the guard.

    With --surface (or --judge, --on-fail, --calibration) the surface policy runs as in `citelock check`: the
    support judge, its routing, and --on-fail (drop_claim serves the answer without its failing claims, mark
    marks them unverified). Exit 0 when the answer is served clean, 1 on findings (repaired or blocked), 2 on
    bad usage or input (checked before the prompt is logged), 4 when the server cannot be reached, 5 when the
    model's output is unusable (see the exit codes below).
    """
    if not text_option("--question", question).strip():
        fail("--question is empty")
    backend, configured = _named_backend(backend, options.config)
    if base_url is not None and backend not in _SERVER_BACKENDS:
        fail(f"--base-url is for --backend openai or instructor, not --backend {backend}")
    if server_kind is not None and backend not in _SERVER_BACKENDS:
        fail(f"--server is for --backend openai or instructor, not --backend {backend}")
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        fail(f"--base-url {base_url!r}: expected an http(s) URL, e.g. http://127.0.0.1:8080/v1")
    setup = surface_setup(options)
    chunks = read_chunks(chunks_path)
    if top_k is not None:
        chunks = lexical_top_k(question, chunks, top_k)
    flags = {"model": model, "base_url": base_url, "server": server_kind}
    given = {**configured, **{k: v for k, v in flags.items() if v is not None}}  # a flag overrides the config's
    chosen = _registry.make_backend(backend, **given)
    if no_abstain and not chosen.limits.constrains:
        fail(f"--no-abstain shapes the citation schema, and --backend {backend} takes none (it writes free text)")
    target = db or _config_db(setup) or default_db()
    sinks: list[Sink] = [ReviewQueue(target), ResultStore(target)] if setup is not None else []
    client = Citelock(
        chosen,
        log=target,
        guard=setup.guard if setup is not None else free_guard(options),
        sinks=sinks,
        policy=_policy(policy),
        render=_render(render),
        options=SchemaOptions(min_claims=1) if no_abstain else None,
    )
    try:
        if stream and not as_json:
            from citelock.cli._stream_view import show_stream

            show = setup.settings.show if setup is not None and setup.settings is not None else None
            result = show_stream(client.stream(question, chunks, max_tokens=max_tokens, show=show))
        else:
            result = client.answer(question, chunks, max_tokens=max_tokens)
    except UnparsedAnswerError as exc:  # other failures map to their exit code centrally (see _app)
        typer.echo(f"citelock: error: the model's answer could not be parsed: {exc}", err=True)
        raise typer.Exit(EXIT_RUNTIME) from None
    if as_json:
        data = result.model_dump(mode="json")
        data["model"] = model_label(result.model)
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2))
    elif stream:
        notes = result.rendered.partition("\n\n")[2] if result.render_style == "footnotes" else ""
        _print(result, text=notes)
    else:
        _print(result)
    raise typer.Exit(EXIT_OK if result.ok else EXIT_FINDINGS)


def _config_db(setup: SurfaceSetup | None) -> str | None:
    """``$CITELOCK_DB``, else the config's store, for a surface the config file names (None otherwise)."""
    if setup is None or setup.config is None:
        return None
    return setup.config.store


_PATH_LIKE = re.compile(r"^(?:[/~.]|[A-Za-z]:[\\/]|\\\\)|\.(?:gguf|bin|safetensors|pt)$", re.IGNORECASE)


def model_label(model: str) -> str:
    """The model's name as printed: a file path (a server's local GGUF file) shows only its file name.

    A server that was started with a model file reports that file's full path as the model id; printing it
    would show the server machine's directory layout. Aliases such as ``HuggingFaceTB/SmolLM2-135M-Instruct``
    (a slash, but not a path) are kept.
    """
    if _PATH_LIKE.search(model):
        return re.split(r"[\\/]", model.rstrip("\\/"))[-1] or model
    return model


def _policy(value: str) -> SpanPolicy:
    for policy in POLICY_ORDER:
        if value == policy:
            return policy
    return "id"


def _render(value: str) -> RenderStyle:
    return "footnotes" if value == "footnotes" else "links" if value == "links" else "none"


def _print(result: GuardedAnswer, *, text: str | None = None) -> None:
    shown_text = result.rendered if text is None else text
    if shown_text:
        typer.echo(shown_text)
        typer.echo("")
    policy = result.span_policy or "none (free text)"
    line = f"policy: {policy}"
    if result.downgrade_reason:
        line += f" (requested {result.requested_policy}: {result.downgrade_reason})"
    gen = result.generation
    speed = f", {gen.tokens_per_s:.0f} tok/s" if gen.tokens_per_s else ""
    typer.echo(
        f"{line} · {result.backend}/{model_label(result.model)} · {gen.completion_tokens or 0} tokens in "
        f"{gen.latency_s:.1f}s"
        f"{speed} · request {result.request_id}"
    )
    where = f" on surface {result.surface}" if result.surface else ""
    if result.abstained_before_generation:
        typer.echo(
            f"guard: ABSTAINED{where} (no assembled chunk is relevant enough to the question; nothing was generated)"
        )
        return
    if result.ok and result.answer.abstained:
        typer.echo(f"guard: OK{where} (the model abstained: the sources do not answer the question; nothing to cite)")
        return
    if result.ok:
        judged = " and passed the support judge" if result.result.accounting.judge_calls else ""
        typer.echo(
            f"guard: OK{where} (every citation is in the prompt and verbatim in its chunk{judged}; "
            "every claim is cited)"
        )
        return
    if result.decision == "repaired":
        dropped, marked = result.result.dropped, result.result.marked
        typer.echo(f"guard: repaired{where}: {len(dropped)} claim(s) removed, {len(marked)} marked unverified")
        for o in (*dropped, *marked):
            what = "removed" if o.action == "drop" else "marked"
            typer.echo(f"  {what}: {o.claim[:80]!r} — {', '.join(r.value for r in o.reasons)}")
    elif result.decision == "block":
        typer.echo(f"guard: BLOCKED{where}: do not serve this answer")
    typer.echo(f"guard: {len(result.findings)} finding(s)")
    for f in result.findings:
        cited = f" [{f.chunk_id}]" if f.chunk_id else ""
        typer.echo(f"  {f.reason.value}{cited}: {f.claim[:80]!r} — {f.detail}")
