"""Exported rows for the audit tests: a deterministic mix of clean answers, every kind of finding and bad rows.

``make_rows(n)`` returns ``n`` rows in the ``schemas/audit_row.v1.json`` shape. Row ``i`` (0-based) is, by
``i % 8``: 0 a clean answer with spans, 1 a fabricated chunk id, 2 a number the passage does not hold, 3 an
uncited factual claim, 4 a chunk cut short in the prompt (truncated) cited inside what survived, 5 free text
with ``[id]`` markers, 6 a clean answer with its own request id, 7 an answer that cannot be parsed (a bad row).
``bad_lines()`` are JSON lines that are not rows at all (for JSONL inputs only). ``log_with_answers`` writes a
prompt log and the answers file of a log audit.
"""

from __future__ import annotations

import hashlib
import json
import random
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from citelock.prompt import record_from_messages
from citelock.store import PromptLog

TOPICS = ("revenue", "freight", "warranty", "margins", "headcount", "inventory", "pricing", "returns")


def _chunk_text(rng: random.Random, topic: str, number: int) -> str:
    words = [
        rng.choice(("the", "company", "reported", "that", "in", "its", "annual", "filing", "and")) for _ in range(40)
    ]
    return f"The {topic} figure was {number} percent in 2023. " + " ".join(words) + "."


def make_row(i: int) -> dict[str, Any]:
    """Row ``i`` of the mix (see the module docstring)."""
    rng = random.Random(i)
    kind = i % 8
    topic = TOPICS[i % len(TOPICS)]
    chunks = [
        {"id": f"d{i}-c{k}", "text": _chunk_text(rng, TOPICS[(i + k) % len(TOPICS)], 10 + (i + k) % 50)}
        for k in range(4)
    ]
    bodies = [f"[{c['id']}] {c['text']}" for c in chunks]
    if kind == 4:  # the last chunk is cut short: only its first 70 characters reach the prompt
        bodies[-1] = f"[{chunks[-1]['id']}] {chunks[-1]['text'][:70]}"
    question = f"What was the {topic} figure in 2023 (case {i})?"
    user = "Sources:\n" + "\n\n".join(bodies) + f"\n\nQuestion: {question}"
    messages = [
        {"role": "system", "content": "Answer only from the sources, citing them."},
        {"role": "user", "content": user},
    ]
    first = chunks[0]
    number = 10 + i % 50
    good_claim = {
        "text": f"The {topic} figure was {number} percent in 2023.",
        "citations": [{"chunk_id": first["id"], "span": f"The {topic} figure was {number} percent in 2023."}],
    }
    answer: Any
    if kind in (0, 6):
        answer = {"claims": [good_claim]}
    elif kind == 1:
        answer = {"claims": [good_claim, {"text": "It rose again.", "citations": [{"chunk_id": f"d{i}-c99"}]}]}
    elif kind == 2:
        answer = {
            "claims": [
                {"text": f"The {topic} figure was {number + 7} percent.", "citations": [{"chunk_id": first["id"]}]}
            ]
        }
    elif kind == 3:
        answer = {"claims": [good_claim, {"text": f"The {topic} figure tripled to {number * 3} percent in 2024."}]}
    elif kind == 4:
        cut = chunks[-1]
        claim = f"The {TOPICS[(i + 3) % len(TOPICS)]} figure was {10 + (i + 3) % 50} percent"  # inside what survived
        answer = {"claims": [{"text": claim + ".", "citations": [{"chunk_id": cut["id"], "span": claim}]}]}
    elif kind == 5:
        answer = f"The {topic} figure was {number} percent in 2023 [{first['id']}]. Nothing else is known."
    else:
        answer = {"claims": "not a list"}
    row: dict[str, Any] = {"messages": messages, "chunks": chunks, "question": question, "answer": answer}
    if kind == 6:
        row["request_id"] = f"req-{i}"
    return row


def make_rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    """Rows ``start`` .. ``start + n - 1`` of the mix."""
    return [make_row(i) for i in range(start, start + n)]


def bad_lines() -> list[str]:
    """Lines of a JSONL file that are not rows: broken JSON, not an object, a row without its chunks."""
    no_chunks = {"messages": [{"role": "user", "content": "hi"}], "answer": "Hello."}
    return ["{broken json", "[1, 2, 3]", json.dumps(no_chunks)]


def write_jsonl(path: Path, rows: list[dict[str, Any]], extra_lines: list[str] = ()) -> Path:  # type: ignore[assignment]
    """Write rows (then ``extra_lines`` as they are) as JSON lines."""
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        for line in extra_lines:
            handle.write(line + "\n")
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]], *, json_text: bool = False) -> Path:
    """Write rows as Parquet: nested columns, or (``json_text``) nested values as JSON text columns.

    The answer is always JSON text (it is a string or an object row by row, which one column cannot hold).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    table_rows = []
    for row in rows:
        out = dict(row)
        answer = row["answer"]
        out["answer"] = answer if isinstance(answer, str) else json.dumps(answer)
        if json_text:
            out["messages"] = json.dumps(row["messages"])
            out["chunks"] = json.dumps(row["chunks"])
        table_rows.append(out)
    names = sorted({name for row in table_rows for name in row})  # every row gets every column (null if absent)
    pq.write_table(pa.Table.from_pylist([{name: row.get(name) for name in names} for row in table_rows]), path)
    return path


def log_with_answers(tmp_path: Path, db: str, days: int = 6) -> tuple[Path, datetime]:
    """A prompt log of ``days`` records, one a day from ``start``, and an answers file for them (and strays)."""
    log = PromptLog(db)
    start = datetime(2025, 3, 1, 12, tzinfo=UTC)
    answers = []
    for day in range(days):
        row = make_row(day)
        record = record_from_messages(row["messages"], row["chunks"], question=row["question"], request_id=f"r{day}")
        log.append(record.model_copy(update={"created_at": start + timedelta(days=day)}))
        answers.append({"request_id": f"r{day}", "answer": row["answer"]})
    answers.append({"request_id": "not-logged", "answer": "Hello."})
    answers.append({"request_id": "r1", "answer": "Hi.", "user": "x"})  # an unknown field
    return write_jsonl(tmp_path / "answers.jsonl", answers), start


class JudgeServer:
    """A real HTTP server speaking the chat-completions API, with a verdict fixed by each request's messages."""

    def __init__(self) -> None:
        owner = self
        self.calls = 0
        self.down = False
        self.in_flight = 0
        self.most_in_flight = 0  # the most judge calls the server was answering at once
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._reply({"object": "list", "data": [{"id": "judge", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if owner.down:  # a server going away: the connection closes without an answer
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                with lock:
                    owner.calls += 1
                    owner.in_flight += 1
                    owner.most_in_flight = max(owner.most_in_flight, owner.in_flight)
                time.sleep(0.05)  # a model's latency: calls sent together overlap here
                with lock:
                    owner.in_flight -= 1
                digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).digest()
                verdict = ("yes", "yes", "partial", "no")[digest[0] % 4]
                message = {"role": "assistant", "content": json.dumps({"verdict": verdict})}
                self._reply(
                    {
                        "id": "c",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "judge",
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                )

            def _reply(self, data: dict[str, Any]) -> None:
                body = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
