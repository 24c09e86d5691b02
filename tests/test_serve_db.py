"""The hosted study's SQLite writes: the threads of one process share commits (group commit)
without losing, doubling or leaking a block's writes."""
from __future__ import annotations

import threading

import pytest


def _engine(tmp_path):
    from sqlalchemy import text
    from satcal.serve import db
    engine = db.connect(f"sqlite:///{tmp_path / 'g.db'}")
    with db.writer(engine).begin() as conn:
        conn.execute(text("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)"))
    return engine


def _key(n: int) -> int:
    """Block n's key: the previous block's (of the same thread) when n % 11 == 0, else n."""
    return n - 1 if n % 11 == 0 and n % 10 != 0 else n


def test_concurrent_blocks_are_each_committed_once_and_failed_ones_undone(tmp_path):
    """48 threads x 10 blocks, every 7th block failing after its insert and every 11th
    inserting a key another block already holds: the table holds exactly the other blocks'
    rows (counted by hand from the schedule), and each block's row is on disk, seen by a new
    connection, as soon as its ``with`` returns."""
    from sqlalchemy import text
    from sqlalchemy.exc import IntegrityError
    from satcal.serve import db
    engine = _engine(tmp_path)
    writer = db.writer(engine)
    unseen, errors = [], []

    def work(t):
        for i in range(10):
            n = t * 10 + i
            key = _key(n)
            try:
                with writer.begin() as conn:
                    conn.execute(text("INSERT INTO t VALUES (:k, :v)"), {"k": key, "v": n})
                    if n % 7 == 0:
                        raise RuntimeError("undo this block")
            except RuntimeError:
                continue
            except IntegrityError:
                continue
            except Exception as exc:  # anything else is a failure of the test
                errors.append(exc)
                continue
            with engine.connect() as other:
                if other.execute(text("SELECT v FROM t WHERE k = :k"), {"k": key}).scalar() != n:
                    unseen.append(n)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(48)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == [] and unseen == []
    # by hand: block n stores (key, n) unless it fails (n % 7 == 0) or its key is the
    # previous block's (same thread, so that one ran first) and that block stored it
    expected = {}
    for n in range(480):
        if n % 7 == 0 or _key(n) in expected:
            continue
        expected[_key(n)] = n
    with engine.connect() as conn:
        rows = dict(conn.execute(text("SELECT k, v FROM t")).all())
    engine.dispose()
    assert rows == expected and len(rows) == 383


def test_a_failed_commit_reaches_every_block_of_its_group(tmp_path, monkeypatch):
    """When the shared commit fails, no block's ``with`` returns as if it had been stored."""
    from sqlalchemy import text
    from satcal.serve import db
    engine = _engine(tmp_path)
    group = db.writer(engine).group

    def broken(self):  # the transaction's commit fails (a full disk, say)
        raise OSError("disk full")

    with db.writer(engine).begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (1, 1)"))
    original = group._txn  # None between groups
    assert original is None
    import sqlalchemy.engine.base as base
    monkeypatch.setattr(base.RootTransaction, "commit", broken)
    with pytest.raises(OSError, match="disk full"):
        with db.writer(engine).begin() as conn:
            conn.execute(text("INSERT INTO t VALUES (2, 2)"))
    monkeypatch.undo()
    with engine.connect() as conn:
        assert dict(conn.execute(text("SELECT k, v FROM t")).all()) == {1: 1}
    engine.dispose()


def test_moving_window_limits_hits_as_counted_by_hand(monkeypatch):
    """The rate limiter allows a hit when fewer than `amount` allowed hits of its key fall in
    the window before it (counted by brute force over a random schedule), keys apart."""
    import numpy as np
    from limits import parse
    from satcal.serve import routes
    rng = np.random.default_rng(5)
    item = parse("4/second")
    times = np.cumsum(rng.exponential(0.12, 400))
    keys = rng.integers(0, 3, 400)
    limiter = routes.MovingWindow(sweep=50)
    clock = iter(times)
    monkeypatch.setattr(routes.time, "monotonic", lambda: next(clock))
    got = [limiter.hit(item, "p", str(k)) for k in keys]
    allowed: dict = {}
    expected = []
    for t, k in zip(times, keys):
        recent = [s for s in allowed.get(k, []) if s > t - 1.0]
        ok = len(recent) < 4
        expected.append(ok)
        if ok:
            allowed.setdefault(k, []).append(t)
    assert got == expected and 0 < sum(got) < len(got)


def test_a_write_inside_another_on_the_same_thread_is_refused_not_a_deadlock(tmp_path):
    """Nesting would wait for itself; it fails at once and the outer block is undone."""
    from sqlalchemy import text
    from satcal.serve import db
    engine = _engine(tmp_path)
    with pytest.raises(RuntimeError, match="inside another"):
        with db.writer(engine).begin() as conn:
            conn.execute(text("INSERT INTO t VALUES (1, 1)"))
            with db.writer(engine).begin():
                pass
    with db.writer(engine).begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (2, 2)"))
    with engine.connect() as conn:
        assert dict(conn.execute(text("SELECT k, v FROM t")).all()) == {2: 2}
    engine.dispose()


def test_read_through_the_driver_gives_sqlalchemys_rows(tmp_path):
    """``db.Read`` (a statement compiled once, run on the driver) returns the rows SQLAlchemy's
    own execution of the same statement returns: values, Booleans as bool, a LIMIT and an
    ORDER BY kept, bound values by name, no row as None."""
    from sqlalchemy import bindparam, insert, select
    from satcal.serve import db
    engine = db.connect(f"sqlite:///{tmp_path / 'r.db'}")
    t = db.tables()
    t["metadata"].create_all(engine)
    p = t["participants"]
    people = [dict(kind=k, external_id=e, study_id="s", session_id="", created_at=1.5 * i, outcome="",
                   simulated=bool(i % 2), consented_at=None if i % 3 else 2.25 * i)
              for i, (k, e) in enumerate([("lab", "a"), ("prolific", "a"), ("prolific", "b"), ("lab", "c")])]
    with db.writer(engine).begin() as conn:
        conn.execute(insert(p), people)
    build = lambda: (select(p).where((p.c.kind == bindparam("kind")) | (p.c.external_id == bindparam("ext")))
                     .order_by(p.c.id.desc()).limit(2))
    read = db.Read(build)
    for kind, ext in (("lab", "b"), ("prolific", "zz"), ("none", "none")):
        with engine.connect() as conn:
            expected = [dict(r) for r in conn.execute(build(), {"kind": kind, "ext": ext}).mappings().all()]
        got = read.rows(engine, kind=kind, ext=ext)
        assert got == expected
        assert [type(r["simulated"]) for r in got] == [bool] * len(expected)
        assert read.first(engine, kind=kind, ext=ext) == (expected[0] if expected else None)
    assert len(read.rows(engine, kind="lab", ext="b")) == 2  # three match, LIMIT 2
    engine.dispose()


def test_write_through_the_driver_does_what_sqlalchemys_execution_does(tmp_path):
    """``db.Write`` (a statement compiled once, run on the driver inside a SQLAlchemy write
    transaction): an insert returns its row's id, ``many`` inserts each row, an update returns
    the rows it changed (1, then 0 once its condition no longer holds), a select returns
    SQLAlchemy's rows (Booleans as bool), and a duplicate raises SQLAlchemy's IntegrityError
    with nothing of its block stored."""
    from sqlalchemy import bindparam, insert, select, update
    from sqlalchemy.exc import IntegrityError
    from satcal.serve import db
    engine = db.connect(f"sqlite:///{tmp_path / 'w.db'}")
    t = db.tables()
    t["metadata"].create_all(engine)
    p = t["participants"]
    names = ("kind", "external_id", "study_id", "session_id", "created_at", "outcome", "simulated")
    add = db.Write(lambda: insert(p).values(**{n: bindparam(n) for n in names}), returning_id=True)
    add_many = db.Write(lambda: insert(p).values(**{n: bindparam(n) for n in names}).inline())
    consent = db.Write(lambda: update(p).where((p.c.id == bindparam("pid")) & p.c.consented_at.is_(None))
                       .values(consented_at=bindparam("at")))
    build = lambda: select(p.c.id, p.c.external_id, p.c.simulated).where(p.c.kind == bindparam("kind")).order_by(p.c.id)
    find = db.Write(build)
    people = [dict(kind=k, external_id=e, study_id="s", session_id="", created_at=1.5 * i, outcome="",
                   simulated=bool(i % 2)) for i, (k, e) in enumerate([("lab", "a"), ("prolific", "a"), ("lab", "c")])]
    writer = db.writer(engine)
    ids = [writer.run(lambda conn: add.run(conn, **people[0]))]
    writer.run(lambda conn: add_many.many(conn, people[1:]))
    changed = [writer.run(lambda conn: consent.run(conn, pid=1, at=7.25)) for _ in range(2)]
    assert ids == [1] and changed == [1, 0]
    with engine.connect() as conn:
        stored = [dict(r) for r in conn.execute(select(*(p.c[n] for n in ("id",) + names + ("consented_at",)))
                                                .order_by(p.c.id)).mappings()]
        expected = [dict(r) for r in conn.execute(build(), {"kind": "lab"}).mappings()]
    assert stored == [dict(id=i + 1, **person, consented_at=7.25 if i == 0 else None) for i, person in enumerate(people)]
    got = writer.run(lambda conn: find.run(conn, kind="lab"))
    assert got == expected == [dict(id=1, external_id="a", simulated=False), dict(id=3, external_id="c", simulated=False)]
    assert [type(r["simulated"]) for r in got] == [bool, bool]

    def duplicate(conn):
        add.run(conn, **dict(people[2], external_id="d"))
        add.run(conn, **people[1])  # (kind, external_id, study_id) is unique
    with pytest.raises(IntegrityError):
        writer.run(duplicate)
    with engine.connect() as conn:
        assert conn.execute(select(p.c.external_id).order_by(p.c.id)).scalars().all() == ["a", "a", "c"]
    engine.dispose()
