"""What citelock's telemetry emits: the one :class:`Settings` object, read by the hook and the implementation.

Its own module, so the OpenTelemetry implementation (:mod:`citelock.telemetry._otel`) and the hook that loads it
(:mod:`citelock.telemetry._hook`) both import it and neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["SETTINGS", "JudgeSpans", "Settings"]

JudgeSpans = Literal["auto", "all", "none"]
"""Which support-judge calls get a span: ``auto`` those of judges that call a model (not the shipped in-process
``lexical`` and ``offline`` judges, whose calls take microseconds: a span would cost more than the call),
``all``, or ``none``."""


@dataclass
class Settings:
    """What the integration emits (see :func:`citelock.telemetry.configure`)."""

    enabled: bool = True
    logs: bool = True
    span_events: bool = False
    judge_spans: JudgeSpans = "auto"
    tracer_provider: Any = None
    logger_provider: Any = None
    deferred: bool = True


SETTINGS = Settings()
