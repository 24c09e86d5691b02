"""What the hosted study does for a participant, apart from HTTP: entry, consent, the next page
(claiming a slot), a submitted page (stored once, in one transaction), the end, and the
researcher's progress figures.

The pages are the batch's own (``items.csv`` and its ``page`` column, written by ``satcal
export``), with their A/B orientation as recorded in the key; the server reads nothing of the
key but the page numbers (``key.csv`` is hashed so the database is bound to one batch).
"""
from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass, field

import pandas as pd

from ..errors import SatcalError
from ..platforms import SHOWN_CODES
from . import db

__all__ = ["ServeSettings", "HostedStudy", "PageView", "load_pages", "ID_PATTERN", "WAITING"]

#: Participant ids and codes accepted at entry (Prolific ids are 24 hex digits).
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: A page's assignment token (``secrets.token_hex(16)``).
TOKEN_PATTERN = re.compile(r"[0-9a-f]{32}")
#: The outcome of a newcomer who found every slot held (not finished: they come back).
WAITING = "waiting"


@dataclass(frozen=True)
class ServeSettings:
    """study.toml ``[serve]`` and ``[design]`` as the server uses them."""

    completion_code: str = ""
    failed_attention_code: str = ""
    pages_per_participant: int = 5
    attention_checks: int = 2
    attention_fail_limit: int = 2
    assignment_timeout_minutes: float = 30
    answers_per_example: int = 1
    instructions: str = ""
    title: str = "Which search results are better?"
    k: int = 5

    @classmethod
    def from_workspace(cls, ws) -> "ServeSettings":
        s = ws.config["serve"]
        return cls(completion_code=s["completion_code"], failed_attention_code=s["failed_attention_code"],
                   pages_per_participant=s["pages_per_participant"], attention_checks=s["attention_checks"],
                   attention_fail_limit=s["attention_fail_limit"],
                   assignment_timeout_minutes=float(s["assignment_timeout_minutes"]),
                   answers_per_example=ws["design.answers_per_example"],
                   instructions=ws["presentation.instructions"], k=ws.k)


def load_pages(items: pd.DataFrame, k: int) -> dict[int, list[dict]]:
    """items.csv -> {page: [item, ...]}, each item the plain text a page shows
    (:func:`satcal.platforms.item_view`)."""
    from ..platforms import item_view
    pages: dict[int, list[dict]] = {}
    for row in items.to_dict("records"):
        pages.setdefault(int(row["page"]), []).append(item_view(row, k))
    return pages


class _Lost(Exception):
    """A compare-and-set lost to a concurrent request: roll the transaction back."""


@dataclass
class PageView:
    """What the page template needs: the assignment token and the items in order (the
    attention check, if any, among them)."""

    token: str
    position: int
    total: int
    items: list[dict] = field(default_factory=list)


def attention_positions(pages: int, checks: int) -> set[int]:
    """Which of a participant's pages (0-based) carry an attention check: evenly spread."""
    checks = min(checks, pages)
    return {int((j + 0.5) * pages / checks) for j in range(checks)} if checks else set()


class HostedStudy:
    """The study a server process serves: pages, settings and the database engine."""

    def __init__(self, pages: dict[int, list[dict]], settings: ServeSettings, engine, key_digest: str):
        if not pages:
            raise SatcalError("the batch has no items to serve; run satcal export first")
        self.pages = pages
        self.settings = settings
        self.engine = engine
        self.writer = db.writer(engine)
        self.stored = db.prepare(engine, key_digest, sorted(pages), settings.answers_per_example)
        self.secret = self.stored["secret"]
        self.status_token = self.stored["status_token"]
        self.per_participant = min(settings.pages_per_participant, len(pages))
        self._attention_at = attention_positions(self.per_participant, settings.attention_checks)

    @classmethod
    def from_workspace(cls, ws, url: str | None = None) -> "HostedStudy":
        from ..fileio import sha256_file
        items = ws.table("items.csv")
        ws.table("key.csv")  # refuses with "run satcal export first" when missing
        engine = db.connect(url or db.default_url(ws.path))
        return cls(load_pages(items, ws.k), ServeSettings.from_workspace(ws), engine,
                   sha256_file(ws.file("key.csv")))

    # -- participants ----------------------------------------------------------------------
    def enter(self, kind: str, external_id: str, study_id: str = "", session_id: str = "") -> int:
        """The participant's id, created on first entry (a returning participant resumes).

        A person is ``(kind, external_id)``: one Prolific id is one participant under every
        STUDY_ID of the study (the row keeps the STUDY_ID and SESSION_ID of the first entry), so
        a Prolific study duplicated to recruit more never shows anyone a page twice."""
        from sqlalchemy import insert, select
        from sqlalchemy.exc import IntegrityError
        t = db.tables()
        p, meta = t["participants"], t["meta"]
        where = (p.c.kind == kind) & (p.c.external_id == external_id)
        first = select(p.c.id).where(where).order_by(p.c.id).limit(1)
        for _ in range(3):
            with self.engine.connect() as conn:
                found = conn.execute(first).scalar()
            if found is not None:
                return int(found)
            try:
                with self.writer.begin() as conn:
                    # entries queue here (SQLite: BEGIN IMMEDIATE; PostgreSQL: this row lock), so the
                    # same person entering under two STUDY_IDs at once gets one row, not two
                    conn.execute(select(meta.c.name).where(meta.c.name == "schema_version").with_for_update())
                    found = conn.execute(first).scalar()
                    if found is not None:
                        return int(found)
                    return int(conn.execute(insert(p).values(
                        kind=kind, external_id=external_id, study_id=study_id, session_id=session_id,
                        created_at=time.time(), outcome="")).inserted_primary_key[0])
            except IntegrityError:
                continue  # the same participant entered twice at once: the other insert won
        raise SatcalError("could not register the participant")

    def known(self, kind: str, external_id: str) -> dict | None:
        """The participant ``(kind, external_id)`` if they have entered before (nothing created)."""
        from sqlalchemy import select
        p = db.tables()["participants"]
        with self.engine.connect() as conn:
            row = conn.execute(select(p).where((p.c.kind == kind) & (p.c.external_id == external_id))
                               .order_by(p.c.id).limit(1)).mappings().first()
        return dict(row) if row else None

    def participant(self, pid: int) -> dict | None:
        from sqlalchemy import select
        p = db.tables()["participants"]
        with self.engine.connect() as conn:
            row = conn.execute(select(p).where(p.c.id == pid)).mappings().first()
        return dict(row) if row else None

    def consent(self, pid: int) -> None:
        p = db.tables()["participants"]
        with self.writer.begin() as conn:
            conn.execute(p.update().where((p.c.id == pid) & p.c.consented_at.is_(None))
                         .values(consented_at=time.time()))

    # -- pages -----------------------------------------------------------------------------
    def next_page(self, pid: int) -> PageView | None:
        """The participant's open page, or a newly claimed one; None when they are done (their
        share answered, or no page left that they have not seen)."""
        from sqlalchemy import func, select
        a = db.tables()["assignments"]
        with self.engine.connect() as conn:
            open_row = conn.execute(select(a).where((a.c.participant_id == pid) & a.c.submitted_at.is_(None))
                                    .order_by(a.c.position)).mappings().first()
            done = conn.execute(select(func.count()).select_from(a).where(a.c.participant_id == pid)).scalar_one()
        if open_row is not None:
            return self._view(open_row)
        if done >= self.per_participant:
            return None
        row = self._claim(pid, done)
        return self._view(row) if row is not None else None

    def _claim(self, pid: int, position: int):
        """Claim the emptiest free slot on a page this participant has not had."""
        from sqlalchemy import and_, insert, or_, select, update
        from sqlalchemy.exc import IntegrityError
        t = db.tables()
        s, a, p = t["slots"], t["assignments"], t["participants"]
        for _ in range(50):
            now = time.time()
            free = and_(s.c.done.is_(False), s.c.replicate <= self.settings.answers_per_example,
                        or_(s.c.assignment_id.is_(None), s.c.held_until < now))
            seen = self._seen(pid)
            try:
                with self.writer.begin() as conn:
                    # PostgreSQL: skip slots another claimer has locked (SQLite serialises writers)
                    slot = conn.execute(select(s.c.id, s.c.page).where(free & s.c.page.not_in(seen))
                                        .order_by(s.c.replicate, s.c.page).limit(1)
                                        .with_for_update(skip_locked=True, of=s)).first()
                    if slot is None:
                        return None
                    token = secrets.token_hex(16)
                    attention = position in self._attention_at
                    values = dict(token=token, participant_id=pid, position=position, page=slot.page,
                                  slot_id=slot.id, created_at=now,
                                  expires_at=now + 60 * self.settings.assignment_timeout_minutes,
                                  attention_item=secrets.token_hex(8) if attention else "",
                                  attention_expected=secrets.choice(SHOWN_CODES) if attention else "")
                    aid = conn.execute(insert(a).values(**values)).inserted_primary_key[0]
                    won = conn.execute(update(s).where((s.c.id == slot.id) & free)
                                       .values(assignment_id=aid, held_until=values["expires_at"])).rowcount
                    if won != 1:
                        raise _Lost  # another participant took this slot first: try the next
                    if position == 0:  # a newcomer told to come back has a page now
                        conn.execute(update(p).where((p.c.id == pid) & (p.c.outcome == WAITING)).values(outcome=""))
                    return {**values, "id": aid, "submitted_at": None}
            except _Lost:
                continue
            except IntegrityError:
                # this participant asked twice at once; the other request made the assignment
                with self.engine.connect() as conn:
                    row = conn.execute(select(a).where((a.c.participant_id == pid) & (a.c.position == position))
                                       ).mappings().first()
                if row is not None:
                    return dict(row) if row["submitted_at"] is None else None
        raise SatcalError("too many concurrent claims; try again")

    def _seen(self, pid: int):
        """The pages this person has had, under any of their participant rows (a database from
        before one Prolific id was one participant may hold two rows of one person)."""
        from sqlalchemy import select
        t = db.tables()
        a, p = t["assignments"], t["participants"]
        me = p.alias("me")
        same = (select(p.c.id).join(me, (me.c.kind == p.c.kind) & (me.c.external_id == p.c.external_id))
                .where(me.c.id == pid))
        return select(a.c.page).where(a.c.participant_id.in_(same))

    def first_release(self, pid: int) -> float | None:
        """When this participant can next get a page: None when every slot on a page they have
        not had is answered (the study is full for them), else the earliest time one of those
        slots is free (now, if one is free already; else when its holder's assignment times
        out)."""
        from sqlalchemy import func, select
        s = db.tables()["slots"]
        open_slot = (s.c.done.is_(False) & (s.c.replicate <= self.settings.answers_per_example)
                     & s.c.page.not_in(self._seen(pid)))
        with self.engine.connect() as conn:
            n, earliest = conn.execute(select(func.count(), func.min(func.coalesce(s.c.held_until, 0.0)))
                                       .where(open_slot)).one()
        return max(float(earliest), time.time()) if n else None

    def _view(self, row) -> PageView:
        items = [dict(it, kind="item") for it in self.pages[int(row["page"])]]
        if row["attention_item"]:
            at = int(row["attention_item"], 16) % (len(items) + 1)
            items.insert(at, {"item_id": row["attention_item"], "kind": "attention",
                              "expected": row["attention_expected"]})
        return PageView(token=row["token"], position=int(row["position"]) + 1, total=self.per_participant,
                        items=items)

    def submit(self, pid: int, token: str, form: dict) -> str:
        """Store a submitted page. Returns ``"stored"``, ``"already"`` (a resubmission: nothing
        stored twice), ``"missing"`` (not every item answered: nothing stored) or ``"unknown"``
        (not this participant's page)."""
        from sqlalchemy import insert, select, update
        from sqlalchemy.exc import IntegrityError
        t = db.tables()
        a, s, r = t["assignments"], t["slots"], t["responses"]
        if not isinstance(token, str) or not TOKEN_PATTERN.fullmatch(token):
            return "unknown"  # nothing malformed reaches the database (PostgreSQL refuses NUL bytes)
        with self.engine.connect() as conn:
            row = conn.execute(select(a).where((a.c.token == token) & (a.c.participant_id == pid))).mappings().first()
        if row is None:
            return "unknown"
        if row["submitted_at"] is not None:
            return "already"
        view = self._view(row)
        answers = {it["item_id"]: form.get(f"answer-{it['item_id']}", "") for it in view.items}
        if any(v not in SHOWN_CODES for v in answers.values()):
            return "missing"
        now = time.time()
        records = [{"assignment_id": row["id"], "item_id": it["item_id"], "kind": it["kind"],
                    "answer": answers[it["item_id"]], "submitted_at": now,
                    "correct": (answers[it["item_id"]] == it["expected"]) if it["kind"] == "attention" else None}
                   for it in view.items]
        try:
            with self.writer.begin() as conn:
                first = conn.execute(update(a).where((a.c.id == row["id"]) & a.c.submitted_at.is_(None))
                                     .values(submitted_at=now)).rowcount
                if first != 1:
                    raise _Lost
                conn.execute(insert(r), records)
                # the slot is done if this page still holds it (a late page, whose slot went
                # to someone else meanwhile, is stored all the same: an extra answer)
                conn.execute(update(s).where((s.c.id == row["slot_id"]) & (s.c.assignment_id == row["id"]))
                             .values(done=True))
        except (IntegrityError, _Lost):
            return "already"  # a concurrent submission of the same page stored it
        return "stored"

    def attention_failures(self, pid: int) -> int:
        from sqlalchemy import func, select
        t = db.tables()
        r, a = t["responses"], t["assignments"]
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(r.join(a, r.c.assignment_id == a.c.id))
                                    .where((a.c.participant_id == pid) & (r.c.kind == "attention")
                                           & r.c.correct.is_(False))).scalar_one())

    def finish(self, pid: int) -> str:
        """Record the end; the outcome: ``completed``, ``failed_attention``, ``full`` (a
        participant who had answered nothing, and every slot they could have is answered) or
        ``waiting`` (answered nothing, and every such slot is held by someone now: not an end,
        they are to come back when one frees, see :meth:`first_release`)."""
        from sqlalchemy import func, select
        t = db.tables()
        p, a = t["participants"], t["assignments"]
        with self.engine.connect() as conn:
            answered = conn.execute(select(func.count()).select_from(a).where(
                (a.c.participant_id == pid) & a.c.submitted_at.is_not(None))).scalar_one()
        if answered == 0 and self.first_release(pid) is not None:
            with self.writer.begin() as conn:
                conn.execute(p.update().where((p.c.id == pid) & p.c.finished_at.is_(None))
                             .values(outcome=WAITING))
            return WAITING
        if answered == 0:
            outcome = "full"
        elif self.attention_failures(pid) >= self.settings.attention_fail_limit:
            outcome = "failed_attention"
        else:
            outcome = "completed"
        with self.writer.begin() as conn:
            conn.execute(p.update().where((p.c.id == pid) & p.c.finished_at.is_(None))
                         .values(finished_at=time.time(), outcome=outcome))
        return outcome

    # -- the researcher's view -------------------------------------------------------------
    def progress(self) -> dict:
        """Counts for the status page: slots, participants by outcome, attention failures."""
        from sqlalchemy import case, func, select
        t = db.tables()
        s, p, r, a = t["slots"], t["participants"], t["responses"], t["assignments"]
        now = time.time()
        with self.engine.connect() as conn:
            slots = conn.execute(select(
                func.count(), func.sum(case((s.c.done.is_(True), 1), else_=0)),
                func.sum(case(((s.c.done.is_(False)) & (s.c.held_until >= now), 1), else_=0)))
                .where(s.c.replicate <= self.settings.answers_per_example)).one()
            per_page = conn.execute(select(s.c.page, func.sum(case((s.c.done.is_(True), 1), else_=0)))
                                    .where(s.c.replicate <= self.settings.answers_per_example)
                                    .group_by(s.c.page)).all()
            outcomes = dict(conn.execute(select(p.c.outcome, func.count()).group_by(p.c.outcome)).all())
            failures = conn.execute(
                select(p.c.kind, p.c.external_id, func.count())
                .select_from(r.join(a, r.c.assignment_id == a.c.id).join(p, a.c.participant_id == p.c.id))
                .where((r.c.kind == "attention") & r.c.correct.is_(False))
                .group_by(p.c.kind, p.c.external_id).order_by(p.c.external_id)).all()
            responses = conn.execute(select(func.count()).select_from(r).where(r.c.kind == "item")).scalar_one()
        items_on = {page: len(items) for page, items in self.pages.items()}
        answered = pd.Series({page: int(done or 0) for page, done in per_page})
        examples_by_answers = (pd.Series({page: items_on[page] for page in answered.index})
                               .groupby(answered).sum().to_dict()) if len(answered) else {}
        return {"slots": int(slots[0] or 0), "slots_done": int(slots[1] or 0), "slots_held": int(slots[2] or 0),
                "items_by_answers": {int(k): int(v) for k, v in sorted(examples_by_answers.items())},
                "participants": {("in progress" if not k else k): int(v) for k, v in sorted(outcomes.items())},
                "attention_failures": [{"worker_id": str(db.worker_ids(pd.Series([kind]), pd.Series([ext]))[0]),
                                        "failures": int(n)} for kind, ext, n in failures],
                "responses": int(responses), "answers_per_example": self.settings.answers_per_example}

    def csrf_token(self, pid: int) -> str:
        """The form token of a participant: an HMAC of their id under the server's secret, so a
        page on another site cannot forge one."""
        import hmac
        return hmac.new(self.secret.encode(), f"csrf:{pid}".encode(), hashlib.sha256).hexdigest()
