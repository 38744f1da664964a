"""Readers for the human-labeled support datasets, mapped to the judge's three verdicts.

Every reader returns :class:`LabeledItem` values: one claim, the passage(s) it was judged against, and the
human label mapped to ``yes`` / ``partial`` / ``no`` — or ``not_yes`` where the dataset only says
"not attributable" (AttributionBench folds partial into it). Rows that carry no usable label or no passage
are never silently dropped: the reader counts them in :attr:`Dataset.skipped` with the reason.

Formats (JSON lines):

- ``wice``: WiCE ``claim_dev`` (``claim``, ``evidence`` = list of sentences of the cited page, ``label``
  supported/partially_supported/not_supported) — one item per row, the passage is the sentences joined by
  line breaks. WiCE ``oracle_dev`` (short evidence chunks, several rows per ``meta.id``) — one item per claim
  id with one passage per row; the judge's verdicts are aggregated by max, as upstream does.
- ``attributionbench``: ``claim``, ``references`` (passage texts, joined), ``attribution_label``.
- ``expertqa``: ``answers[system].claims[i]`` with ``claim_string``, ``evidence`` (list of
  ``"[n] URL"`` + blank line + passage; the ``[n] URL`` header is removed) and ``support`` (Complete -> yes,
  Partial/Incomplete -> partial; Missing, N/A and empty evidence are skipped: no citation to judge).
- ``labels``: this project's hand labels, ``{"claim", "passage", "label", "id"?}`` with label yes/partial/no.
- ``queue``: a review queue database (SQLite file or URL): accepted support findings are ``yes`` labels.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from citelock.errors import InputError

__all__ = [
    "DATASET_FORMATS",
    "Dataset",
    "Evidence",
    "GoldLabel",
    "LabeledItem",
    "item_split",
    "parse_evidence",
    "read_attributionbench",
    "read_dataset",
    "read_expertqa",
    "read_labels",
    "read_pairs",
    "read_queue",
    "read_wice",
    "wice_split",
]

GoldLabel = Literal["yes", "partial", "no", "not_yes"]
DATASET_FORMATS = ("wice", "expertqa", "attributionbench", "labels", "queue")

_WICE_LABELS: dict[str, GoldLabel] = {
    "supported": "yes",
    "partially_supported": "partial",
    "not_supported": "no",
}
_AB_LABELS: dict[str, GoldLabel] = {"attributable": "yes", "not attributable": "not_yes"}
_EXPERTQA_LABELS: dict[str, GoldLabel] = {"Complete": "yes", "Partial": "partial", "Incomplete": "partial"}
_HAND_LABELS: dict[str, GoldLabel] = {"yes": "yes", "partial": "partial", "no": "no"}


@dataclass(frozen=True)
class LabeledItem:
    """One human-labeled claim with the passage(s) it was judged against.

    Attributes:
        id: A stable identifier (the dataset's own id where it has one).
        claim: The claim text.
        passages: One passage, or several to be judged separately and aggregated by max (WiCE oracle).
        label: The human label mapped to the judge's verdicts (``not_yes``: partial or no, unknown which).
        source: The dataset (and sub-source, e.g. ``attributionbench/ExpertQA``).
        group: What items sharing provenance have in common (claim id, question), for honest splits.
    """

    id: str
    claim: str
    passages: tuple[str, ...]
    label: GoldLabel
    source: str
    group: str


@dataclass
class Dataset:
    """The items read from one file, and what was skipped and why."""

    format: str
    items: list[LabeledItem]
    skipped: Counter[str] = field(default_factory=Counter)

    @property
    def label_counts(self) -> dict[str, int]:
        """How many items carry each gold label."""
        return dict(Counter(item.label for item in self.items))


def wice_split(claim_id: str) -> Literal["train", "heldout"]:
    """The fixed split of WiCE claim ids used to fit and to evaluate the offline judge.

    Half of the claim ids (by a hash of the id, so the split is stable and needs no list) are held out:
    the shipped judge never saw them in training or model selection.
    """
    digest = hashlib.sha256(f"citelock-wice-split:{claim_id}".encode()).digest()
    return "heldout" if digest[0] % 2 == 0 else "train"


def item_split(item: LabeledItem) -> Literal["train", "heldout"]:
    """The fixed train / held-out split of any labeled item, by its group (WiCE claim id, ExpertQA question).

    The same hash as :func:`wice_split` applied to ``item.group``: for WiCE the group is the claim id, so the
    two agree; for ExpertQA every claim of one question lands on the same side.
    """
    return wice_split(item.group)


def _json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"dataset file {path}: cannot read it ({exc.strerror})") from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"dataset file {path} line {number}: not valid JSON ({exc.msg})") from None


def _require(row: Any, key: str, kind: type, path: Path, number: int) -> Any:
    if not isinstance(row, dict):
        raise InputError(f"dataset file {path} line {number}: expected a JSON object, got {type(row).__name__}")
    value = row.get(key)
    if not isinstance(value, kind):
        raise InputError(
            f"dataset file {path} line {number}: field {key!r} should be {kind.__name__}, got {type(value).__name__}"
        )
    return value


def read_wice(path: Path) -> Dataset:
    """Read WiCE ``claim_dev`` or ``oracle_dev`` (told apart by ``meta.chunk_idx``)."""
    items: list[LabeledItem] = []
    skipped: Counter[str] = Counter()
    oracle: dict[str, list[tuple[str, str, str]]] = {}
    for number, row in _json_lines(path):
        claim = _require(row, "claim", str, path, number)
        evidence = _require(row, "evidence", list, path, number)
        raw_label = _require(row, "label", str, path, number)
        meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
        claim_id = str(meta.get("id", f"line{number}"))
        if raw_label not in _WICE_LABELS:
            raise InputError(
                f"dataset file {path} line {number}: label {raw_label!r} is not one of {sorted(_WICE_LABELS)}"
            )
        if not all(isinstance(s, str) for s in evidence):
            raise InputError(f"dataset file {path} line {number}: 'evidence' should be a list of strings")
        passage = "\n".join(evidence)
        if not passage.strip():
            skipped["empty evidence"] += 1
            continue
        if "chunk_idx" in meta:
            oracle.setdefault(claim_id, []).append((claim, passage, raw_label))
        else:
            items.append(LabeledItem(claim_id, claim, (passage,), _WICE_LABELS[raw_label], "wice/claim", claim_id))
    for claim_id, rows in oracle.items():
        labels = {r[2] for r in rows}
        claims = {r[0] for r in rows}
        if len(labels) != 1 or len(claims) != 1:
            raise InputError(
                f"dataset file {path}: rows of claim id {claim_id} disagree on the claim or label ({sorted(labels)})"
            )
        items.append(
            LabeledItem(
                claim_id,
                rows[0][0],
                tuple(r[1] for r in rows),
                _WICE_LABELS[rows[0][2]],
                "wice/oracle",
                claim_id,
            )
        )
    return Dataset("wice", items, skipped)


def read_attributionbench(path: Path) -> Dataset:
    """Read AttributionBench (``attributable`` -> yes, ``not attributable`` -> not_yes)."""
    items: list[LabeledItem] = []
    skipped: Counter[str] = Counter()
    for number, row in _json_lines(path):
        claim = _require(row, "claim", str, path, number)
        refs = _require(row, "references", list, path, number)
        raw_label = _require(row, "attribution_label", str, path, number)
        if raw_label not in _AB_LABELS:
            raise InputError(
                f"dataset file {path} line {number}: attribution_label {raw_label!r} is not one of {sorted(_AB_LABELS)}"
            )
        passage = "\n\n".join(r for r in refs if isinstance(r, str)).strip()
        if not passage:
            skipped["no reference text"] += 1
            continue
        src = str(row.get("src_dataset", ""))
        item_id = str(row.get("id", f"line{number}"))
        question = str(row.get("question", ""))
        items.append(
            LabeledItem(item_id, claim.strip(), (passage,), _AB_LABELS[raw_label], f"attributionbench/{src}", question)
        )
    return Dataset("attributionbench", items, skipped)


@dataclass(frozen=True)
class Evidence:
    r"""One ExpertQA evidence string, split into its marker, its URL and its passage text.

    ExpertQA stores evidence as ``"[n] URL\n\npassage"``; for systems that searched the web themselves
    (``bing_chat``, ``gpt4``) only ``"[n] URL"`` is kept, with no passage. Such evidence has ``text`` ``None``:
    there is nothing to judge a claim against, so readers skip it and count it, never judge a URL.
    """

    marker: int | None
    url: str | None
    text: str | None


_MARKER = re.compile(r"^\s*\[(\d+)\]\s*")


def parse_evidence(evidence: str) -> Evidence:
    """Split one ExpertQA evidence string (see :class:`Evidence`)."""
    head, sep, body = evidence.partition("\n\n")
    if not sep:
        # "[n] URL" alone, or a bare passage with no header
        match = _MARKER.match(evidence)
        if match:
            rest = evidence[match.end() :].strip()
            url = rest if rest and " " not in rest else None
            if url is not None or not rest:
                return Evidence(int(match.group(1)), url, None)
            return Evidence(int(match.group(1)), None, rest)
        text = evidence.strip()
        return Evidence(None, None, text or None)
    match = _MARKER.match(head)
    marker = int(match.group(1)) if match else None
    rest = head[match.end() :].strip() if match else head.strip()
    url = rest.split()[0] if rest else None
    text = body.strip()
    return Evidence(marker, url, text or None)


def read_expertqa(path: Path) -> Dataset:
    """Read ExpertQA: one item per claim with evidence and a Complete/Partial/Incomplete support label."""
    items: list[LabeledItem] = []
    skipped: Counter[str] = Counter()
    for number, row in _json_lines(path):
        question = _require(row, "question", str, path, number)
        answers = _require(row, "answers", dict, path, number)
        for system, answer in sorted(answers.items()):
            claims = answer.get("claims") if isinstance(answer, dict) else None
            if not isinstance(claims, list):
                raise InputError(f"dataset file {path} line {number}: answers[{system!r}].claims should be a list")
            for index, claim in enumerate(claims):
                text = claim.get("claim_string") if isinstance(claim, dict) else None
                if not isinstance(text, str):
                    raise InputError(
                        f"dataset file {path} line {number}: answers[{system!r}].claims[{index}] has no claim_string"
                    )
                support = claim.get("support")
                evidence = [e for e in (claim.get("evidence") or []) if isinstance(e, str)]
                if support not in _EXPERTQA_LABELS:
                    skipped[f"support {support!r}"] += 1
                    continue
                texts = [p.text for p in map(parse_evidence, evidence) if p.text]
                if len(texts) < len(evidence):
                    skipped["evidence without passage text (URL only)"] += len(evidence) - len(texts)
                passage = "\n\n".join(texts).strip()
                if not passage:
                    skipped["no evidence text"] += 1
                    continue
                items.append(
                    LabeledItem(
                        f"line{number}/{system}/{index}",
                        text.strip(),
                        (passage,),
                        _EXPERTQA_LABELS[support],
                        f"expertqa/{system}",
                        question.strip(),
                    )
                )
    return Dataset("expertqa", items, skipped)


def read_pairs(path: Path) -> list[dict[str, str]]:
    """Read unlabeled pairs ``{"claim", "passage", "id"?}`` (the input of hand labeling).

    Rows without an ``id`` get ``"line<N>"``.
    """
    pairs: list[dict[str, str]] = []
    for number, row in _json_lines(path):
        claim = _require(row, "claim", str, path, number)
        passage = _require(row, "passage", str, path, number)
        pair_id = row.get("id", f"line{number}")
        pairs.append({"id": str(pair_id), "claim": claim, "passage": passage})
    return pairs


def read_labels(path: Path) -> Dataset:
    """Read hand labels ``{"claim", "passage", "label", "id"?}``; skipped pairs (label ``skip``) are counted."""
    items: list[LabeledItem] = []
    skipped: Counter[str] = Counter()
    for number, row in _json_lines(path):
        claim = _require(row, "claim", str, path, number)
        passage = _require(row, "passage", str, path, number)
        label = _require(row, "label", str, path, number)
        item_id = str(row.get("id", f"line{number}"))
        if label == "skip":
            skipped["skipped by labeler"] += 1
            continue
        if label not in _HAND_LABELS:
            raise InputError(f"dataset file {path} line {number}: label {label!r} is not one of yes, partial, no, skip")
        items.append(LabeledItem(item_id, claim, (passage,), _HAND_LABELS[label], "labels", item_id))
    return Dataset("labels", items, skipped)


def read_queue(target: str | Path) -> Dataset:
    """Read a review queue's resolved support findings as labels (read-only use of the queue store).

    A reviewer's ``accept`` of a support finding says the judge was too strict: the (claim, passage) pair is
    labeled ``yes`` (the queue stores it as a calibration sample). Other outcomes carry no support label.

    Args:
        target: The queue's SQLite file or database URL.
    """
    from citelock.store._queue import ReviewQueue

    if "://" not in str(target) and not Path(target).is_file():
        raise InputError(f"review queue {target}: expected an existing SQLite file or a database URL")
    items = [
        LabeledItem(
            sample.entry_id, sample.claim, (sample.passage,), _HAND_LABELS[sample.label], "queue", sample.entry_id
        )
        for sample in ReviewQueue(target).calibration_samples()
    ]
    return Dataset("queue", items, Counter())


_READERS = {
    "wice": read_wice,
    "attributionbench": read_attributionbench,
    "expertqa": read_expertqa,
    "labels": read_labels,
    "queue": read_queue,
}


def read_dataset(fmt: str, path: Path) -> Dataset:
    """Read ``path`` in format ``fmt`` (one of :data:`DATASET_FORMATS`).

    Raises:
        InputError: an unknown format, an unreadable file, or a row that does not fit the format.
    """
    reader = _READERS.get(fmt)
    if reader is None:
        raise InputError(f"unknown dataset format {fmt!r}; expected one of {', '.join(DATASET_FORMATS)}")
    return reader(path)
