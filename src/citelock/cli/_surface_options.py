"""The surface options ``check`` and ``answer`` share, validated before anything is read, written or sent.

``--surface --stakes --sample-rate --judge --judge-base-url --judge-model --on-fail --calibration
--escalate-base-url``: each is declared once here (a commands lists them with these annotated types), and
:func:`surface_setup` turns them into what a command needs — a :class:`~citelock.guard.SurfacePolicy`, its
support judge and an optional stronger judge for escalation — in one function, so the way a surface is built
from the command line lives in one place. Every check of a value or a combination happens here, first; a bad
one exits 2 with a message naming the option and what was expected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from citelock.cli._io import fail, is_stdin, read_json, reading, shown
from citelock.errors import UsageError
from citelock.guard import Guard, SurfacePolicy
from citelock.judges import DEFAULT_JUDGE, JUDGE_NAMES, Judge, make_judge
from citelock.judges._routing import Routing, load_surface_routing
from citelock.store import CachedJudge

__all__ = [
    "CalibrationOption",
    "EscalateBaseUrlOption",
    "JudgeBaseUrlOption",
    "JudgeModelOption",
    "JudgeOption",
    "ON_FAIL",
    "OnFailOption",
    "SampleRateOption",
    "StakesOption",
    "SurfaceOption",
    "SurfaceSetup",
    "surface_setup",
]

ON_FAIL = ("block", "drop_claim", "mark")
STAKES = ("high", "low")

SurfaceOption = Annotated[
    str | None,
    typer.Option(
        "--surface",
        help="run this surface's policy: the support judge ③, its routing and --on-fail; with a database, "
        "findings go to the review queue and results are stored for `citelock metrics`",
    ),
]
StakesOption = Annotated[
    str, typer.Option("--stakes", help="high: judge every surviving citation, fail closed; low: judge a sample")
]
SampleRateOption = Annotated[
    float | None,
    typer.Option("--sample-rate", min=0.0, max=1.0, help="low stakes: the fraction of citations judged (0..1)"),
]
JudgeOption = Annotated[
    str | None,
    typer.Option(
        "--judge",
        help=f"support judge ③: {', '.join(JUDGE_NAMES)} (a judging surface without --judge uses {DEFAULT_JUDGE})",
    ),
]
JudgeBaseUrlOption = Annotated[
    str | None,
    typer.Option("--judge-base-url", help="--judge llm on an OpenAI-compatible server at this /v1 URL"),
]
JudgeModelOption = Annotated[
    str | None,
    typer.Option("--judge-model", help="--judge llm: a GGUF file, or with --judge-base-url the server's model"),
]
OnFailOption = Annotated[
    str | None,
    typer.Option(
        "--on-fail",
        help="what a failing claim does: block (refuse the whole answer, the default), drop_claim (serve the "
        "answer without it), mark (serve it marked unverified); its findings are queued either way",
    ),
]
CalibrationOption = Annotated[
    Path | None,
    typer.Option(
        "--calibration",
        help="CALIBRATION.json (citelock calibrate --fit --write): route the judge's scores with the thresholds "
        "for this surface's name, else its '*' entry; they must have been calibrated for the judge in use",
    ),
]
EscalateBaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--escalate-base-url",
        help="escalate citations the calibrated routing sends to review to the LLM judge on this "
        "OpenAI-compatible server (/v1 URL, its first listed model); without it they go to the review queue "
        "as UNCERTAIN_SUPPORT",
    ),
]


@dataclass(frozen=True)
class SurfaceSetup:
    """What a command needs to run a surface policy, built from the command line.

    Attributes:
        policy: The surface's policy.
        judge: The support judge (cached per claim/passage), or None on a low-stakes surface that judges nothing.
        escalate: The stronger judge for citations routed to review, or None.
        guard: The :class:`~citelock.Guard` built from them (its routing checked before anything is written).
    """

    policy: SurfacePolicy
    judge: Judge | None
    escalate: Judge | None
    guard: Guard


def surface_setup(
    *,
    surface: str | None,
    stakes: str,
    sample_rate: float | None,
    judge: str | None,
    judge_base_url: str | None,
    judge_model: str | None,
    on_fail: str | None,
    calibration: Path | None,
    escalate_base_url: str | None,
) -> SurfaceSetup | None:
    """Validate the surface options and build the surface (exit 2 with a clear message on bad usage).

    The surface policy runs when any of ``--surface``, ``--judge``, ``--on-fail`` or ``--calibration`` is
    given (surface name ``default`` when ``--surface`` is not). A surface that judges (high stakes, or a
    sample rate above 0) without ``--judge`` uses the default judge (:data:`citelock.judges.DEFAULT_JUDGE`), as
    :func:`citelock.answer` does. Nothing is read from a server here: a judge server that cannot be reached
    fails at its first call (exit 4).

    Returns:
        The policy and its judges, or None when only the free deterministic checks were asked for.
    """
    _check_values(
        surface=surface,
        stakes=stakes,
        sample_rate=sample_rate,
        judge=judge,
        judge_base_url=judge_base_url,
        judge_model=judge_model,
        on_fail=on_fail,
        calibration=calibration,
        escalate_base_url=escalate_base_url,
    )
    if surface is None and judge is None and on_fail is None and calibration is None:
        return None
    name = surface or "default"
    rate = sample_rate if sample_rate is not None else (1.0 if judge or stakes == "high" else 0.0)
    judge_name = judge or (DEFAULT_JUDGE if stakes == "high" or rate > 0 else None)
    routing: Routing | None = None
    if calibration is not None:
        read_json(calibration, "calibration")  # bounded, JSON, nesting: the file's own loader is then safe
        try:
            with reading(calibration, "calibration"):  # the loader reads UTF-8 only (no byte-order mark)
                routing = load_surface_routing(calibration, name)
        except UsageError as exc:
            fail(str(exc))
    try:
        policy = SurfacePolicy.model_validate(
            {"name": name, "stakes": stakes, "sample_rate": rate, "routing": routing, "on_fail": on_fail or "block"}
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "surface"
        fail(f"surface {name!r}: {field}: {err['msg']}")
    try:
        built = CachedJudge(_make_judge(judge_name, judge_base_url, judge_model)) if judge_name else None
        stronger = CachedJudge(_make_judge("llm", escalate_base_url, None)) if escalate_base_url else None
        guard = Guard(policy, built, escalate=stronger)  # a routing made for another judge fails here
    except UsageError as exc:
        fail(str(exc))
    return SurfaceSetup(policy, built, stronger, guard)


def _check_values(
    *,
    surface: str | None,
    stakes: str,
    sample_rate: float | None,
    judge: str | None,
    judge_base_url: str | None,
    judge_model: str | None,
    on_fail: str | None,
    calibration: Path | None,
    escalate_base_url: str | None,
) -> None:
    """Each option's value and each combination, with a message naming the option (exit 2)."""
    if surface is not None and (not surface.strip() or not surface.isprintable()):
        fail(f"--surface {surface!r}: expected a non-empty printable surface name, e.g. --surface legal")
    if stakes not in STAKES:
        fail(f"--stakes must be high or low, got {stakes!r}")
    if on_fail is not None and on_fail not in ON_FAIL:
        fail(f"--on-fail must be block, drop_claim or mark, got {on_fail!r}")
    if judge is not None and judge not in JUDGE_NAMES:
        fail(f"--judge: unknown judge {judge!r}; expected one of {', '.join(JUDGE_NAMES)}")
    if sample_rate is not None:
        if not math.isfinite(sample_rate):
            fail(f"--sample-rate must be a number from 0 to 1, got {sample_rate}")
        if stakes == "high" and sample_rate != 1.0:
            fail(
                f"--sample-rate {sample_rate}: a high-stakes surface judges every citation, so sample_rate must be "
                "1.0; give --stakes low to judge a sample"
            )
        if surface is None and judge is None and on_fail is None and calibration is None:
            fail("--sample-rate needs a surface policy: give --surface NAME (or --judge)")
    if judge != "llm" and (judge_base_url is not None or judge_model is not None):
        fail("--judge-base-url and --judge-model need --judge llm")
    for option, url in (("--judge-base-url", judge_base_url), ("--escalate-base-url", escalate_base_url)):
        if url is not None and not url.startswith(("http://", "https://")):
            fail(
                f"{option} {url!r}: expected an http(s) URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1"
            )
    if escalate_base_url is not None and calibration is None:
        fail("--escalate-base-url escalates citations routed to review: give --calibration (a routing) too")
    if calibration is not None and is_stdin(calibration):
        fail("--calibration reads a file: standard input ('-') is not accepted here")
    if judge_model is not None and judge_base_url is None and not Path(judge_model).is_file():
        fail(f"--judge-model {shown(judge_model)}: no such GGUF file (with --judge-base-url it names a server's model)")


def _make_judge(name: str, base_url: str | None, model: str | None) -> Judge:
    """The judge named on the command line: a server's model with a base URL, else a GGUF file for ``llm``."""
    if base_url is not None:
        return make_judge(name, base_url=base_url, api_model=model)
    return make_judge(name, model=Path(model) if model is not None else None)
