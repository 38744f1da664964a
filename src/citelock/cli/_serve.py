"""``citelock serve``: run a local OpenAI-compatible server (llama.cpp) with the bundled model."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer

from citelock.cli._app import EXIT_UNREACHABLE, app
from citelock.cli._io import existing_file, fail
from citelock.errors import CitelockError, UsageError

__all__ = ["serve"]


@app.command()
def serve(
    model: Annotated[
        Path | None, typer.Option(help="a GGUF model file (default: the bundled SmolLM2-135M-Instruct)")
    ] = None,
    host: Annotated[str, typer.Option(help="interface to bind; 127.0.0.1 keeps it on this machine")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="port (0: pick a free one)")] = 8080,
    n_ctx: Annotated[int, typer.Option("--n-ctx", min=256, help="context size in tokens")] = 2048,
    threads: Annotated[int | None, typer.Option(min=1, help="CPU threads (default: half the cores)")] = None,
    repack: Annotated[
        bool, typer.Option(help="enable llama.cpp weight repacking (off: it crashes on some AMX CPUs)")
    ] = False,
) -> None:
    """Start llama.cpp's OpenAI-compatible server on HOST:PORT and keep it running until Ctrl-C.

    Same as ``python -m llama_cpp.server --model MODEL --host HOST --port PORT``, hardened: a grammar that does
    not parse is refused with HTTP 500 instead of killing the server, and the server is restarted on the same
    port if it exits anyway. Then, for example:
    ``citelock answer --backend openai --base-url http://127.0.0.1:8080/v1 -q ... --chunks ...``.
    """
    from citelock.runtime import ManagedServer

    if model is not None:
        existing_file(model, "--model GGUF")
    try:
        server = ManagedServer(model, host=host, port=port or None, n_ctx=n_ctx, n_threads=threads, repack=repack)
    except UsageError as exc:
        fail(str(exc))
    stop = False

    def _stop(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    server.start()  # a server that does not come up raises ServerStartError: exit 4 (see _app)
    typer.echo(
        f"serving {server.model.name} at {server.base_url} (pid {server.pid}, log: {server.log_path}); Ctrl-C stops it"
    )
    failure: CitelockError | None = None
    try:
        server.supervise(lambda: stop, report=lambda line: typer.echo(f"citelock: {line}", err=True))
    except KeyboardInterrupt:
        stop = True
    except CitelockError as exc:
        failure = exc
    finally:
        server.stop()
    if failure is not None:  # the supervisor gave up restarting a server that keeps dying
        tail = " | ".join(line for line in server.log_tail().splitlines()[-5:] if line.strip())
        typer.echo(f"citelock: error: unreachable: {failure}; last log lines: {tail}", err=True)
        raise typer.Exit(EXIT_UNREACHABLE)
