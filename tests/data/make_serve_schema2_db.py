"""Makes tests/data/serve-schema2.db, a hosted study's database as satcal wrote it at schema
version 2 (the commit 2e70104, before schema 3's slot index), for tests/test_serve.py's
migration test. Run with the OLD code on the path, never the current:

    git worktree add --detach /tmp/old2 2e70104
    PYTHONPATH=/tmp/old2/src python tests/data/make_serve_schema2_db.py tests/data/serve-schema2.db
    git worktree remove /tmp/old2

The batch: 4 pages of 2 items (no traps, no attention checks), 2 answers an example. Three
participants answer 2 pages each; a fourth holds a page unanswered. SCHEMA_2_* below is what
the test builds the same batch from.
"""
import hashlib
import sys
import time
from pathlib import Path

#: The batch's key digest (any fixed 64 hex digits: the database belongs to this "batch").
SCHEMA_2_DIGEST = hashlib.sha256(b"satcal serve schema-2 fixture").hexdigest()
#: The pages: {page: [item id, ...]}.
SCHEMA_2_PAGES = {1: ["e01", "e02"], 2: ["e03", "e04"], 3: ["e05", "e06"], 4: ["e07", "e08"]}
#: The four answer codes, given in turn.
CODES = ("a_better", "b_better", "both_good", "both_bad")


def views(pages):
    """The pages as HostedStudy takes them: each item a view with its id and kind."""
    return {p: [{"item_id": i, "kind": "item"} for i in items] for p, items in pages.items()}


def main(out: str) -> None:
    from satcal.serve import db
    from satcal.serve.study import HostedStudy, ServeSettings
    assert db.SCHEMA_VERSION == 2, f"run with the schema-2 code (2e70104), not {db.SCHEMA_VERSION}"
    path = Path(out)
    path.unlink(missing_ok=True)
    engine = db.connect(f"sqlite:///{path.resolve()}")
    settings = ServeSettings(pages_per_participant=2, attention_checks=0, answers_per_example=2,
                             traps_per_participant=0, min_traps=0, traps_on_top=False)
    study = HostedStudy(views(SCHEMA_2_PAGES), settings, engine, SCHEMA_2_DIGEST)
    n = 0
    for who in ("p1", "p2", "p3"):
        pid = study.enter("lab", who)
        for _ in range(2):
            view = study.next_page(pid)
            form = {}
            for it in view.items:
                form[f"answer-{it['item_id']}"] = CODES[n % 4]
                n += 1
            assert study.submit(pid, view.token, form) == "stored"
    study.next_page(study.enter("lab", "p4"))   # a page held, not answered
    engine.dispose()
    import sqlite3
    raw = sqlite3.connect(path)   # one file: the WAL checkpointed into it
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.execute("PRAGMA journal_mode=DELETE")
    raw.execute("VACUUM")
    raw.close()
    print(f"{path}: {n} answers at schema {db.SCHEMA_VERSION}, {time.strftime('%Y-%m-%d')}")


if __name__ == "__main__":
    main(sys.argv[1])
