"""The hosted study's database: schema, versioned migrations, slot claims and the snapshot
that ingest reads.

One schema for SQLite (the default, ``DIR/serve.db`` in WAL mode) and PostgreSQL (by URL, when
several server processes or machines serve one study), written with SQLAlchemy Core. Times are
seconds since the epoch (UTC) as floats, which both databases store and compare alike.

Every example needs ``answers_per_example`` answers. The database holds one *slot* per page of
the batch and answer wanted (page x replicate); a participant's next page is a free slot (or one
whose holder timed out) claimed by a compare-and-set ``UPDATE ... WHERE`` that only one of
several concurrent claimers can win, on either database. Responses are only ever inserted, with
``UNIQUE (assignment_id, item_id)``, so a page submitted twice stores nothing twice. On SQLite
the threads of one server process take turns writing and share commits (:class:`GroupCommit`).
"""
from __future__ import annotations

import secrets
import threading
import time
import weakref
from contextlib import contextmanager
from pathlib import Path

from ..errors import SatcalError

__all__ = ["SCHEMA_VERSION", "connect", "prepare", "snapshot", "default_url", "writer", "reader", "Read", "Write"]

#: Version of the schema this code writes; older databases are migrated on start.
SCHEMA_VERSION = 3

_TABLES = None
#: The index of the claims' choice of slot: (name, columns...).
SLOT_INDEX = ("ix_slots_free", "done", "replicate", "page")


def tables():
    """The SQLAlchemy tables (built once, on first use, so importing satcal stays light)."""
    global _TABLES
    if _TABLES is not None:
        return _TABLES
    from sqlalchemy import (Boolean, Column, Float, ForeignKey, Index, Integer, MetaData, String, Table, Text,
                            UniqueConstraint)
    md = MetaData()
    t = {}
    t["meta"] = Table("satcal_meta", md, Column("name", String(64), primary_key=True),
                      Column("value", Text, nullable=False))
    t["participants"] = Table(
        "participants", md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("kind", String(16), nullable=False),          # prolific | lab
        Column("external_id", String(64), nullable=False),   # PROLIFIC_PID or lab code
        Column("study_id", String(64), nullable=False, default=""),
        Column("session_id", String(64), nullable=False, default=""),
        Column("created_at", Float, nullable=False),
        Column("consented_at", Float),
        Column("finished_at", Float),
        Column("outcome", String(24), nullable=False, default=""),
        # entered by the simulated crowd (satcal simulate --serve): a dry run, not data
        Column("simulated", Boolean, nullable=False, default=False),
        UniqueConstraint("kind", "external_id", "study_id", name="uq_participant"))
    t["slots"] = Table(
        "slots", md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("page", Integer, nullable=False),
        Column("replicate", Integer, nullable=False),
        Column("assignment_id", Integer),
        Column("held_until", Float),
        Column("done", Boolean, nullable=False, default=False),
        UniqueConstraint("page", "replicate", name="uq_slot"),
        # a claim's choice of slot (free slots, emptiest page first, then page order: study._choose_in_page_order)
        # walks this index to its first free slot; without it SQLite scanned and sorted every slot, 0.2 ms
        # of CPU (0.7-0.8 ms of wall under load) in the writers' turn a claim at 2,112 slots
        Index(*SLOT_INDEX))
    t["assignments"] = Table(
        "assignments", md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("token", String(32), nullable=False, unique=True),
        Column("participant_id", Integer, ForeignKey("participants.id"), nullable=False),
        Column("position", Integer, nullable=False),
        Column("page", Integer, nullable=False),
        Column("slot_id", Integer, ForeignKey("slots.id"), nullable=False),
        Column("created_at", Float, nullable=False),
        Column("expires_at", Float, nullable=False),
        Column("submitted_at", Float),
        Column("attention_item", String(32), nullable=False, default=""),
        Column("attention_expected", String(16), nullable=False, default=""),
        # traps shown on this page on top of the page's own items (item ids, space-separated)
        Column("extra_items", Text, nullable=False, default=""),
        UniqueConstraint("participant_id", "page", name="uq_assignment_page"),
        UniqueConstraint("participant_id", "position", name="uq_assignment_position"))
    t["responses"] = Table(
        "responses", md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("assignment_id", Integer, ForeignKey("assignments.id"), nullable=False),
        Column("item_id", String(32), nullable=False),
        Column("kind", String(16), nullable=False),          # item | attention
        Column("answer", String(16), nullable=False),
        Column("correct", Boolean),                          # attention checks only
        Column("submitted_at", Float, nullable=False),
        UniqueConstraint("assignment_id", "item_id", name="uq_response"))
    t["metadata"] = md
    _TABLES = t
    return t


def default_url(directory) -> str:
    """The URL of a study directory's default database, ``DIR/serve.db`` (SQLite).

    Parameters
    ----------
    directory : str or os.PathLike
        The study directory.

    Returns
    -------
    str
    """
    return f"sqlite:///{Path(directory).resolve() / 'serve.db'}"


def connect(url: str):
    """An engine for ``url``. SQLite gets WAL, full sync (a committed page survives a killed
    server and a power cut), a busy timeout, and ``BEGIN IMMEDIATE`` transactions so that
    concurrent writers queue instead of failing on a stale snapshot (see :func:`writer`).

    Parameters
    ----------
    url : str
        A SQLAlchemy database URL.

    Returns
    -------
    sqlalchemy.engine.Engine

    Raises
    ------
    SatcalError
        The driver is not installed or the URL is not a database URL.
    """
    from sqlalchemy import create_engine, event
    from sqlalchemy.exc import ArgumentError
    try:
        if url.startswith("sqlite"):
            engine = create_engine(url, connect_args={"timeout": 60, "check_same_thread": False},
                                   pool_size=20, max_overflow=20)
        else:
            engine = create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)
    except ImportError as exc:
        raise SatcalError(f"--db {url!r}: its database driver is not installed ({exc}); for PostgreSQL: "
                          "pip install 'satcal[postgres]'") from None
    except (ArgumentError, ValueError) as exc:
        raise SatcalError(f"--db {url!r}: not a database URL ({exc}); e.g. sqlite:///study.db or "
                          "postgresql+psycopg://user@host/dbname") from None
    if engine.dialect.name == "sqlite":
        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):
            dbapi_conn.isolation_level = None  # let the "begin" hook below issue BEGIN itself
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn):
            options = conn.get_execution_options()
            if options.get("sqlite_single_statement"):
                return  # db.reader: the statement is its own transaction (autocommit)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get("sqlite_immediate") else "BEGIN")
    return engine


def reader(engine):
    """``engine`` for reads of one statement each: on SQLite no ``BEGIN`` before it and no
    ``ROLLBACK`` after (a statement outside a transaction reads one consistent snapshot by
    itself). Each SQLite call lets go of the interpreter lock and waits for it again, which
    under load costs more than the call: a read this way makes one call instead of three.
    Not for several statements that must see one snapshot.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        The database.

    Returns
    -------
    sqlalchemy.engine.Engine
    """
    return engine.execution_options(sqlite_single_statement=True)


class Read:
    """A read of one statement, built once (``build()``, a SQLAlchemy select whose varying
    values are ``bindparam``s), compiled once per database, and run on a connection of the
    pool through the driver itself: :meth:`rows` costs about a tenth of the CPU of
    ``conn.execute(select(...))`` (11 against 126 us a read here), which under load is
    time the event loop waits for the interpreter lock. The rows are dicts, Boolean columns
    as bool. On SQLite the statement is its own snapshot, as with :func:`reader`.

    Parameters
    ----------
    build : callable
        ``build()``: the statement.
    """

    def __init__(self, build):
        self._build = build
        self._compiled: dict = {}

    def _prepared(self, dialect):
        key = (dialect.name, dialect.paramstyle)  # two drivers of one database differ in paramstyle
        got = self._compiled.get(key)
        if got is None:
            from sqlalchemy import Boolean
            stmt = self._statement(dialect)
            compiled = stmt.compile(dialect=dialect)
            columns = getattr(stmt, "selected_columns", None) or getattr(stmt, "_returning", ())
            bools = [c.name for c in columns if isinstance(getattr(c, "type", None), Boolean)]
            got = self._compiled[key] = (str(compiled), compiled.positiontup if compiled.positional else None,
                                                  dict(compiled.params), bools)
        return got

    def _statement(self, dialect):
        return self._build()

    def rows(self, engine, **params) -> list[dict]:
        """The rows, ``params`` giving the statement's bound values by name.

        Parameters
        ----------
        engine : sqlalchemy.engine.Engine
            The database.
        **params
            The bound values.

        Returns
        -------
        list of dict
        """
        sql, order, defaults, bools = self._prepared(engine.dialect)
        values = {**defaults, **params}
        raw = engine.raw_connection()
        try:
            cursor = raw.cursor()
            try:
                cursor.execute(sql, [values[name] for name in order] if order is not None else values)
                names = [d[0] for d in cursor.description]
                out = [dict(zip(names, row)) for row in cursor.fetchall()]
            finally:
                cursor.close()
        finally:
            raw.close()  # back to the pool (which rolls back what a PostgreSQL read began)
        for row in out:
            for name in bools:
                if row[name] is not None:
                    row[name] = bool(row[name])
        return out

    def compile(self, engine) -> None:
        """Compile the statement for ``engine``'s database now (the server's start), not in
        the first request that runs it (1-3 ms each, inside the writers' turn for a write).

        Parameters
        ----------
        engine : sqlalchemy.engine.Engine
            The database.
        """
        self._prepared(engine.dialect)

    def first(self, engine, **params) -> dict | None:
        """The first row, or None.

        Parameters
        ----------
        engine : sqlalchemy.engine.Engine
            The database.
        **params
            The bound values.

        Returns
        -------
        dict or None
        """
        rows = self.rows(engine, **params)
        return rows[0] if rows else None


class Write(Read):
    """A statement of a write transaction (an ``INSERT``, ``UPDATE`` or ``DELETE``, or a
    ``SELECT`` inside the writers' turn), built once (``build()``, its varying values
    ``bindparam``s), compiled once per database, and run through the driver on the
    transaction's own connection (:meth:`run`, :meth:`many`): a SQLAlchemy ``conn.execute``
    costs 60-120 us of CPU a statement here, nearly all of it building and looking up the
    statement, and on SQLite that CPU is spent holding the writers' turn. The transaction,
    its savepoints and its commit stay SQLAlchemy's (the driver's calls go into the same
    transaction); the driver's integrity errors are raised as SQLAlchemy's
    (``sqlalchemy.exc.IntegrityError``), so callers catch one kind on either database.
    Values go to the driver as given, without SQLAlchemy's type processors: right for the
    Integer, Float, String and Boolean columns the schema has; a DateTime or JSON column
    would need its value converted by the caller.

    Parameters
    ----------
    build : callable
        ``build()``: the statement.
    returning_id : bool, default False
        An ``INSERT`` whose new row's ``id`` :meth:`run` returns: SQLite's ``lastrowid``,
        ``RETURNING id`` elsewhere (PostgreSQL).
    """

    def __init__(self, build, returning_id: bool = False):
        super().__init__(build)
        self._returning_id = returning_id

    def _statement(self, dialect):
        stmt = self._build()
        if self._returning_id and dialect.name != "sqlite":
            stmt = stmt.returning(stmt.table.c.id)
        return stmt

    def _call(self, conn, many: bool, params):
        sql, order, defaults, bools = self._prepared(conn.dialect)
        if many:
            args = [[{**defaults, **p}[n] for n in order] if order is not None else {**defaults, **p} for p in params]
        else:
            values = {**defaults, **params}
            args = [values[n] for n in order] if order is not None else values
        cursor = conn.connection.cursor()  # the DBAPI connection of the transaction ``conn`` holds
        try:
            (cursor.executemany if many else cursor.execute)(sql, args)
        except conn.dialect.loaded_dbapi.Error as exc:
            cursor.close()
            from sqlalchemy.exc import DBAPIError
            raise DBAPIError.instance(sql, args, exc, conn.dialect.loaded_dbapi.Error, dialect=conn.dialect) from None
        return cursor, bools

    def run(self, conn, **params):
        """Run the statement in ``conn``'s transaction, ``params`` giving its bound values by
        name. Returns the new row's id (``returning_id``), the rows (a ``SELECT``: dicts,
        Boolean columns as bool), or else the count of rows it changed.

        Parameters
        ----------
        conn : sqlalchemy.engine.Connection
            A connection in a write transaction (:func:`writer`).
        **params
            The bound values.

        Returns
        -------
        int or list of dict
        """
        cursor, bools = self._call(conn, False, params)
        try:
            if self._returning_id:
                return int(cursor.lastrowid if conn.dialect.name == "sqlite" else cursor.fetchone()[0])
            if cursor.description is not None:
                names = [d[0] for d in cursor.description]
                out = [dict(zip(names, row)) for row in cursor.fetchall()]
                for row in out:
                    for name in bools:
                        if row[name] is not None:
                            row[name] = bool(row[name])
                return out
            return cursor.rowcount
        finally:
            cursor.close()

    def many(self, conn, rows: list[dict]) -> None:
        """Run the statement once for each of ``rows`` (the driver's ``executemany``) in
        ``conn``'s transaction.

        Parameters
        ----------
        conn : sqlalchemy.engine.Connection
            A connection in a write transaction (:func:`writer`).
        rows : list of dict
            The bound values of each run, by name.
        """
        cursor, _ = self._call(conn, True, rows)
        cursor.close()


class _Writer:
    """Write transactions of one engine (:func:`writer`)."""

    def __init__(self, engine, group=None):
        self.engine = engine.execution_options(sqlite_immediate=True)
        self.group = group

    def begin(self):
        """A write transaction (``with writer.begin() as conn``): what the block wrote is
        committed when it ends, or rolled back if it raises."""
        return self.engine.begin() if self.group is None else self.group.transaction()

    def run(self, func):
        """``func(conn)`` in a write transaction, its result returned once committed (or
        rolled back, and its exception raised, if it raises). On SQLite a block of the
        group commit (:meth:`GroupCommit.transaction`).

        Parameters
        ----------
        func : callable
            ``func(conn)``, ``conn`` a SQLAlchemy connection.

        Returns
        -------
        object
            What ``func`` returned.
        """
        if self.group is not None:
            return self.group.run(func)
        with self.engine.begin() as conn:
            return func(conn)


class _Batch:
    """One group's commit: an event set once it is on disk (or failed, ``error``)."""

    def __init__(self):
        self.committed = threading.Event()
        self.error: BaseException | None = None

    def finish(self, error: BaseException | None = None) -> None:
        """Mark the commit done (``error``: it failed)."""
        self.error = error
        self.committed.set()


class GroupCommit:
    """SQLite write transactions of one process, committed in groups.

    SQLite has one writer at a time, and with ``synchronous=FULL`` each commit waits for the
    disk (an fsync, about 5 ms here). The threads of one process take turns on one connection,
    each block in a savepoint of a shared transaction; the transaction commits when no other
    thread is waiting for its turn (or after ``max_blocks`` blocks, or once it has been open as
    long as a commit takes, a moving average: so a group's first block waits for at most about
    two commits however heavy the load, and the groups grow with the load; or when a block
    fails; a group's first block runs without a savepoint, and if it fails the transaction is
    rolled back), and a block's ``with`` returns only once its commit is on disk, so nothing a caller was told
    is stored can be lost, and one fsync serves every block that queued meanwhile. Waiting on
    a lock of our own also spares the threads SQLite's way of waiting for its lock (polling
    with sleeps of up to 100 ms), which made the slowest responses under load.
    This is the group commit of database servers.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        The SQLite database; its transactions begin with ``BEGIN IMMEDIATE``.
    max_blocks : int, default 64
        Blocks one transaction holds at most before it commits.

    References
    ----------
    Gawlick, D. and Kinkade, D. (1985). Varieties of concurrency control in IMS/VS Fast Path.
    IEEE Database Engineering Bulletin 8(2), 3-10.
    """

    def __init__(self, engine, max_blocks: int = 64):
        self.engine = engine.execution_options(sqlite_immediate=True)
        self.max_blocks = max_blocks
        self._turn = threading.Lock()
        self._count = threading.Lock()
        self._waiting = 0
        self._conn = self._txn = self._batch = None
        self._blocks = 0
        self._owner = None
        self._opened = 0.0
        self._commit_time = 0.005

    @contextmanager
    def transaction(self):
        if self._owner == threading.get_ident():
            # a write block inside another of the same thread would wait for itself forever
            raise RuntimeError("a write transaction inside another one on the same thread")
        with self._count:
            self._waiting += 1
        self._turn.acquire()
        self._owner = threading.get_ident()
        with self._count:
            self._waiting -= 1
        failed = True
        try:
            first = self._txn is None
            if first:
                self._open()
            batch = self._batch
            if first:  # alone in its transaction: if it fails, the transaction is rolled back
                yield self._conn
            else:
                with self._conn.begin_nested():  # a savepoint: a failing block undoes only itself
                    yield self._conn
            self._blocks += 1
            failed = False
        finally:
            if failed and self._txn is not None and self._blocks == 0:
                self._rollback()
            # a failed block commits at once, so that what its caller reads next (with another
            # connection) includes the blocks before it
            elif self._txn is not None and (failed or self._waiting == 0 or self.due()):
                self._commit()
            self._owner = None
            self._turn.release()
        batch.committed.wait()
        if batch.error is not None:
            raise batch.error

    def due(self) -> bool:
        """Whether the open group is to commit now: ``max_blocks`` long, or as old as a commit takes."""
        return self._txn is not None and (self._blocks >= self.max_blocks
                                          or time.perf_counter() - self._opened >= self._commit_time)

    def run(self, func):
        """``func(conn)`` as a block of :meth:`transaction`; its result.

        Parameters
        ----------
        func : callable
            ``func(conn)``.

        Returns
        -------
        object
        """
        with self.transaction() as conn:
            return func(conn)

    def _open(self):
        conn = self.engine.connect()
        try:
            self._txn = conn.begin()  # BEGIN IMMEDIATE: the database's write lock
        except BaseException:
            conn.close()
            raise
        self._conn, self._batch, self._blocks = conn, _Batch(), 0
        self._opened = time.perf_counter()

    def _rollback(self):
        batch, txn, conn = self._batch, self._txn, self._conn
        self._txn = self._conn = self._batch = None
        try:
            txn.rollback()
        except Exception:
            conn.invalidate()
        finally:
            conn.close()
            batch.finish(None)  # nothing of it is stored; its one block raises its own error

    def _commit(self):
        batch, txn, conn = self._batch, self._txn, self._conn
        self._txn = self._conn = self._batch = None
        error = None
        start = time.perf_counter()
        try:
            txn.commit()
        except BaseException as exc:
            error = exc
            try:
                txn.rollback()
            except Exception:
                pass
        finally:
            conn.close()
            # how long a commit takes (moving average): a group stays open no longer than that
            self._commit_time += 0.2 * (time.perf_counter() - start - self._commit_time)
            batch.finish(error)


_GROUPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_GROUPS_LOCK = threading.Lock()


def writer(engine) -> _Writer:
    """Write transactions on ``engine``: ``with writer(engine).begin() as conn``.

    On SQLite they take the database's write lock at BEGIN (``BEGIN IMMEDIATE``), so a read
    inside them is never of a stale snapshot; the threads of one process take turns and share
    commits (:class:`GroupCommit`). PostgreSQL's writers run side by side (row locks and
    ``SKIP LOCKED`` keep them apart).

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        The database (one writer per SQLite engine).

    Returns
    -------
    _Writer
    """
    if engine.dialect.name != "sqlite":
        return _Writer(engine)
    with _GROUPS_LOCK:
        group = _GROUPS.get(engine)
        if group is None:
            group = _GROUPS[engine] = GroupCommit(engine)
    return _Writer(engine, group)


def _to_2(conn):
    """1 -> 2: participants.simulated (the dry run's participants are marked; those of a
    database from before, Prolific ids ``SIM-<n>`` under STUDY_ID ``simulated``, which is how
    ``satcal simulate --serve`` has always entered, are marked now) and
    assignments.extra_items (traps on top of a page)."""
    from sqlalchemy import text
    conn.execute(text("ALTER TABLE participants ADD COLUMN simulated BOOLEAN NOT NULL DEFAULT FALSE"))
    conn.execute(text("ALTER TABLE assignments ADD COLUMN extra_items TEXT NOT NULL DEFAULT ''"))
    conn.execute(text("UPDATE participants SET simulated = TRUE WHERE kind = 'prolific' "
                      "AND study_id = 'simulated' AND external_id LIKE 'SIM-%'"))


def _to_3(conn):
    """2 -> 3: the index of the claims' choice of slot (:data:`SLOT_INDEX`; a database made by
    this version has it from the start)."""
    from sqlalchemy import text
    name, *columns = SLOT_INDEX
    conn.execute(text(f"CREATE INDEX IF NOT EXISTS {name} ON slots ({', '.join(columns)})"))


#: Migrations: from version v to v + 1, each a function of a connection.
MIGRATIONS: dict[int, callable] = {1: _to_2, 2: _to_3}


def prepare(engine, key_digest: str, pages: list[int], answers_per_example: int) -> dict:
    """Create or migrate the schema, check the database belongs to this batch, and make sure
    every page has ``answers_per_example`` slots. Returns the stored settings (secret key,
    researcher token).

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        The database.
    key_digest : str
        SHA-256 of key.csv.
    pages : list of int
        The batch's pages.
    answers_per_example : int
        Slots per page.

    Returns
    -------
    dict

    Raises
    ------
    SatcalError
        The database cannot be opened, has a newer schema, or belongs to another batch.
    """
    from sqlalchemy import func, insert, select
    from sqlalchemy.exc import OperationalError
    t = tables()
    try:
        t["metadata"].create_all(engine)
    except OperationalError as exc:
        raise SatcalError(f"cannot open the study database {engine.url.render_as_string(hide_password=True)}: "
                          f"{str(exc.orig).strip()}") from None
    with writer(engine).begin() as conn:
        stored = dict(conn.execute(select(t["meta"].c.name, t["meta"].c.value)).all())
        if not stored:
            stored = {"schema_version": str(SCHEMA_VERSION), "key_sha256": key_digest,
                      "secret": secrets.token_hex(32), "status_token": secrets.token_urlsafe(18),
                      "created_at": str(time.time())}
            conn.execute(insert(t["meta"]), [{"name": k, "value": v} for k, v in stored.items()])
        version = int(stored["schema_version"])
        if version > SCHEMA_VERSION:
            raise SatcalError(f"the study database has schema version {version}, newer than this satcal "
                              f"({SCHEMA_VERSION}); upgrade satcal")
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](conn)
            version += 1
            conn.execute(t["meta"].update().where(t["meta"].c.name == "schema_version").values(value=str(version)))
        if stored["key_sha256"] != key_digest:
            raise SatcalError("the study database belongs to another batch (its key.csv differs from "
                              "this workspace's); give a new --db, or serve the batch it was made for")
        have = set(conn.execute(select(t["slots"].c.page, t["slots"].c.replicate)).all())
        missing = [{"page": p, "replicate": r, "done": False} for r in range(1, answers_per_example + 1)
                   for p in pages if (p, r) not in have]
        if missing:
            conn.execute(insert(t["slots"]), missing)
        n = conn.execute(select(func.count()).select_from(t["slots"])).scalar_one()
    return {**stored, "slots": n}


def snapshot(engine):
    """Every stored response as one tidy table, the serve platform's result layout: what
    ``satcal ingest DIR --platform serve`` archives and reads.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        The database.

    Returns
    -------
    pandas.DataFrame
    """
    import numpy as np
    import pandas as pd
    from sqlalchemy import select
    t = tables()
    r, a, p = t["responses"], t["assignments"], t["participants"]
    query = (select(r.c.id, r.c.item_id, r.c.kind, r.c.answer, r.c.correct, r.c.submitted_at,
                    a.c.token, a.c.created_at, a.c.page, p.c.kind.label("participant_kind"),
                    p.c.external_id, p.c.study_id, p.c.session_id, p.c.simulated)
             .join(a, r.c.assignment_id == a.c.id).join(p, a.c.participant_id == p.c.id)
             .order_by(r.c.id))
    with engine.connect() as conn:
        rows = pd.DataFrame(conn.execute(query).mappings().all(),
                            columns=["id", "item_id", "kind", "answer", "correct", "submitted_at", "token",
                                     "created_at", "page", "participant_kind", "external_id", "study_id",
                                     "session_id", "simulated"])
    stamp = lambda s: pd.to_datetime(s, unit="s", utc=True).dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    out = pd.DataFrame({
        "row_id": "r" + rows["id"].astype(str),
        "item_id": rows["item_id"],
        "worker_id": worker_ids(rows["participant_kind"], rows["external_id"]),
        "answer": rows["answer"],
        "submitted_at": stamp(rows["submitted_at"]),
        "seconds": (rows["submitted_at"] - rows["created_at"]).round(3),
        "status": rows["kind"].map({"item": "", "attention": "attention check (not an example)"}).fillna(rows["kind"]),
        "attention_passed": rows["correct"].map({True: "yes", False: "no"}).fillna(""),
        "page_token": rows["token"],
        "study_id": rows["study_id"],
        "session_id": rows["session_id"],
        "simulated": np.where(rows["simulated"].fillna(False).astype(bool), "yes", ""),
    })
    return out


def worker_ids(kind, external_id):
    """A participant's worker id in the answers table: the Prolific id as it is, a lab code
    prefixed ``lab:`` (so the two kinds can never collide).

    Parameters
    ----------
    kind : numpy.ndarray or pandas.Series
        ``"prolific"`` or ``"lab"`` per row.
    external_id : numpy.ndarray or pandas.Series
        The ids.

    Returns
    -------
    numpy.ndarray
    """
    import numpy as np
    return np.where(kind == "lab", "lab:" + external_id.astype(str), external_id.astype(str))
