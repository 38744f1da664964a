"""Every backend by name, for the command line, configuration files and the API alike.

:data:`BACKENDS` is the one table: per name, what the backend is, its class and the extra it needs. Its options
are its constructor's arguments (read off the signature, never copied here), so :func:`make_backend` checks them
before anything is built, and no SDK loads until a backend first needs it. Adding a backend is a module in
``backends/`` and one entry here.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from citelock.backends._fake import FakeBackend
from citelock.backends._instructor import InstructorBackend
from citelock.backends._local import LocalBackend, NaiveBackend
from citelock.backends._openai import OpenAIBackend
from citelock.backends._outlines import OutlinesBackend
from citelock.backends._protocol import Backend
from citelock.errors import UsageError

__all__ = ["BACKENDS", "BACKEND_NAMES", "BackendInfo", "make_backend"]


@dataclass(frozen=True)
class BackendInfo:
    """One backend known by name.

    Attributes:
        name: The name (``citelock answer --backend NAME``, ``make_backend(NAME)``).
        summary: One line: what it does.
        cls: The backend class (constructing it loads no SDK).
        extra: The ``citelock[extra]`` it needs at run time, or None.
        how: How to pass what it needs, added to the error when a required option is missing.
    """

    name: str
    summary: str
    cls: type[Any]
    extra: str | None = None
    how: str | None = None

    def options(self) -> dict[str, inspect.Parameter]:
        """The backend's options: its constructor's parameters, by name (required ones have no default)."""
        return {
            name: p
            for name, p in inspect.signature(self.cls).parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }


BACKENDS: dict[str, BackendInfo] = {
    info.name: info
    for info in (
        BackendInfo(
            "local",
            "a bundled model on llama.cpp, decoding constrained by the citation grammar",
            LocalBackend,
            extra="local",
        ),
        BackendInfo(
            "naive",
            "the same model writing free text with bracketed chunk ids (the unconstrained baseline)",
            NaiveBackend,
            extra="local",
        ),
        BackendInfo(
            "openai",
            "any OpenAI-compatible server (OpenAI, vLLM, llama.cpp), the schema sent as it takes one",
            OpenAIBackend,
            extra="openai",
        ),
        BackendInfo(
            "instructor",
            "the same servers through instructor: citations validated against the prompt, bounded reasks",
            InstructorBackend,
            extra="instructor",
        ),
        BackendInfo(
            "outlines",
            "any outlines model (llama.cpp, Transformers, MLX, vLLM, SGLang...), the constraint as an output type",
            OutlinesBackend,
            extra="outlines",
            how=(
                "pass an outlines model: Citelock(backend=OutlinesBackend(outlines.from_llamacpp("
                "llama_cpp.Llama(model_path=...)))), or a GGUF path or bundled model name: "
                "make_backend('outlines', model='smollm2') (citelock answer --backend outlines --model PATH)"
            ),
        ),
        BackendInfo(
            "fake",
            "for tests: each chunk's first sentence, cited (the API scripts it with outputs=)",
            FakeBackend,
        ),
    )
}
"""Every backend citelock knows by name."""

BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)
"""The names in :data:`BACKENDS`, in table order."""


def make_backend(kind: str, **options: Any) -> Backend:
    """Create a backend by name with its options (the keyword arguments of its constructor).

    Example:
        >>> make_backend("openai", base_url="http://127.0.0.1:8080/v1", server="llama-cpp-python")  # doctest: +SKIP

    Args:
        kind: A name in :data:`BACKENDS`.
        options: The backend's options, e.g. ``model="gemma3"`` for ``local``, ``base_url=...`` for ``openai``.

    Raises:
        UsageError: an unknown name (the message lists the known ones), an option the backend does not take or a
            required one missing (the message lists its options), or a bad option value.
        MissingExtraError: the backend's extra is not installed (raised when it first needs it).
    """
    info = BACKENDS.get(kind)
    if info is None:
        raise UsageError(f"unknown backend {kind!r}; expected one of {', '.join(BACKENDS)}")
    params = info.options()
    takes = list(params)
    unknown = sorted(set(options) - set(takes))
    if unknown:
        raise UsageError(f"backend {kind!r} takes no option {', '.join(unknown)}; its options: {', '.join(takes)}")
    missing = [n for n in takes if params[n].default is inspect.Parameter.empty and n not in options]
    if missing:
        how = f"; {info.how}" if info.how else ""
        raise UsageError(
            f"backend {kind!r} needs the option {', '.join(missing)}; its options: {', '.join(takes)}{how}"
        )
    backend: Backend = info.cls(**options)
    return backend
