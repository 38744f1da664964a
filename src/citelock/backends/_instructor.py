"""The instructor backend: a pydantic answer model whose validators check every citation against the prompt.

The model is built per request from the prompt *as logged*: ``chunk_id`` is a ``Literal`` of the prompt's ids
and, for the ``sentence`` policy, each citation is a ``Union`` of one model per chunk (``Literal`` id,
``Literal`` span), which instructor sends as a forced tool call (``Mode.TOOLS``) that llama.cpp enforces with a
grammar. On top of that a validator runs guard ① on the parsed answer: an id outside the prompt or a span that
is not verbatim in the cited chunk (exact after normalization, never fuzzy) fails validation, and instructor
reasks with the reason, within ``max_reasks`` and ``token_budget``. A bad quote is never dropped or repaired:
when the reasks run out, the last output is returned with ``enforced=False`` and its findings, not raised.

Measured on llama-cpp-python's server: ``Mode.TOOLS`` with the per-chunk union holds; ``Mode.JSON_SCHEMA``
fails there (the server rejects ``response_format`` ``json_schema`` with HTTP 500).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, cast

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, create_model, model_validator

from citelock.backends._openai import OpenAIBackend, map_openai_error, verify_output
from citelock.backends._protocol import Generation
from citelock.constraint._schema import BackendLimits, CitationSchema
from citelock.errors import BackendError, MissingExtraError, TruncatedOutputError, UsageError
from citelock.prompt._index import PromptIndex, check_citation, describe
from citelock.records import Answer, Citation, Claim, PromptRecord
from citelock.runtime._profiles import ServerProfile

__all__ = ["InstructorBackend", "InstructorGeneration", "citation_model"]

_CONFIG = ConfigDict(extra="forbid", frozen=True)
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


def _string(max_length: int, profile: ServerProfile) -> Any:
    """A bounded string whose JSON Schema is what ``profile``'s server can enforce."""
    sent, _ = profile.adapt({"type": "string", "minLength": 1, "maxLength": max_length})
    return Annotated[str, Field(min_length=1, max_length=max_length), WithJsonSchema(sent)]


def citation_model(record: PromptRecord, schema: CitationSchema, profile: ServerProfile) -> type[BaseModel]:
    """The answer model for one request: ``Literal`` ids, per-chunk ``Literal`` spans, and guard ① as a validator.

    Args:
        record: The prompt as logged (the validator checks against it).
        schema: The fitted citation schema (its policy, ids, sentences and bounds).
        profile: The server's profile (free strings get the JSON Schema its grammar enforces).
    """
    opts = schema.options
    prompt_ids = set(record.prompt_ids)
    citation: Any
    if schema.policy == "sentence":
        members = [
            create_model(
                f"Cite{n}",
                __config__=_CONFIG,
                chunk_id=(cast(Any, Literal.__getitem__((chunk_id,))), ...),
                span=(cast(Any, Literal.__getitem__(tuple(spans))), ...),
            )
            for n, (chunk_id, spans) in enumerate(schema.sentences.items())
            if chunk_id in prompt_ids
        ]
        if not members:
            raise UsageError("none of the schema's chunks is in the prompt; nothing can be cited")
        citation = members[0] if len(members) == 1 else Union.__getitem__(tuple(members))
    else:
        ids = tuple(i for i in schema.ids if i in prompt_ids)
        if not ids:
            raise UsageError("none of the schema's chunk ids is in the prompt; nothing can be cited")
        citation = create_model(
            "Cite",
            __config__=_CONFIG,
            chunk_id=(cast(Any, Literal.__getitem__(ids)), ...),
            span=(_string(opts.max_span_chars, profile), ...),
        )
    claim = create_model(
        "Claim",
        __config__=_CONFIG,
        text=(_string(opts.max_text_chars, profile), ...),
        citations=(Annotated[list[citation], Field(min_length=1, max_length=opts.max_citations)], ...),
    )

    def provenance(model: Any) -> Any:
        answer = Answer(
            claims=tuple(
                Claim(
                    text=c.text,
                    citations=tuple(Citation(chunk_id=x.chunk_id, span=x.span) for x in c.citations),
                )
                for c in model.claims
            )
        )
        index = PromptIndex.build(record)
        bad = []
        for ci, claim_ in enumerate(answer.claims):
            for xi, cited in enumerate(claim_.citations):
                result = check_citation(index, cited, ci, xi, None)
                if not result.passed and result.reason is not None:
                    bad.append((result, describe(index, result), cited))
        if bad:
            lines = [
                f"claims[{r.claim_index}].citations[{r.citation_index}]: {r.reason.value if r.reason else ''}: "
                f"{detail} (chunk_id={c.chunk_id!r}, span={(c.span or '')[:80]!r})"
                for r, detail, c in bad
            ]
            raise ValueError(
                "citations must quote the cited source verbatim and cite only the sources given: " + "; ".join(lines)
            )
        return model

    return create_model(
        "CitedAnswer",
        __config__=_CONFIG,
        __validators__={"provenance": model_validator(mode="after")(provenance)},  # type: ignore[dict-item]
        claims=(Annotated[list[claim], Field(min_length=1, max_length=opts.max_claims)], ...),
    )


class InstructorBackend:
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
        client: A ready ``openai.OpenAI`` client.
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
        client: Any = None,
    ) -> None:
        if mode not in _MODES:
            raise UsageError(f"mode must be one of {list(_MODES)}, got {mode!r}")
        if max_reasks < 0:
            raise UsageError(f"max_reasks must be 0 or more, got {max_reasks}")
        if token_budget is not None and token_budget < 1:
            raise UsageError(f"token_budget must be positive, got {token_budget}")
        self._openai = OpenAIBackend(
            base_url=base_url,
            api_key=api_key,
            model=model,
            server=server,
            temperature=temperature,
            seed=seed,
            timeout=timeout,
            client=client,
        )
        self.mode = mode
        self.max_reasks = max_reasks
        self.token_budget = token_budget
        self._lock = threading.Lock()
        self._instructor: Any = None

    @property
    def profile(self) -> ServerProfile:
        """The server's profile."""
        return self._openai.profile

    @property
    def limits(self) -> BackendLimits:
        """The server's limits (``quote_sentence``, ``sentence`` and ``id``)."""
        return self._openai.profile.limits

    @limits.setter
    def limits(self, value: BackendLimits) -> None:
        self._openai.limits = value

    @property
    def model(self) -> str:
        """The model name."""
        return self._openai.model

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
            self._instructor = instructor.from_openai(self._openai.client, mode=mode)
        return self._instructor

    def generate(self, record: PromptRecord, schema: CitationSchema | None, *, max_tokens: int) -> InstructorGeneration:
        """Generate a validated answer; reask on findings; return the last output when reasks run out.

        Raises:
            UsageError: no schema (instructor always needs one) or a schema over the server's limits.
            BackendError: the call failed (typed: timeout, connection, HTTP status, truncation).
        """
        if schema is None:
            raise UsageError("the instructor backend needs a citation schema (it has no free-text mode)")
        problem = self.profile.violation(schema)
        if problem is not None:
            raise UsageError(f"not sent: {problem}; fit the schema to this server first")
        response_model = citation_model(record, schema, self.profile)
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
        kind = self.profile.kind
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in record.messages],
            "response_model": response_model,
            "max_retries": self.max_reasks,
            self.profile.max_tokens_field: max_tokens,
            "temperature": self._openai.temperature,
        }
        if self._openai.seed is not None:
            kwargs["seed"] = self._openai.seed
        if self.token_budget is not None:
            kwargs["token_budget"] = self.token_budget
        started = time.perf_counter()
        exhausted = False
        findings: tuple[str, ...] = ()
        try:
            result = client.chat.completions.create(**kwargs)
            raw = getattr(result, "_raw_response", None)
            usage = getattr(result, "_total_usage", None) or getattr(raw, "usage", None)
            attempts = max(1, len(requests))
        except IncompleteOutputException as exc:
            last = getattr(exc, "last_completion", None)
            raise TruncatedOutputError(
                f"the output stopped at max_tokens={max_tokens} before the JSON was complete",
                partial=_raw_text(last) if last is not None else "",
                max_tokens=max_tokens,
                provider=kind,
                request_id=getattr(last, "id", None),
                citelock_request_id=record.request_id,
            ) from exc
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
        text = _raw_text(raw) if raw is not None else ""
        if not exhausted and not text:
            text = result.model_dump_json()
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


def _raw_text(completion: Any) -> str:
    """The JSON a chat completion carries: the first tool call's arguments, else the message content."""
    choices = getattr(completion, "choices", None)
    if not choices:
        return ""
    message = choices[0].message
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        return str(calls[0].function.arguments or "")
    return str(message.content or "")
