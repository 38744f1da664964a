"""The review desk shows a logged prompt whose derived fields were forged as tampered, never as verified evidence.

Issue 34, item 4: the desk reads records from the prompt log; a row rewritten with an edited ``normalized`` copy
(its content hash and its own chain link recomputed, its messages and sha256 unchanged) must fail the check.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import text

from citelock import ReasonCode
from citelock.review import entry_view
from citelock.store._chain import content_hash, link_hash
from support.review_desk import seed_desk


def test_a_forged_normalized_copy_is_shown_as_tampered(tmp_path: Path) -> None:
    seeded = seed_desk(str(tmp_path / "desk.db"), accounts=False)
    entry = seeded.desk.queue.get(seeded.ids[ReasonCode.UNSUPPORTED])
    before = entry_view(entry, [], seeded.desk.log, seeded.desk.results)
    assert before.prompt_state == "ok"
    engine = seeded.desk.log.engine
    with engine.begin() as conn:
        row = (
            conn.execute(text("SELECT * FROM citelock_prompt_log WHERE request_id = :id"), {"id": entry.request_id})
            .mappings()
            .one()
        )
        data = json.loads(row["record"])
        data["normalized"] = [t.replace("buyer", "seller") for t in data["normalized"]]
        payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        digest = content_hash(payload)
        chain = link_hash(None, row["seq"], row["prev_hash"], row["request_id"], digest)
        conn.execute(text("DROP TRIGGER citelock_prompt_log_no_update"))
        conn.execute(
            text(
                "UPDATE citelock_prompt_log SET record = :r, record_sha256 = :d, chain_hash = :c WHERE request_id = :id"
            ),
            {"r": payload, "d": digest, "c": chain, "id": entry.request_id},
        )
    assert payload != row["record"]
    view = entry_view(entry, [], seeded.desk.log, seeded.desk.results)
    assert view.prompt_state == "tampered"
    assert "derived fields disagree" in view.prompt_problem
