"""The schema of ``citelock.toml`` (or ``[tool.citelock]`` in ``pyproject.toml``): one pydantic model.

:class:`ConfigFile` is the file as written (after environment interpolation and ``inherit``): the store, named
judges, named backends, ``default_surface`` and ``[surfaces.NAME]`` tables. Every key has a description; the JSON
Schema committed in ``schemas/`` (:func:`config_json_schema`) and the reference page in the docs are generated from
these models, so an editor that reads the schema (Taplo, Even Better TOML) completes and checks the same keys the
loader accepts. Unknown keys are not rejected by the loader's first pass (they are warnings with a did-you-mean,
:mod:`citelock.config._suggest`); the models forbid them, so what reaches a model is exactly what it knows.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

__all__ = [
    "CONFIG_SCHEMA_ID",
    "DEFAULT_REFUSAL",
    "AlarmsConfig",
    "AuditConfig",
    "BackendConfig",
    "ConfigFile",
    "GatewayConfig",
    "JudgeConfig",
    "StreamConfig",
    "SurfaceConfig",
    "Thresholds",
    "config_json_schema",
]

CONFIG_SCHEMA_ID = "urn:citelock:schema:config:v1"
"""The ``$id`` of the configuration file's JSON Schema (``schemas/config.v1.json``)."""

_ENV_REF = {
    "type": "object",
    "properties": {
        "env": {"type": "string", "minLength": 1, "description": "the environment variable to read"},
        "default": {"type": "string", "description": "the value when the variable is not set"},
    },
    "required": ["env"],
    "additionalProperties": False,
}

Secretish = Annotated[
    str,
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "description": 'a value; "${VAR}" inside it reads the environment variable VAR'},
                _ENV_REF,
            ]
        }
    ),
]
"""A string the file may leave to the environment: ``"${VAR}"`` inside it, or the table ``{ env = "VAR" }``."""

_STRICT = ConfigDict(frozen=True, extra="forbid")


class Thresholds(BaseModel):
    """Inline routing thresholds of a judge (instead of a calibration file)."""

    model_config = _STRICT

    pass_at: float = Field(description="scores at or above this pass")
    fail_below: float = Field(description="scores below this fail; scores in between go to review")

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if not self.fail_below <= self.pass_at:
            raise ValueError(
                f"expected fail_below <= pass_at, got fail_below={self.fail_below}, pass_at={self.pass_at}"
            )
        return self


class JudgeConfig(BaseModel):
    """A named support judge: ``[judges.NAME]``."""

    model_config = _STRICT

    kind: Literal["lexical", "offline", "llm"] = Field(
        description="lexical (calibrated word overlap), offline (free, deterministic) or llm (a model)"
    )
    base_url: Secretish | None = Field(
        default=None, description="llm: an OpenAI-compatible server at this /v1 URL (else the model runs in-process)"
    )
    model: Secretish | None = Field(
        default=None, description="llm: a GGUF file (in-process), or with base_url the server's model name"
    )
    routing: str | None = Field(
        default=None,
        description="a calibration file (citelock calibrate --fit --write) whose routing applies; relative to "
        "the config file",
    )
    thresholds: Thresholds | None = Field(
        default=None, description="inline routing thresholds for this judge (instead of a routing file)"
    )

    @model_validator(mode="after")
    def _consistent(self) -> JudgeConfig:
        if self.kind != "llm" and (self.base_url is not None or self.model is not None):
            raise ValueError(f"base_url and model are for kind 'llm', not {self.kind!r}")
        if self.routing is not None and self.thresholds is not None:
            raise ValueError("give either routing (a calibration file) or thresholds, not both")
        return self


class BackendConfig(BaseModel):
    """A named generation backend: ``[backends.NAME]``."""

    model_config = _STRICT

    kind: Literal["local", "naive", "openai", "instructor", "outlines", "fake"] = Field(
        description="the backend by name (see `citelock answer --help`)"
    )
    base_url: Secretish | None = Field(default=None, description="openai, instructor: the server's /v1 URL")
    server: str | None = Field(
        default=None, description="openai, instructor: the server kind (openai, vllm, sglang, llama.cpp, ...)"
    )
    model: Secretish | None = Field(
        default=None, description="the model: a bundled model's name for local, the server's model name otherwise"
    )
    api_key: Secretish | None = Field(
        default=None, description='the API key: never written here, read from the environment ({ env = "KEY" })'
    )


class AuditConfig(BaseModel):
    """A surface's audit plan: ``[surfaces.NAME.audit]`` (the fields of :class:`citelock.guard.AuditPlan`)."""

    model_config = _STRICT

    near_pass_rate: float = Field(
        default=0.25, ge=0.0, le=1.0, description="sampling probability of a pass just above the pass threshold"
    )
    pass_rate: float = Field(default=0.05, ge=0.0, le=1.0, description="sampling probability of every other pass")
    near_band: float = Field(default=0.1, ge=0.0, description="width of the band above the pass threshold")
    review_rate: float = Field(
        default=0.1, ge=0.0, le=1.0, description="sampling probability of a citation routed to review"
    )
    fail_rate: float = Field(default=0.05, ge=0.0, le=1.0, description="sampling probability of a failed citation")
    seed: int = Field(default=0, description="salt of the audit's sampling hash")


class StreamConfig(BaseModel):
    """How a streamed answer shows its claims: ``[surfaces.NAME.stream]``."""

    model_config = _STRICT

    show: Literal["immediately", "after_checks", "after_judge"] | None = Field(
        default=None,
        description="when a reader may see a claim (default: after_judge on high stakes, immediately on low)",
    )


DEFAULT_REFUSAL = "I can't give a verified answer to that from the sources I was given."
"""The content of a refused gateway answer when the surface names no refusal text of its own."""


class GatewayConfig(BaseModel):
    """What a blocked answer becomes at the guard gateway's HTTP door: ``[surfaces.NAME.gateway]``."""

    model_config = _STRICT

    on_block: Literal["error", "refuse"] | None = Field(
        default=None,
        description="a blocked answer is an HTTP 400 in OpenAI's error envelope (error, the default) or a 200 "
        "carrying the refusal text with finish_reason content_filter (refuse)",
    )
    refusal: str | None = Field(
        default=None,
        min_length=1,
        description=f"the content of a refused answer (on_block = refuse); default: {DEFAULT_REFUSAL!r}",
    )


class AlarmsConfig(BaseModel):
    """The alarm thresholds of ``citelock metrics --check``: ``[surfaces.NAME.alarms]``."""

    model_config = _STRICT

    window: int = Field(default=4, ge=1, description="weeks pooled for the judge's alarms")
    min_labels: int = Field(
        default=30, ge=1, description="fewest labels of a class behind a rate that clears or alarms"
    )


class SurfaceConfig(BaseModel):
    """One surface: ``[surfaces.NAME]``. Every key is optional: unset keys come from ``inherit``, then defaults."""

    model_config = _STRICT

    inherit: str | None = Field(default=None, description="another surface whose keys this one starts from")
    stakes: Literal["low", "high"] | None = Field(
        default=None, description="high judges every surviving citation and fails closed; low judges a sample"
    )
    on_fail: Literal["block", "drop_claim", "mark"] | None = Field(
        default=None, description="what a failing claim does: block the answer, drop the claim or mark it"
    )
    sample_rate: float | None = Field(
        default=None, ge=0.0, le=1.0, description="low stakes: the fraction of citations judged (high: 1)"
    )
    seed: int | None = Field(default=None, description="salt of the judge's sampling hash")
    fail_closed: bool | None = Field(
        default=None, description="block the answer when a check or judge raises (default: true on high stakes)"
    )
    diagnose: bool | None = Field(default=None, description="run best-evidence diagnosis (WRONG_CHUNK) on failures")
    serve_unverified: bool | None = Field(
        default=None, description="serve a claim in review as is (default: true on low stakes, false on high)"
    )
    relevance: Literal["free", "judged", "off"] | None = Field(
        default=None, description="the OFF_QUESTION check: free, judged (also the relevance judge) or off"
    )
    abstain_below: float | Literal["never"] | None = Field(
        default=None,
        description='abstain before generating when no chunk is this relevant (0..1); "never" turns it off',
    )
    judge: str | None = Field(
        default=None, description="the support judge: a [judges] name, or lexical, offline or llm"
    )
    escalate: str | None = Field(
        default=None, description="a stronger judge ([judges] name) for citations the routing sends to review"
    )
    relevance_judge: str | None = Field(
        default=None, description="relevance = judged: a [judges] name of kind llm with a base_url"
    )
    routing: str | None = Field(
        default=None,
        description="a calibration file whose routing for this surface applies (overrides the judge's); relative "
        "to the config file",
    )
    audit: AuditConfig | None = Field(
        default=None, description="draw audit samples of judged citations for people to label"
    )
    stream: StreamConfig | None = Field(default=None, description="how a streamed answer shows its claims")
    gateway: GatewayConfig | None = Field(
        default=None, description="what a blocked answer becomes at `citelock gateway` (error or refusal)"
    )
    alarms: AlarmsConfig | None = Field(default=None, description="alarm thresholds of `citelock metrics --check`")

    @model_validator(mode="before")
    @classmethod
    def _abstain_word(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("abstain_below"), str) and data["abstain_below"] != "never":
            raise ValueError(f'abstain_below: expected a number from 0 to 1 or "never", got {data["abstain_below"]!r}')
        return data


class ConfigFile(BaseModel):
    """The whole file: ``citelock.toml``, or the ``[tool.citelock]`` table of ``pyproject.toml``."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        title="citelock configuration",
        json_schema_extra={"description": "citelock.toml, or [tool.citelock] in pyproject.toml"},
    )

    store: Secretish | None = Field(
        default=None,
        description='the prompt log, review queue and result store: a SQLite path or a database URL ("${PG_URL}")',
    )
    default_surface: str | None = Field(
        default=None, description="the surface a command runs when none is named (--surface, CITELOCK_SURFACE)"
    )
    default_backend: str | None = Field(
        default=None, description="the [backends] entry `citelock answer` and Citelock.from_config use by default"
    )
    judges: dict[str, JudgeConfig] = Field(default_factory=dict, description="named support judges")
    backends: dict[str, BackendConfig] = Field(default_factory=dict, description="named generation backends")
    surfaces: dict[str, SurfaceConfig] = Field(default_factory=dict, description="named surfaces and their policy")


def config_json_schema() -> dict[str, Any]:
    """The JSON Schema of the configuration file (what ``schemas/config.v1.json`` holds)."""
    schema: dict[str, Any] = _without_null(ConfigFile.model_json_schema(mode="validation"))
    schema["$id"] = CONFIG_SCHEMA_ID
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def _without_null(node: Any) -> Any:
    """The schema as TOML sees it: TOML has no null, so an optional key is one left out, never ``null``."""
    if isinstance(node, list):
        return [_without_null(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _without_null(v) for k, v in node.items() if not (k == "default" and v is None)}
    options = out.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if o != {"type": "null"}]
        if len(kept) == 1 and isinstance(kept[0], dict):
            del out["anyOf"]
            out = {**kept[0], **out}
        else:
            out["anyOf"] = kept
    return out
