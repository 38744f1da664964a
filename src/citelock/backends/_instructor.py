"""The instructor backend: a pydantic answer model whose validators check every citation against the prompt.

The model is the citation schema's own (:func:`~citelock.constraint._model.build_model`, built per request from
the fitted schema): ``chunk_id`` is a ``Literal`` of the prompt's ids and, for the ``sentence`` policy, each
citation is a union of one model per chunk (``Literal`` id, ``Literal`` span), which instructor sends as a forced
tool call (``Mode.TOOLS``) that llama.cpp enforces with a grammar. Free strings carry the JSON Schema the
server's profile can enforce. On top of that a validator runs guard ① on the parsed answer against the prompt
*as logged*: an id outside the prompt or a span that is not verbatim in the cited chunk (exact after
normalization, never fuzzy) fails validation, and instructor reasks with the reason, within ``max_reasks`` and
``token_budget``. A bad quote is never dropped or repaired: when the reasks run out, the last output is returned
with ``enforced=False`` and its findings, not raised.

Measured on llama-cpp-python's server: ``Mode.TOOLS`` with the per-chunk union holds; ``Mode.JSON_SCHEMA``
fails there (the server rejects ``response_format`` ``json_schema`` with HTTP 500).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel

from citelock.backends._openai import verify_output
from citelock.backends._protocol import Generation
from citelock.constraint import BackendLimits, CitationSchema, build_model
from citelock.errors import BackendError, ConstraintViolationError, MissingExtraError, TruncatedOutputError, UsageError
from citelock.prompt import PromptIndex, check_citation, describe
from citelock.records import PromptRecord
from citelock.runtime import OpenAITransport, ServerProfile, TransportUser, map_openai_error, output_text

__all__ = ["InstructorBackend", "InstructorGeneration"]

_MODES = ("tools", "json_schema", "json")


@dataclass(frozen=True)
class InstructorGeneration(Generation):
    """A :class:`Generation` with the reask history.

    Attributes:
        attempts: Requests made (1 + reasks).
        exhausted: The reasks (or the token budget) ran out; ``text`` is the last output, unvalidated.
        findings: Why the last failed attempt was rejected (validation messages), empty on success.
        requests: Every request's messages exactly as sent (the first equals the logged prompt).
        total_tokens: Tokens used across all attempts, if the server reported usage.
    """

    attempts: int = 1
    exhausted: bool = False
    findings: tuple[str, ...] = ()
    requests: tuple[tuple[Mapping[str, Any], ...], ...] = ()
    total_tokens: int | None = None


class InstructorBackend(TransportUser):
    """Structured answers through instructor: validation against the prompt plus bounded reasks.

    Args:
        base_url: The OpenAI-compatible server (``.../v1``); OpenAI's when None.
        api_key: API key (a placeholder is used for a local ``base_url``).
        model: Model name; the server's first listed model when None.
        server: Server kind or :class:`ServerProfile` (limits and the string rule); as :class:`OpenAIBackend`.
        mode: instructor mode: ``tools`` (forced tool call; works on llama.cpp), ``json_schema`` or ``json``.
        max_reasks: Reasks after the first attempt (0: one attempt).
        token_budget: Total tokens across all attempts; the reasks stop when it is spent (None: no budget).
        temperature: Sampling temperature.
        seed: Sampling seed.
        timeout: Seconds per request.

    Raises:
        MissingExtraError: the ``openai`` package is not installed.
        UsageError: an unknown mode or server kind, a negative ``max_reasks``, a non-positive ``token_budget``.
    """

    name = "instructor"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        server: str | ServerProfile | None = None,
        mode: Literal["tools", "json_schema", "json"] = "tools",
        max_reasks: int = 2,
        token_budget: int | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
        timeout: float = 120.0,
    ) -> None:
        transport = OpenAITransport.connect(
            base_url=base_url, api_key=api_key, model=model, server=server, timeout=timeout
        )
        self._setup(
            transport, mode=mode, max_reasks=max_reasks, token_budget=token_budget, temperature=temperature, seed=seed
        )

    def _setup(
        self,
        transport: OpenAITransport,
        *,
        mode: str,
        max_reasks: int,
        token_budget: int | None,
        temperature: float,
        seed: int | None,
    ) -> None:
        if mode not in _MODES:
            raise UsageError(f"mode must be one of {list(_MODES)}, got {mode!r}")
        if max_reasks < 0:
            raise UsageError(f"max_reasks must be 0 or more, got {max_reasks}")
        if token_budget is not None and token_budget < 1:
            raise UsageError(f"token_budget must be positive, got {token_budget}")
        if transport.is_async:
            raise UsageError("the instructor backend is synchronous: pass an openai.OpenAI client, not AsyncOpenAI")
        self.transport = transport
        self.mode = mode
        self.max_reasks = max_reasks
        self.token_budget = token_budget
        self.temperature = temperature
        self.seed = seed
        self._lock = threading.Lock()
        self._instructor: Any = None

    @classmethod
    def from_client(
        cls,
        client: Any,
        *,
        server: str | ServerProfile | None = None,
        model: str | None = None,
        mode: Literal["tools", "json_schema", "json"] = "tools",
        max_reasks: int = 2,
        token_budget: int | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> InstructorBackend:
        """A backend over your own ``openai.OpenAI`` client (wrapped by instructor; used as is otherwise).

        Args:
            client: The client (its base URL, key, timeout, retries and HTTP client are kept).
            server: A server kind or :class:`ServerProfile`; None as :meth:`OpenAIBackend.from_client`.
            model: Model name; the server's first listed model when None.
            mode: instructor mode (see the class).
            max_reasks: Reasks after the first attempt.
            token_budget: Total tokens across all attempts (None: no budget).
            temperature: Sampling temperature.
            seed: Sampling seed.

        Raises:
            UsageError: not an ``openai.OpenAI`` client, a bad option (as the constructor).
        """
        return cls._over_client(
            client,
            server=server,
            model=model,
            mode=mode,
            max_reasks=max_reasks,
            token_budget=token_budget,
            temperature=temperature,
            seed=seed,
        )

    @property
    def limits(self) -> BackendLimits:
        """The server's limits (``quote_sentence``, ``sentence`` and ``id``)."""
        return self.transport.profile.limits

    @limits.setter
    def limits(self, value: BackendLimits) -> None:
        self.transport.profile = replace(self.transport.profile, limits=value)

    def _client(self) -> Any:
        if self._instructor is None:
            try:
                import instructor
            except ImportError:
                raise MissingExtraError("instructor", "instructor") from None
            mode = {
                "tools": instructor.Mode.TOOLS,
                "json_schema": instructor.Mode.JSON_SCHEMA,
                "json": instructor.Mode.JSON,
            }[self.mode]
            self._instructor = instructor.from_openai(self.transport.client, mode=mode)
        return self._instructor

    def response_model(self, record: PromptRecord, schema: CitationSchema) -> type[BaseModel]:
        """The answer model sent for one request.

        It is the schema's own model (:func:`~citelock.constraint._model.build_model`), its free strings as this
        server enforces them, with guard ① against ``record`` (the prompt as logged) as a validator.
        """
        return build_model(
            schema,
            string_schema=lambda shown: self.profile.adapt(shown)[0],
            validator=_provenance(record, schema),
        )

    def generate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> InstructorGeneration:
        """Generate a validated answer; reask on findings; return the last output when reasks run out.

        Raises:
            UsageError: no schema (instructor always needs one) or a schema over the server's limits.
            BackendError: the call failed (typed: timeout, connection, HTTP status, truncation).
        """
        if schema is None:
            raise UsageError("the instructor backend needs a citation schema (it has no free-text mode)")
        problem = self.limits.violation(schema)
        if problem is not None:
            raise UsageError(f"not sent: {problem}; fit the schema to this server first")
        response_model = self.response_model(record, schema)
        with self._lock:
            return self._generate(record, schema, response_model, max_tokens)

    def _generate(
        self, record: PromptRecord, schema: CitationSchema, response_model: type[BaseModel], max_tokens: int
    ) -> InstructorGeneration:
        from instructor.core.exceptions import (
            IncompleteOutputException,
            InstructorError,
            InstructorRetryException,
        )

        client = self._client()
        requests: list[tuple[Mapping[str, Any], ...]] = []

        def on_kwargs(*_args: Any, **kwargs: Any) -> None:
            requests.append(tuple(dict(m) for m in kwargs.get("messages", ())))

        client.on("completion:kwargs", on_kwargs)
        kwargs = self._request(record, response_model, max_tokens)
        kind = self.transport.provider  # after the model name was asked: the server may have named itself
        started = time.perf_counter()
        exhausted = False
        findings: tuple[str, ...] = ()
        try:
            result = client.chat.completions.create(**kwargs)
            raw = getattr(result, "_raw_response", None)
            usage = getattr(result, "_total_usage", None) or getattr(raw, "usage", None)
            attempts = max(1, len(requests))
        except IncompleteOutputException as exc:
            raise self._truncated(exc, max_tokens, kind, record) from exc
        except InstructorRetryException as exc:
            raw = exc.last_completion
            usage = exc.total_usage
            attempts = exc.n_attempts
            exhausted = True
            failures = getattr(exc, "failed_attempts", None) or []
            findings = tuple(str(f.exception)[:600] for f in failures[-1:]) or (str(exc)[:600],)
            if raw is None:
                raise BackendError(
                    f"instructor gave up after {attempts} attempts with no completion: {exc}",
                    provider=kind,
                    citelock_request_id=record.request_id,
                ) from exc
        except InstructorError as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, Exception) and type(cause).__module__.startswith("openai"):
                raise map_openai_error(cause, provider=kind, citelock_request_id=record.request_id) from exc
            raise BackendError(
                f"instructor failed: {exc}", provider=kind, citelock_request_id=record.request_id
            ) from exc
        except Exception as exc:
            if type(exc).__module__.startswith("openai"):
                raise map_openai_error(exc, provider=kind, citelock_request_id=record.request_id) from exc
            raise
        finally:
            client.off("completion:kwargs", on_kwargs)
        latency = time.perf_counter() - started
        text = _raw_text(raw, self.mode) if raw is not None else ""
        if not exhausted and not text:
            text = result.model_dump_json()
        notes, enforced = self._verdict(text, schema, attempts=attempts, exhausted=exhausted, findings=findings)
        choice = raw.choices[0] if raw is not None and getattr(raw, "choices", None) else None
        return InstructorGeneration(
            text=text,
            backend=self.name,
            model=self.model,
            enforced=enforced,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            latency_s=latency,
            finish_reason=getattr(choice, "finish_reason", None),
            notes=tuple(notes),
            attempts=attempts,
            exhausted=exhausted,
            findings=findings,
            requests=tuple(requests),
            total_tokens=getattr(usage, "total_tokens", None),
        )

    def _request(self, record: PromptRecord, response_model: type[BaseModel], max_tokens: int) -> dict[str, Any]:
        """The keyword arguments of instructor's ``create``: the transport's payload, the model and the reasks."""
        kwargs = self.transport.payload(
            [{"role": m.role, "content": m.content} for m in record.messages],
            max_tokens=max_tokens,
            temperature=self.temperature,
            seed=self.seed,
        )
        kwargs.update(response_model=response_model, max_retries=self.max_reasks)
        if self.token_budget is not None:
            kwargs["token_budget"] = self.token_budget
        return kwargs

    def _truncated(self, exc: Exception, max_tokens: int, kind: str, record: PromptRecord) -> TruncatedOutputError:
        """The typed error for an output cut at ``max_tokens`` (instructor's IncompleteOutputException)."""
        last = getattr(exc, "last_completion", None)
        return TruncatedOutputError(
            f"the output stopped at max_tokens={max_tokens} before the JSON was complete",
            partial=_raw_text(last, self.mode) if last is not None else "",
            max_tokens=max_tokens,
            provider=kind,
            request_id=getattr(last, "id", None),
            citelock_request_id=record.request_id,
        )

    def _verdict(
        self, text: str, schema: CitationSchema, *, attempts: int, exhausted: bool, findings: tuple[str, ...]
    ) -> tuple[list[str], bool]:
        """The generation's notes, and whether the output holds to the schema (never when reasks ran out)."""
        notes = [f"instructor mode={self.mode}, attempts={attempts}, max_reasks={self.max_reasks}"]
        if self.token_budget is not None:
            notes.append(f"token budget {self.token_budget}")
        enforced = False
        if exhausted:
            notes.append("reasks exhausted: the last output is returned unvalidated; " + "; ".join(findings)[:400])
        else:
            _, problems = verify_output(text, None, schema)
            enforced = not problems
            if problems:
                notes.append("constraint not enforced: " + "; ".join(problems[:3]))
        return notes, enforced


def _provenance(record: PromptRecord, schema: CitationSchema) -> Callable[[Any], None]:
    """Guard ① as a model validator: every citation of a parsed answer must hold against the logged prompt."""
    index = PromptIndex.build(record)

    def check(model: Any) -> None:
        try:
            answer = schema.parse_output(model.model_dump_json())
        except ConstraintViolationError as exc:
            raise ValueError(str(exc)) from None
        lines = []
        for ci, claim in enumerate(answer.claims):
            for xi, cited in enumerate(claim.citations):
                result = check_citation(index, cited, ci, xi, None)
                if not result.passed and result.reason is not None:
                    lines.append(
                        f"claims[{ci}].citations[{xi}]: {result.reason.value}: {describe(index, result)} "
                        f"(chunk_id={cited.chunk_id!r}, span={(cited.span or '')[:80]!r})"
                    )
        if lines:
            raise ValueError(
                "citations must quote the cited source verbatim and cite only the sources given: " + "; ".join(lines)
            )

    return check


def _raw_text(completion: Any, mode: str) -> str:
    """The JSON a chat completion carries: the forced tool call's arguments in ``tools`` mode, else the content."""
    choices = getattr(completion, "choices", None)
    if not choices:
        return ""
    text, _ = output_text(choices[0].message, "tool_arguments" if mode == "tools" else "content")
    return text
