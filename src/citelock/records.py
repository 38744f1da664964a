"""The records every layer exchanges: pydantic models with versioned JSON Schemas in ``schemas/``.

Records are immutable values (``frozen``) that reject unknown fields, so a typo in an input file is an error
naming the field, never a silently ignored key. The guard and everything after it are pure functions of
these records. :class:`ReasonCode` and :class:`Layer` are defined in :mod:`citelock.reasons` (beside the table
of what each code means) and re-exported here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field, field_validator

from citelock.reasons import Layer, ReasonCode

__all__ = [
    "Generation",
    "Answer",
    "Chunk",
    "ChunkStatus",
    "Citation",
    "CitationCheck",
    "Claim",
    "ClaimCheck",
    "Context",
    "DroppedChunk",
    "Finding",
    "GuardReport",
    "Layer",
    "Message",
    "Placement",
    "PlacedChunk",
    "PromptRecord",
    "ReasonCode",
    "RECORD_SCHEMA_VERSION",
    "TemplateRef",
    "Verdict",
    "VerdictLabel",
]

RECORD_SCHEMA_VERSION: Literal["1"] = "1"

NonEmptyStr = Annotated[str, Field(min_length=1)]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


VerdictLabel = Literal["yes", "partial", "no"]


class Chunk(_Record):
    """A retrieved passage, as the caller's retriever returned it.

    Attributes:
        id: The opaque id the answer cites (unique within a context).
        text: The full text of the chunk.
        source: Where it came from (URL, file, document id), if known.
        rank: The retrieval rank (1 = best), if known.
        strategy: The chunking strategy that produced it (for support-rate-by-strategy metrics).
        metadata: Anything else the caller wants carried along (JSON values).
    """

    id: NonEmptyStr
    text: str
    source: str | None = None
    rank: int | None = None
    strategy: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _id_has_no_whitespace(cls, value: str) -> str:
        if value.split() != [value]:  # str.split cuts at every whitespace character
            raise ValueError(f"a chunk id must not contain whitespace, got {value!r}")
        return value


class DroppedChunk(_Record):
    """A whole chunk the assembler left out to meet the budget (recorded, never silent)."""

    id: str
    chars: int
    reason: str


class Context(_Record):
    """An assembled context: the question and the ordered chunks that fit the budget."""

    question: str
    chunks: tuple[Chunk, ...]
    dropped: tuple[DroppedChunk, ...] = ()
    budget_chars: int | None = None

    @property
    def ids(self) -> tuple[str, ...]:
        """The chunk ids in prompt order."""
        return tuple(chunk.id for chunk in self.chunks)

    def content_hash(self) -> str:
        """sha256 over the question and the (id, text) of every chunk: the key for compiled schemas."""
        payload = json.dumps([self.question, [[c.id, c.text] for c in self.chunks]], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def chunk(self, chunk_id: str) -> Chunk:
        """Return the chunk with this id.

        Raises:
            KeyError: the id is not in this context.
        """
        for chunk in self.chunks:
            if chunk.id == chunk_id:
                return chunk
        raise KeyError(chunk_id)


class Message(_Record):
    """One chat message exactly as sent."""

    role: NonEmptyStr
    content: str


class TemplateRef(_Record):
    """Which prompt template produced a prompt."""

    name: str
    version: str


class Placement(_Record):
    """Where a piece of text sits in the prompt: raw offsets (as sent) and normalized offsets."""

    message: int
    start: int
    end: int
    norm_start: int
    norm_end: int


ChunkStatus = Literal["complete", "truncated", "missing"]


class PlacedChunk(_Record):
    """A chunk meant to be in the prompt, with where its body sits and whether it arrived whole.

    ``status`` is ``complete`` (the whole body is in the prompt), ``truncated`` (only a prefix is: the tail
    was cut) or ``missing`` (the body is not in the prompt at all; its id is then not a prompt id).
    """

    chunk: Chunk
    status: ChunkStatus
    placement: Placement | None = None

    @property
    def id(self) -> str:
        """The chunk's id."""
        return self.chunk.id


class PromptRecord(_Record):
    """The logged prompt: the artifact every later check points at.

    Attributes:
        request_id: Unique id of the request.
        created_at: When the record was made (UTC).
        template: Template name and version (``external`` for prompts assembled elsewhere).
        messages: The messages exactly as sent.
        normalized: The normalized copy of each message's content (see :func:`citelock.text.normalize`).
        offset_maps: Per message, anchors ``[norm_index, raw_index]`` mapping normalized offsets to raw ones.
        sha256: sha256 of the canonical JSON of ``messages``.
        question: The user's question, if known.
        question_placement: Where the question sits in the prompt, if found.
        chunks: Every chunk meant to be in the prompt, with its placement and status.
        dropped: Chunks the assembler dropped for the budget.
        metadata: Caller-supplied values (surface, user, trace ids).
    """

    schema_version: Literal["1"] = RECORD_SCHEMA_VERSION
    request_id: NonEmptyStr = Field(default_factory=lambda: uuid4().hex)
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    template: TemplateRef
    messages: tuple[Message, ...]
    normalized: tuple[str, ...]
    offset_maps: tuple[tuple[tuple[int, int], ...], ...]
    sha256: str
    question: str | None = None
    question_placement: Placement | None = None
    chunks: tuple[PlacedChunk, ...]
    dropped: tuple[DroppedChunk, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def prompt_ids(self) -> tuple[str, ...]:
        """Ids of the chunks whose body is (at least partly) in the prompt, in prompt order."""
        return tuple(pc.id for pc in self.chunks if pc.status != "missing")


class Citation(_Record):
    """One citation: the chunk id and, optionally, the verbatim span quoted from it."""

    chunk_id: NonEmptyStr
    span: str | None = None

    @field_validator("span")
    @classmethod
    def _span_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("span must be omitted or contain text, got an empty/blank string")
        return value


class Claim(_Record):
    """A claim of the answer (a clause in a structured answer, a sentence in free text)."""

    text: str
    citations: tuple[Citation, ...] = ()
    start: int | None = Field(default=None, description="offset in the free-text answer, if parsed")
    end: int | None = None


class Answer(_Record):
    """A parsed answer: claims with their citations.

    An abstention (``abstained=True``) says the sources do not contain the answer and makes no claims.
    """

    claims: tuple[Claim, ...]
    format: Literal["structured", "free_text"] = "structured"
    raw: str | None = Field(default=None, description="the raw text the answer was parsed from")
    span_policy: str | None = Field(default=None, description="the span policy decoding enforced")
    abstained: bool = Field(
        default=False, description="the answer says the sources do not contain the answer (it has no claims)"
    )

    @field_validator("abstained")
    @classmethod
    def _abstention_has_no_claims(cls, value: bool, info: Any) -> bool:
        claims = info.data.get("claims") or ()
        if value and claims:
            raise ValueError(f"an abstention makes no claims, got {len(claims)}")
        return value


class CitationCheck(_Record):
    """Guard ① outcome for one citation. A passing citation carries its verified raw offsets."""

    claim_index: int
    citation_index: int
    chunk_id: str
    span: str | None
    passed: bool
    reason: ReasonCode | None = None
    placement: Placement | None = None
    related_chunk_id: str | None = None


class ClaimCheck(_Record):
    """Guard ② outcome for one claim: whether it is factual and why it was classified so."""

    claim_index: int
    factual: bool
    kind: str
    cited: bool


class Verdict(_Record):
    """A support judge's verdict on one (claim, passage) pair. ``partial`` fails.

    Attributes:
        label: ``yes``, ``partial`` or ``no``.
        raw: What the judge said, verbatim.
        judge: The judge's name.
        version: The judge's version (a cache or a routing made for another version does not apply).
        score: The judge's score in [0, 1] when it has one (routing thresholds apply to it).
        cached: The verdict came from a verdict cache, not a fresh judge call.
    """

    label: VerdictLabel
    raw: str
    judge: str
    version: str
    score: float | None = None
    cached: bool = False

    @property
    def passed(self) -> bool:
        """True only for ``yes``."""
        return self.label == "yes"


class Finding(_Record):
    """One failure, with everything a reviewer needs. Findings are values, never exceptions."""

    request_id: str
    prompt_sha256: str
    reason: ReasonCode
    layer: Layer
    claim_index: int
    claim: str
    citation_index: int | None = None
    chunk_id: str | None = None
    span: str | None = None
    passage: str | None = None
    related_chunk_id: str | None = None
    detail: str = ""
    verdicts: dict[str, str] = Field(default_factory=dict)
    judge_raw: str | None = None
    judge_version: str | None = None


class GuardReport(_Record):
    """Everything the guard found about one answer against one logged prompt."""

    schema_version: Literal["1"] = RECORD_SCHEMA_VERSION
    request_id: str
    prompt_sha256: str
    ok: bool
    layers: tuple[Layer, ...]
    citations: tuple[CitationCheck, ...]
    claims: tuple[ClaimCheck, ...]
    findings: tuple[Finding, ...]

    @property
    def counts(self) -> dict[str, int]:
        """Number of findings per reason code (only codes that occurred)."""
        out: dict[str, int] = {}
        for finding in self.findings:
            out[finding.reason.value] = out.get(finding.reason.value, 0) + 1
        return out


@dataclass(frozen=True)
class Generation:
    """What a backend returns for one request.

    Attributes:
        text: The raw output text (JSON for constrained backends, prose for naive ones).
        backend: Backend name (``local``, ``naive``, ``openai``, ``instructor``, ``fake``).
        model: Model identifier.
        enforced: The constraint was enforced during decoding (False for naive or unconstrained output).
        prompt_tokens: Prompt tokens, if known.
        completion_tokens: Generated tokens, if known.
        latency_s: Wall time of the call in seconds.
        first_token_s: Time to first token in seconds, if measured.
        finish_reason: ``stop``, ``length`` (hit max_tokens) or backend-specific.
        notes: Anything the backend wants recorded (downgrades, reasks, warnings).
    """

    text: str
    backend: str
    model: str
    enforced: bool
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    first_token_s: float | None = None
    finish_reason: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
