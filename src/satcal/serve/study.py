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

import numpy as np
import pandas as pd

from ..errors import SatcalError
from ..platforms import SHOWN_CODES
from . import db

__all__ = ["ServeSettings", "HostedStudy", "PageView", "load_pages", "ID_PATTERN", "WAITING",
           "items_per_page_with_traps",
           "simulation_token", "trap_targets", "screening_warnings", "batch_screening", "trap_items",
           "trap_chances", "participant_traps"]

#: Participant ids and codes accepted at entry (Prolific ids are 24 hex digits).
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: A page's assignment token (``secrets.token_hex(16)``).
TOKEN_PATTERN = re.compile(r"[0-9a-f]{32}")
#: The outcome of a newcomer who found every slot held (not finished: they come back).
WAITING = "waiting"


@dataclass(frozen=True)
class ServeSettings:
    """study.toml ``[serve]`` and ``[design]`` as the server uses them.

    Attributes
    ----------
    completion_code : str
        ``serve.completion_code``: the Prolific code a participant who finishes is sent with
        ("" for none).
    failed_attention_code : str
        ``serve.failed_attention_code``: the Prolific code for one who failed
        ``attention_fail_limit`` attention checks ("" for none).
    pages_per_participant : int
        ``serve.pages_per_participant``: pages of items one participant answers.
    attention_checks : int
        ``serve.attention_checks``: instructional attention checks per participant.
    attention_fail_limit : int
        ``serve.attention_fail_limit``: failed attention checks after which a participant ends with the failed-attention code.
    assignment_timeout_minutes : float
        ``serve.assignment_timeout_minutes``: minutes before a page left unanswered goes to
        someone else.
    answers_per_example : int
        ``design.answers_per_example``: answers each page's examples collect, each from
        another participant.
    instructions : str
        ``presentation.instructions``: what participants are told.
    title : str
        The pages' title (not a study.toml key).
    k : int
        ``study.k``: documents per list.
    traps_per_participant : int or str
        ``serve.traps_per_participant``: traps each participant meets, served on top of the
        pages' own items when the pages they get hold fewer (``traps_on_top``); ``"auto"``:
        the trap rule's count (:func:`participant_traps`).
    min_traps : int
        ``quality.min_traps``: traps a participant must meet before ingest scores them (the
        least ``"auto"`` gives).
    trust_threshold : float
        ``quality.trust_threshold``: the trap rule's threshold.
    trap_power : float
        ``quality.trap_power``: the power the trap rule's count reaches.
    traps_on_top : bool
        ``serve.traps_on_top``: show traps beyond a page's own items where it holds too few.
    consent : str
        ``serve.consent``: the consent text of the ethics board ("" for none).
    duration_minutes : float
        ``serve.duration_minutes``: the study's duration the consent page states (0: not
        stated).
    pay : str
        ``serve.pay``: the pay the consent page states ("" for none).
    contact : str
        ``serve.contact``: whom participants contact ("" for none).
    """

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
    #: traps each participant meets (serve.traps_per_participant), served on top of the pages'
    #: own items when the pages they get hold fewer (``traps_on_top``); "auto": the trap rule's
    #: count (participant_traps)
    traps_per_participant: object = "auto"
    min_traps: int = 5
    trust_threshold: float = 0.7
    trap_power: float = 0.999
    traps_on_top: bool = True
    #: what the consent page says besides the instructions
    consent: str = ""
    duration_minutes: float = 0
    pay: str = ""
    contact: str = ""

    @classmethod
    def from_settings(cls, settings) -> "ServeSettings":
        """From a study's :class:`satcal.settings.Settings` (``[serve]``, ``[design]``,
        ``[presentation]``, ``[quality]`` and ``study.k``).

        Parameters
        ----------
        settings : satcal.settings.Settings
            The study's settings.

        Returns
        -------
        ServeSettings
        """
        s = settings.serve
        return cls(completion_code=s.completion_code, failed_attention_code=s.failed_attention_code,
                   pages_per_participant=s.pages_per_participant, attention_checks=s.attention_checks,
                   attention_fail_limit=s.attention_fail_limit,
                   assignment_timeout_minutes=float(s.assignment_timeout_minutes),
                   answers_per_example=settings.design.answers_per_example,
                   instructions=settings.presentation.instructions, k=settings.study.k,
                   traps_per_participant=s.traps_per_participant, min_traps=settings.quality.min_traps,
                   trust_threshold=float(settings.quality.trust_threshold),
                   trap_power=float(settings.quality.trap_power), traps_on_top=s.traps_on_top, consent=s.consent,
                   duration_minutes=float(s.duration_minutes), pay=s.pay, contact=s.contact)


def load_pages(items: pd.DataFrame, k: int) -> dict[int, list[dict]]:
    """items.csv -> {page: [item, ...]}, each item the plain text a page shows
    (:func:`satcal.platforms.item_view`).

    Parameters
    ----------
    items : pandas.DataFrame
        items.csv.
    k : int
        List length.

    Returns
    -------
    dict
    """
    from ..platforms import item_view
    pages: dict[int, list[dict]] = {}
    for row in items.to_dict("records"):
        pages.setdefault(int(row["page"]), []).append(item_view(row, k))
    return pages


def _participant_by_id():
    from sqlalchemy import bindparam, select
    p = db.tables()["participants"]
    return select(p).where(p.c.id == bindparam("pid"))


def _participant_by_identity():
    from sqlalchemy import bindparam, select
    p = db.tables()["participants"]
    return (select(p).where((p.c.kind == bindparam("kind")) & (p.c.external_id == bindparam("external_id")))
            .order_by(p.c.id).limit(1))


def _assignments_of():
    from sqlalchemy import bindparam, select
    a = db.tables()["assignments"]
    return select(a).where(a.c.participant_id == bindparam("pid")).order_by(a.c.position)


def _participant_with_assignments():
    """Participant ``pid``'s row with each of their assignments (its columns prefixed ``a_``;
    one row with them NULL when there is none): a page request's two reads in one statement."""
    from sqlalchemy import bindparam, select
    t = db.tables()
    p, a = t["participants"], t["assignments"]
    return (select(p, *(c.label(f"a_{c.name}") for c in a.c))
            .select_from(p.outerjoin(a, a.c.participant_id == p.c.id))
            .where(p.c.id == bindparam("pid")).order_by(a.c.position))


def _pages_of():
    from sqlalchemy import bindparam, select
    a = db.tables()["assignments"]
    return select(a.c.page, a.c.extra_items).where(a.c.participant_id == bindparam("pid"))


def _first_of_identity():
    from sqlalchemy import bindparam, select
    p = db.tables()["participants"]
    return (select(p.c.id).where((p.c.kind == bindparam("kind")) & (p.c.external_id == bindparam("external_id")))
            .order_by(p.c.id).limit(1))


def _answered_count():
    from sqlalchemy import bindparam, func, select
    a = db.tables()["assignments"]
    return select(func.count().label("n")).select_from(a).where(
        (a.c.participant_id == bindparam("pid")) & a.c.submitted_at.is_not(None))


def _attention_failed_count():
    from sqlalchemy import bindparam, func, select
    t = db.tables()
    r, a = t["responses"], t["assignments"]
    return (select(func.count().label("n")).select_from(r.join(a, r.c.assignment_id == a.c.id))
            .where((a.c.participant_id == bindparam("pid")) & (r.c.kind == "attention") & r.c.correct.is_(False)))


#: The reads every request makes, each built and compiled once (:class:`satcal.serve.db.Read`).
_READS = {"participant": db.Read(_participant_by_id), "known": db.Read(_participant_by_identity),
          "assignments": db.Read(_assignments_of), "with_assignments": db.Read(_participant_with_assignments),
          "pages": db.Read(_pages_of), "first": db.Read(_first_of_identity), "answered": db.Read(_answered_count),
          "attention_failed": db.Read(_attention_failed_count)}


def _free_slot():
    """A slot free to claim: not answered, a replicate wanted (``ape``), held by no one or by
    an assignment timed out before ``now``."""
    from sqlalchemy import and_, bindparam, or_
    s = db.tables()["slots"]
    return and_(s.c.done.is_(False), s.c.replicate <= bindparam("ape"),
                or_(s.c.assignment_id.is_(None), s.c.held_until < bindparam("now")))


def _seen_by(pid):
    """The pages person ``pid`` (a value or a bindparam) has had, under any of their
    participant rows (a database from before one Prolific id was one participant may hold two
    rows of one person): a subquery of page numbers."""
    from sqlalchemy import select
    t = db.tables()
    a, p = t["assignments"], t["participants"]
    me = p.alias("me")
    same = (select(p.c.id).join(me, (me.c.kind == p.c.kind) & (me.c.external_id == p.c.external_id))
            .where(me.c.id == pid))
    return select(a.c.page).where(a.c.participant_id.in_(same))


def _candidates(met: int):
    """Free slots on a page person ``pid`` has not had nor holds a trap they met on another
    page (``met`` such pages, bound as ``met0``, ``met1``, ...)."""
    from sqlalchemy import bindparam
    s = db.tables()["slots"]
    where = _free_slot() & s.c.page.not_in(_seen_by(bindparam("pid")))
    if met:
        where = where & s.c.page.not_in([bindparam(f"met{i}") for i in range(met)])
    return where


def _choose_in_page_order(met: int):
    """The claim's slot without an adaptive plan: the emptiest page first, then the lowest page
    number (PostgreSQL skips slots another claimer has locked; SQLite serialises writers)."""
    from sqlalchemy import select
    s = db.tables()["slots"]
    return (select(s.c.id, s.c.page).where(_candidates(met)).order_by(s.c.replicate, s.c.page)
            .limit(1).with_for_update(skip_locked=True, of=s))


def _writes():
    """The statements of the write transactions (:class:`satcal.serve.db.Write`), each built and
    compiled once."""
    from sqlalchemy import bindparam, func, insert, select, update
    t = db.tables()
    p, a, s, r, meta = t["participants"], t["assignments"], t["slots"], t["responses"], t["meta"]
    bind = lambda *names: {n: bindparam(n) for n in names}
    return {
        # entry
        "lock": db.Write(lambda: select(meta.c.name).where(meta.c.name == "schema_version").with_for_update()),
        "first": db.Write(_first_of_identity),
        "participant": db.Write(lambda: insert(p).values(**bind("kind", "external_id", "study_id", "session_id",
                                                                "created_at", "outcome", "simulated")),
                                returning_id=True),
        "consent": db.Write(lambda: update(p).where((p.c.id == bindparam("pid")) & p.c.consented_at.is_(None))
                            .values(consented_at=bindparam("at"))),
        # a page's submission
        "submitted": db.Write(lambda: update(a).where((a.c.id == bindparam("aid")) & a.c.submitted_at.is_(None))
                              .values(submitted_at=bindparam("at"))),
        "responses": db.Write(lambda: insert(r).values(**bind("assignment_id", "item_id", "kind", "answer", "correct",
                                                              "submitted_at")).inline()),
        "slot_done": db.Write(lambda: update(s).where((s.c.id == bindparam("sid")) & (s.c.assignment_id == bindparam("aid")))
                              .values(done=True)),
        # a claim
        "has_position": db.Write(lambda: select(func.count().label("n")).select_from(a).where(
            (a.c.participant_id == bindparam("pid")) & (a.c.position == bindparam("pos")))),
        "assignment": db.Write(lambda: insert(a).values(**bind(
            "token", "participant_id", "position", "page", "slot_id", "created_at", "expires_at", "attention_item",
            "attention_expected", "extra_items")), returning_id=True),
        "take_slot": db.Write(lambda: update(s).where((s.c.id == bindparam("sid")) & _free_slot())
                              .values(assignment_id=bindparam("aid"), held_until=bindparam("until"))),
        "drop_assignment": db.Write(lambda: a.delete().where(a.c.id == bindparam("aid"))),
        "not_waiting": db.Write(lambda: update(p).where((p.c.id == bindparam("pid")) & (p.c.outcome == WAITING))
                                .values(outcome="")),
        # the end
        "outcome": db.Write(lambda: update(p).where((p.c.id == bindparam("pid")) & p.c.finished_at.is_(None))
                            .values(outcome=bindparam("outcome"))),
        "finished": db.Write(lambda: update(p).where((p.c.id == bindparam("pid")) & p.c.finished_at.is_(None))
                             .values(finished_at=bindparam("at"), outcome=bindparam("outcome"))),
    }


#: Write statements (:func:`_writes`), built on first use.
_WRITES: dict = {}
#: The claim's choice of slot without an adaptive plan, one statement per count of pages left
#: out for a trap met elsewhere (:func:`_choose_in_page_order`).
_CHOOSE: dict = {}
#: The same in an adaptive plan's order on SQLite (:func:`_choose_ranked`).
_CHOOSE_RANKED: dict = {}


def _write(name: str):
    if not _WRITES:
        _WRITES.update(_writes())
    return _WRITES[name]


def _choose_ranked(met: int):
    """The claim's choice of slot on SQLite in an adaptive plan's order, one statement per
    ``met`` (as :func:`_choose`): the emptiest page first, then the plan's rank (the plan's
    :func:`~satcal.serve.priority.rank_blob` bound as ``ranks`` at each claim), then the page
    number. Built and compiled once, where the order's expression built into each claim's
    statement cost SQLAlchemy's statement building and cache lookup in the writers' turn."""
    choose = _CHOOSE_RANKED.get(met)
    if choose is None:
        from sqlalchemy import LargeBinary, bindparam, select
        from .priority import blob_rank

        def build():
            s = db.tables()["slots"]
            rank = blob_rank(s.c.page, bindparam("ranks", type_=LargeBinary))
            return select(s.c.id, s.c.page).where(_candidates(met)).order_by(s.c.replicate, rank, s.c.page).limit(1)
        choose = _CHOOSE_RANKED[met] = db.Write(build)
    return choose


def _choose(met: int):
    """The claim's choice of slot without an adaptive plan for ``met`` pages left out
    (:func:`_choose_in_page_order`), as a :class:`satcal.serve.db.Write`."""
    choose = _CHOOSE.get(met)
    if choose is None:
        choose = _CHOOSE[met] = db.Write(lambda: _choose_in_page_order(met))
    return choose


class _Lost(Exception):
    """A compare-and-set lost to a concurrent request: roll the transaction back."""


@dataclass
class PageView:
    """What the page template needs: the assignment token and the items in order (the
    attention check, if any, among them).

    Attributes
    ----------
    token : str
        The assignment token (32 hex digits) the page's form posts back.
    position : int
        The page's place among the participant's pages, from 1.
    total : int
        The participant's pages: ``pages_per_participant``, or the pages there are when fewer.
    items : list of dict
        The items in the order shown, each with its ``kind`` (``"item"``, or ``"attention"`` for
        the attention check): the page's own, any trap shown on top, the attention check.
    """

    token: str
    position: int
    total: int
    items: list[dict] = field(default_factory=list)


def simulation_token(key_digest: str) -> str:
    """The entry parameter ``SATCAL_SIMULATED`` that marks a participant as the simulated crowd's
    (``satcal simulate --serve``): a digest of the batch's key.csv, which the workspace holds and
    no participant sees, so only the researcher's own dry run can mark anyone simulated.

    Parameters
    ----------
    key_digest : str
        SHA-256 of key.csv.

    Returns
    -------
    str
        32 hexadecimal digits.
    """
    return hashlib.sha256(f"satcal-simulated:{key_digest}".encode()).hexdigest()[:32]


def trap_targets(pages: int, min_traps: int) -> list[int]:
    """Traps a participant has met after each of their ``pages`` pages: ``ceil(m (j + 1) / P)``
    after page j, so ``min_traps`` = m are spread evenly and all met by the last page.

    Parameters
    ----------
    pages : int
        Pages a participant gets (P).
    min_traps : int
        Traps each must meet (m).

    Returns
    -------
    list of int
        One count per page; empty when ``pages`` is 0.
    """
    return [-(-min_traps * (j + 1) // pages) for j in range(pages)] if pages else []


def participant_traps(chance, items_seen: int, pages: int, asked, threshold: float, power: float,
                      min_traps: int) -> tuple[int, str, list[str]]:
    """How many traps each participant of the hosted study meets, the line export and serve
    print of it, and the warnings where that count misses the trap rule's power.

    The trap rule's count is :func:`satcal.quality.traps_needed` of the batch's traps' chance
    rates: the fewest traps at which the traps alone exclude a participant answering at random
    with probability ``power``. ``asked = "auto"`` takes it, but at most the items the
    participant's own pages hold (``items_seen``: traps then make up at most half of their
    answers, and a page at most doubles) and at least ``min_traps`` (the least ingest scores),
    never more than the batch holds; a number is taken as it is.

    Parameters
    ----------
    chance : array_like of float
        The chance acceptance rate of each of the batch's traps (accepted codes / 4).
    items_seen : int
        The batch's items on the pages one participant gets.
    pages : int
        Pages one participant gets.
    asked : int or str
        ``serve.traps_per_participant``: a number, or ``"auto"``.
    threshold : float
        ``quality.trust_threshold``.
    power : float
        ``quality.trap_power``.
    min_traps : int
        ``quality.min_traps``.

    Returns
    -------
    tuple of (int, str, list of str)
        The count, the line, the warnings.
    """
    from ..quality import trap_exclusion, trap_rule_line, traps_within
    chance = np.asarray(chance, float)
    available = len(chance)
    # the rule's count, at most the participant's own items, never under min_traps (fewer
    # leave a participant unscored at ingest); the batch's traps cap it all
    n, needed, reached = traps_within(chance, items_seen, threshold, power, min_traps)
    if asked == "auto":
        how = 'traps_per_participant = "auto"'
    else:
        n = int(asked)
        how = f"traps_per_participant = {n}"
        reached = trap_exclusion(chance, threshold, n) if available else 0.0
    line = (f"screening: each participant meets {n} trap{'' if n == 1 else 's'} over their {pages} "
            f"page{'' if pages == 1 else 's'} ([serve] {how}; the trap rule asks "
            f"{'none: the batch has no traps' if not available else needed if needed is not None else 'more than any count gives'}"
            + (f"), so that one answering at random is excluded by the traps alone with probability {reached:.3f}"
               if available else ")"))
    if not available:
        return n, line, ["the batch has no traps: no participant is scored on traps or excluded for failing "
                         "them; set [traps] count (\"auto\") and generate and export again"] if asked == "auto" else []
    if needed is None:
        return n, line, [trap_rule_line(chance, threshold, power)]
    if n >= needed:
        return n, line, []
    short = (f"a participant answering at random is excluded by the traps alone with probability {reached:.3f}, "
             f"not quality.trap_power = {power:g}")
    if asked != "auto":
        return n, line, [f"[serve] traps_per_participant = {n} is below the trap rule's {needed}: {short}; "
                         f'set it to {needed} or "auto"']
    if available < needed:
        return n, line, [f"the batch has {available} traps, fewer than the trap rule's {needed}: {short}; set "
                         f"[traps] count = {needed} (or \"auto\") and generate and export again"]
    more = -(-needed * pages // max(items_seen, 1))
    return n, line, [f'each participant meets {n} traps, not the trap rule\'s {needed}: "auto" stops at the '
                     f"{items_seen} items their {pages} pages hold (traps at most half of their answers), so {short}; "
                     f"raise [serve] pages_per_participant to {more}, or set traps_per_participant = {needed} "
                     f"(pages then hold about {-(-needed // max(pages, 1))} traps each beside their items)"]


def items_per_page_with_traps(fit: int, pages: int, chance, examples: int, asked, threshold: float,
                              power: float, min_traps: int) -> int:
    """The hosted study's own items a page (``presentation.items_per_page = "auto"`` with
    ``serve.traps_on_top``): the most, ``n``, for which the page's own ``n`` and the traps shown on
    top of it still fit the ``fit`` items a page holds by reading load; at least one.

    A participant's ``pages`` pages of ``n`` items hold ``n pages T / (E + T)`` of the batch's
    ``T`` traps among its ``E`` examples; :func:`participant_traps` gives the count ``m`` they
    must meet (at most ``n pages`` under ``"auto"``), so ``ceil((m - native) / pages)`` more
    traps a page are shown on top (the server spreads them evenly, :func:`trap_targets`).
    Without this a page under ``"auto"`` traps could hold twice the items its reading load
    allows.

    Parameters
    ----------
    fit : int
        Items of the batch's mean height a page holds within its height budget
        (:func:`satcal.platforms.serve.auto_items_per_page` with no reserve).
    pages : int
        ``serve.pages_per_participant``.
    chance : array_like of float
        The chance acceptance rate of each of the batch's traps.
    examples : int
        The batch's examples (items that are not traps).
    asked : int or str
        ``serve.traps_per_participant``.
    threshold : float
        ``quality.trust_threshold``.
    power : float
        ``quality.trap_power``.
    min_traps : int
        ``quality.min_traps``.

    Returns
    -------
    int
    """
    chance = np.asarray(chance, float)
    share = len(chance) / max(examples + len(chance), 1)
    for n in range(max(int(fit), 1), 1, -1):
        met = participant_traps(chance, n * pages, pages, asked, threshold, power, min_traps)[0]
        on_top = -(-max(0.0, met - n * pages * share) // max(pages, 1))
        if n + on_top <= fit:
            return n
    return 1


def screening_warnings(pages: dict, trap_ids, per_participant: int, min_traps: int, traps_on_top: bool) -> list[str]:
    """Why the hosted study cannot score every participant on ``min_traps`` traps (empty when it
    can): too few traps in the batch, or (traps only where the batch put them) too few traps on
    the pages one participant gets; or participants give too few answers for the
    straight-lining test (``satcal.quality.STRAIGHT_MIN_ANSWERS``).

    Parameters
    ----------
    pages : dict
        Page number to its item ids.
    trap_ids : iterable of str
        The item ids of the batch's traps.
    per_participant : int
        Pages one participant gets.
    min_traps : int
        The traps each participant meets (:func:`participant_traps`); 0 or less asks for
        nothing.
    traps_on_top : bool
        Whether the server adds traps on top of pages.

    Returns
    -------
    list of str
    """
    trap_ids = set(trap_ids)
    if min_traps <= 0:
        return []
    if len(trap_ids) < min_traps:
        return [f"the batch has {len(trap_ids)} trap(s), fewer than the {min_traps} each participant meets "
                "([serve] traps_per_participant): participants meet fewer and may not be scored on traps; "
                "raise [traps] count and generate and export again"]
    if not traps_on_top:
        items = sum(len(v) for v in pages.values())
        expected = per_participant * len(trap_ids) / max(len(pages), 1)
        if expected < min_traps:
            return [f"with [serve] traps_on_top = false a participant meets {expected:.1f} traps on average "
                    f"({len(trap_ids)} traps among {items} items on {len(pages)} pages, {per_participant} pages "
                    f"each), fewer than the {min_traps} of [serve] traps_per_participant: most participants "
                    "cannot be scored; "
                    "set traps_on_top = true"]
    from ..quality import STRAIGHT_MIN_ANSWERS
    answers = per_participant * sum(len(v) for v in pages.values()) / max(len(pages), 1)
    if traps_on_top:
        answers += max(0, min_traps - per_participant * len(trap_ids) / max(len(pages), 1))
    if pages and answers < STRAIGHT_MIN_ANSWERS:
        return [f"a participant gives about {answers:.0f} answers ({per_participant} pages), fewer than the "
                f"{STRAIGHT_MIN_ANSWERS} the straight-lining test needs: a participant answering 'both bad' to "
                "everything passes every trap that accepts it; raise [serve] pages_per_participant"]
    return []


def _trap_rows(key: pd.DataFrame) -> pd.DataFrame:
    """key.csv's trap rows (``is_trap`` as written, or read back as text)."""
    return key.loc[key["is_trap"].astype(str) == "True"]


def trap_items(key: pd.DataFrame) -> pd.Series:
    """The item ids of a batch's traps (key.csv).

    Parameters
    ----------
    key : pandas.DataFrame
        key.csv.

    Returns
    -------
    pandas.Series
    """
    return _trap_rows(key)["item_id"].astype(str)


def trap_chances(key: pd.DataFrame) -> pd.Series:
    """The chance acceptance rate of each of a batch's traps (accepted codes / 4, from key.csv's
    ``expected``), by item id.

    Parameters
    ----------
    key : pandas.DataFrame
        key.csv.

    Returns
    -------
    pandas.Series
    """
    from ..quality import _chance
    traps = _trap_rows(key)
    return pd.Series(_chance(traps), index=traps["item_id"].astype(str).to_numpy(), dtype=float)


def _screening(pages: dict, chance: pd.Series, per_participant: int, settings: ServeSettings):
    """:func:`participant_traps` and :func:`screening_warnings` of the pages one participant
    gets: (count, line, warnings)."""
    items_seen = int(per_participant * sum(len(v) for v in pages.values()) / max(len(pages), 1))
    n, line, warned = participant_traps(chance.to_numpy(), items_seen, per_participant,
                                        settings.traps_per_participant, settings.trust_threshold,
                                        settings.trap_power, settings.min_traps)
    own = sum(len(v) for v in pages.values()) / max(len(pages), 1)
    native = per_participant * len(chance) / max(len(pages), 1)  # traps the pages themselves hold
    if settings.traps_on_top and n > native and per_participant:  # what the pages grow by
        line += (f"; about {(n - native) / per_participant:.1f} traps a page shown on top of its "
                 f"{own:.1f} items on average")
    checks = min(settings.attention_checks, per_participant)
    line += (f"; {checks} attention check{'' if checks == 1 else 's'} (failing {settings.attention_fail_limit} "
             "ends a participation with the failed-attention code and excludes its answers at ingest)" if checks else "; no attention checks")
    return n, line, warned + screening_warnings(pages, chance.index, per_participant, n, settings.traps_on_top)


def batch_screening(items: pd.DataFrame, key: pd.DataFrame, settings: ServeSettings) -> tuple[str, list[str]]:
    """How the hosted study of an exported batch screens participants (the line ``satcal export``
    with platform serve prints, as ``satcal serve`` does at start: traps each participant meets,
    attention checks) and the warnings of :func:`participant_traps` and
    :func:`screening_warnings`.

    Parameters
    ----------
    items : pandas.DataFrame
        items.csv.
    key : pandas.DataFrame
        key.csv.
    settings : ServeSettings
        The server's settings.

    Returns
    -------
    tuple of (str, list of str)
    """
    pages = {int(p): list(g["item_id"]) for p, g in items.groupby("page")}
    _, line, warned = _screening(pages, trap_chances(key), min(settings.pages_per_participant, len(pages)), settings)
    return line, warned


def attention_positions(pages: int, checks: int) -> set[int]:
    """Which of a participant's pages (0-based) carry an attention check: evenly spread.

    Parameters
    ----------
    pages : int
        Pages a participant gets.
    checks : int
        Attention checks wanted (at most one a page).

    Returns
    -------
    set of int
    """
    checks = min(checks, pages)
    return {int((j + 0.5) * pages / checks) for j in range(checks)} if checks else set()


class HostedStudy:
    """The study a server process serves: pages, settings and the database engine.

    Parameters
    ----------
    pages : dict of int to list of dict
        The batch's pages, each a list of item views (:func:`load_pages`); at least one.
    settings : ServeSettings
        The server's settings.
    engine : sqlalchemy.engine.Engine
        The study database, prepared for this batch on construction.
    key_digest : str
        SHA-256 of key.csv: the database belongs to one batch.
    trap_ids : iterable of str, default ()
        Item ids of the traps (:func:`trap_items`).
    trap_chance : pandas.Series or None, default None
        The traps' chance acceptance rates by item id (:func:`trap_chances`); None: 1/4 each
        (one accepted answer).
    """

    def __init__(self, pages: dict[int, list[dict]], settings: ServeSettings, engine, key_digest: str,
                 trap_ids=(), trap_chance: pd.Series | None = None):
        if not pages:
            raise SatcalError("the batch has no items to serve; run satcal export first")
        self.pages = pages
        self.settings = settings
        self.engine = engine
        self.writer = db.writer(engine)
        #: single-statement reads (on SQLite without BEGIN and ROLLBACK around them, see db.reader)
        self.reader = db.reader(engine)
        self.stored = db.prepare(engine, key_digest, sorted(pages), settings.answers_per_example)
        self.secret = self.stored["secret"]
        self.status_token = self.stored["status_token"]
        self.per_participant = min(settings.pages_per_participant, len(pages))
        self._attention_at = attention_positions(self.per_participant, settings.attention_checks)
        self.simulation_token = simulation_token(key_digest)
        # traps: their items (to show on top of another page) and the traps on each page
        trap_ids = set(map(str, trap_ids))
        self.trap_views = {it["item_id"]: it for items in pages.values() for it in items if it["item_id"] in trap_ids}
        self.traps_on_page = {page: {it["item_id"] for it in items if it["item_id"] in trap_ids}
                              for page, items in pages.items()}
        chance = pd.Series(0.25, index=list(self.trap_views), dtype=float)
        if trap_chance is not None:
            chance = trap_chance.reindex(chance.index).fillna(0.25)
        #: traps each participant meets (:func:`participant_traps`), the line saying how they are
        #: screened, and why the design cannot screen them as asked
        self.traps_per_participant, self.screening, self.warnings = _screening(
            {p: [it["item_id"] for it in items] for p, items in pages.items()}, chance, self.per_participant, settings)
        self._trap_targets = trap_targets(self.per_participant, self.traps_per_participant)
        #: adaptive studies: the page order and the stop, published by a background refit
        #: (:class:`satcal.serve.priority.PageOrder`, set by the caller); None: page order
        self.order = None
        # every statement a request runs, compiled now rather than by the first participants
        _write("lock")  # builds them all
        for statement in [*_READS.values(), *_WRITES.values(), *(_choose(met) for met in range(4)),
                          *(_choose_ranked(met) for met in range(4) if engine.dialect.name == "sqlite")]:
            statement.compile(engine)

    @classmethod
    def from_batch(cls, items: pd.DataFrame, key: pd.DataFrame, settings: ServeSettings, engine,
                   key_digest: str) -> "HostedStudy":
        """The hosted study of an exported batch (items.csv, key.csv and its SHA-256).

        Parameters
        ----------
        items : pandas.DataFrame
            items.csv.
        key : pandas.DataFrame
            key.csv.
        settings : ServeSettings
            The server's settings.
        engine : sqlalchemy.engine.Engine
            The study database.
        key_digest : str
            SHA-256 of key.csv.

        Returns
        -------
        HostedStudy

        Raises
        ------
        SatcalError
            The batch has no items.
        """
        return cls(load_pages(items, settings.k), settings, engine, key_digest, trap_items(key), trap_chances(key))

    # -- participants ----------------------------------------------------------------------
    def enter(self, kind: str, external_id: str, study_id: str = "", session_id: str = "",
              simulated: bool = False) -> int:
        """The participant's id, created on first entry (a returning participant resumes);
        ``simulated`` marks one the simulated crowd created (kept from the first entry).

        A person is ``(kind, external_id)``: one Prolific id is one participant under every
        STUDY_ID of the study (the row keeps the STUDY_ID and SESSION_ID of the first entry), so
        a Prolific study duplicated to recruit more never shows anyone a page twice.

        Parameters
        ----------
        kind : str
            ``"prolific"`` or ``"lab"``.
        external_id : str
            The Prolific id or the participant code.
        study_id : str, optional
            Prolific's STUDY_ID.
        session_id : str, optional
            Prolific's SESSION_ID.
        simulated : bool, optional
            Mark a new participant simulated (default False).

        Returns
        -------
        int

        Raises
        ------
        SatcalError
            The participant could not be registered after three tries.
        """
        return self.register(kind, external_id, study_id, session_id, simulated)[0]

    def register(self, kind: str, external_id: str, study_id: str = "", session_id: str = "",
                 simulated: bool = False, look_first: bool = True) -> tuple[int, bool]:
        """:meth:`enter`, saying also whether the participant was created now.

        Parameters
        ----------
        kind, external_id, study_id, session_id, simulated
            As for :meth:`enter`.
        look_first : bool, optional
            Look for the participant before taking the write lock (default True); False when
            the caller has just looked (:meth:`known`) and found no one.

        Returns
        -------
        tuple of (int, bool)
            The participant's id, and True when this call created them.

        Raises
        ------
        SatcalError
            The participant could not be registered after three tries.
        """
        from sqlalchemy.exc import IntegrityError
        who = dict(kind=kind, external_id=external_id)
        for attempt in range(3):
            if look_first or attempt:
                found = _READS["first"].first(self.engine, **who)
                if found is not None:
                    return int(found["id"]), False
            def create(conn):
                # entries queue here (SQLite: one writer; PostgreSQL: this row lock), so the
                # same person entering under two STUDY_IDs at once gets one row, not two
                if conn.dialect.name != "sqlite":
                    _write("lock").run(conn)
                found = _write("first").run(conn, **who)
                if found:
                    return int(found[0]["id"]), False
                return _write("participant").run(conn, **who, study_id=study_id, session_id=session_id,
                                                 created_at=time.time(), outcome="", simulated=bool(simulated)), True
            try:
                return self.writer.run(create)
            except IntegrityError:
                continue  # the same participant entered twice at once: the other insert won
        raise SatcalError("could not register the participant")

    def known(self, kind: str, external_id: str) -> dict | None:
        """The participant ``(kind, external_id)`` if they have entered before (nothing created).

        Parameters
        ----------
        kind : str
            ``"prolific"`` or ``"lab"``.
        external_id : str
            The Prolific id or the participant code.

        Returns
        -------
        dict or None
            Their first participant row.
        """
        return _READS["known"].first(self.engine, kind=kind, external_id=external_id)

    def participant(self, pid: int) -> dict | None:
        """The participant row ``pid``, or None if there is none.

        Parameters
        ----------
        pid : int
            The participant's id.

        Returns
        -------
        dict or None
        """
        return _READS["participant"].first(self.engine, pid=pid)

    def participant_and_assignments(self, pid: int) -> tuple[dict | None, list[dict]]:
        """The participant row ``pid`` (None if there is none) and their assignment rows in
        position order, read by one statement (one snapshot): what a page request needs
        before it shows or stores a page (:meth:`next_page`, :meth:`submit` take the rows).

        Parameters
        ----------
        pid : int
            The participant's id.

        Returns
        -------
        tuple of (dict or None, list of dict)
        """
        rows = _READS["with_assignments"].rows(self.engine, pid=pid)
        if not rows:
            return None, []
        person = {k: v for k, v in rows[0].items() if not k.startswith("a_")}
        mine = [{k[2:]: v for k, v in row.items() if k.startswith("a_")} for row in rows if row["a_id"] is not None]
        return person, mine

    def consent(self, pid: int, claim_first: bool = False) -> None:
        """Record that participant ``pid`` consented (the first time only).

        Parameters
        ----------
        pid : int
            The participant's id.
        claim_first : bool, default False
            Also claim their first page in the same write (:meth:`_claim_along`), as the
            server does: the page they are sent to next is then shown without a write.
        """
        claim = self._claim_along(pid, 0) if claim_first else None

        def consent(conn):
            _write("consent").run(conn, pid=pid, at=time.time())
            if claim is not None:
                claim(conn)
        self.writer.run(consent)

    # -- pages -----------------------------------------------------------------------------
    def next_page(self, pid: int, mine: list | None = None) -> PageView | None:
        """The participant's open page, or a newly claimed one; None when they are done (their
        share answered, or no page left that they have not seen).

        Parameters
        ----------
        pid : int
            The participant's id.
        mine : list of dict or None, optional
            Their assignment rows, as the caller has just read them
            (:meth:`participant_and_assignments`); None (default): read now.

        Returns
        -------
        PageView or None
        """
        if mine is None:
            mine = _READS["assignments"].rows(self.engine, pid=pid)  # one query: a participant has a few pages at most
        open_row = next((row for row in mine if row["submitted_at"] is None), None)
        done = len(mine)
        if open_row is not None:
            return self._view(open_row)
        if done >= self.per_participant:
            return None
        row = self._claim(pid, done)
        return self._view(row) if row is not None else None

    def _claim(self, pid: int, position: int):
        """Claim the emptiest free slot on a page this participant has not had."""
        from sqlalchemy import select
        from sqlalchemy.exc import IntegrityError
        a = db.tables()["assignments"]
        if self.closed():
            return None  # adaptive: settled or at the budget, no page handed out any more
        for _ in range(50):
            claim = self._claim_block(pid, position)
            try:
                return self.writer.run(claim)
            except _Lost:
                continue
            except IntegrityError:
                # this participant asked twice at once; the other request made the assignment
                with self.reader.connect() as conn:
                    row = conn.execute(select(a).where((a.c.participant_id == pid) & (a.c.position == position))
                                       ).mappings().first()
                if row is not None:
                    return dict(row) if row["submitted_at"] is None else None
        raise SatcalError("too many concurrent claims; try again")

    def _claim_block(self, pid: int, position: int, mine: list | None = None):
        """The write block that claims the ``position``-th page of participant ``pid``
        (``claim(conn)``: the assignment's row, or None when no slot is free; raises ``_Lost``
        when another claimer took the slot first and ``IntegrityError`` when the participant
        has that page already). What it needs to know beforehand (the traps they met) is read
        now, outside the writers' turn, or taken from ``mine``, their assignment rows as the
        caller has just read them (a submission: one read instead of two)."""
        now = time.time()
        traps_met = self._traps_met(pid, mine)
        # a page holding a trap this participant met on top of another page would show it twice
        met_on = [page for page, traps in self.traps_on_page.items() if traps & traps_met]
        free = dict(ape=self.settings.answers_per_example, now=now)
        where = dict(free, pid=pid, **{f"met{i}": page for i, page in enumerate(met_on)})

        def claim(conn):
            slot = self._choose_slot(conn, len(met_on), where)
            if slot is None:
                return None
            token = secrets.token_hex(16)
            attention = position in self._attention_at
            values = dict(token=token, participant_id=pid, position=position, page=int(slot["page"]),
                          slot_id=int(slot["id"]), created_at=now,
                          expires_at=now + 60 * self.settings.assignment_timeout_minutes,
                          attention_item=secrets.token_hex(8) if attention else "",
                          attention_expected=secrets.choice(SHOWN_CODES) if attention else "",
                          extra_items=" ".join(self._extra_traps(pid, position, int(slot["page"]), traps_met)))
            aid = _write("assignment").run(conn, **values)
            won = _write("take_slot").run(conn, sid=values["slot_id"], aid=aid, until=values["expires_at"], **free)
            if won != 1:
                # another participant took this slot first: undo the assignment (a block of a
                # SQLite group is not always in a savepoint of its own) and try the next
                _write("drop_assignment").run(conn, aid=aid)
                raise _Lost
            if position == 0:  # a newcomer told to come back has a page now
                _write("not_waiting").run(conn, pid=pid)
            return {**values, "id": aid, "submitted_at": None}
        return claim

    def _claim_along(self, pid: int, position: int, mine: list | None = None):
        """A write block claiming the participant's ``position``-th page inside another write
        (a page's submission, a consent), so that the page they are sent to next is ready and
        showing it writes nothing: one turn at the writers and one commit instead of two. None
        when there is nothing to claim (their pages are all had, or an adaptive study
        stopped). The claim is skipped, never failing the write it rides on, when the
        participant has that page already (a concurrent request of theirs) or the slot is lost
        (PostgreSQL); showing the page then claims as before. ``mine``: as for
        :meth:`_claim_block`."""
        from sqlalchemy.exc import IntegrityError
        if position >= self.per_participant or self.closed():
            return None
        claim = self._claim_block(pid, position, mine)

        def along(conn):
            # SQLite: writers take turns, so this look and the insert see the same state
            if _write("has_position").run(conn, pid=pid, pos=position)[0]["n"]:
                return None
            if conn.dialect.name == "sqlite":
                try:
                    return claim(conn)
                except (_Lost, IntegrityError):  # the insert, the claim's first write, undoes itself
                    return None
            try:
                with conn.begin_nested():  # PostgreSQL: a failed claim undoes only itself
                    return claim(conn)
            except (_Lost, IntegrityError):
                return None
        return along

    def closed(self) -> bool:
        """Whether an adaptive study's latest plan says stop (settled, or at its budget)."""
        return self.order is not None and self.order.closed

    def _slot_order(self, s) -> tuple:
        """Emptiest slots first; among them the adaptive plan's order when there is one (read
        from the latest published plan, never waiting for a refit), else page order."""
        if self.order is None:
            return s.c.replicate, s.c.page
        return s.c.replicate, self.order.rank_expression(s.c.page, self.engine.dialect.name), s.c.page

    def _choose_slot(self, conn, met: int, params: dict):
        """The page assignment: which of the free slots on a page this participant may get
        (:func:`_candidates`, its bound values ``params``) the participant claims, as a dict
        (id, page), or None when there is none. The emptiest page first (the lowest
        replicate, so every page gets its first answer before any gets a second), then, on an
        adaptive study, the latest published plan's order (never waiting for a refit), then the
        lowest page number. Runs inside the claim's write transaction."""
        ranks = self.order.rank_blob() if self.order is not None and conn.dialect.name == "sqlite" else None
        if self.order is None or (ranks is None and conn.dialect.name == "sqlite"):
            # one statement per shape, compiled once, run on the driver (no plan yet: page order)
            rows = _choose(met).run(conn, **params)
            return rows[0] if rows else None
        if ranks is not None:  # SQLite in the plan's order: the same, the plan's ranks bound
            rows = _choose_ranked(met).run(conn, **params, ranks=ranks)
            return rows[0] if rows else None
        from sqlalchemy import select
        s = db.tables()["slots"]
        # PostgreSQL: skip slots another claimer has locked (SQLite serialises writers)
        row = conn.execute(select(s.c.id, s.c.page).where(_candidates(met)).order_by(*self._slot_order(s))
                           .limit(1).with_for_update(skip_locked=True, of=s), params).first()
        return None if row is None else {"id": row.id, "page": row.page}

    def _traps_met(self, pid: int, mine: list | None = None) -> set[str]:
        """The traps this participant has been shown so far: on their pages, and on top of them
        (from ``mine``, their assignment rows, when the caller has read them)."""
        met = set()
        for row in _READS["pages"].rows(self.engine, pid=pid) if mine is None else mine:
            met |= self.traps_on_page.get(int(row["page"]), set()) | set((row["extra_items"] or "").split())
        return met

    def _extra_traps(self, pid: int, position: int, page: int, met: set[str]) -> list[str]:
        """Traps to show on top of ``page`` (the participant's ``position``-th) so that they have
        met :func:`trap_targets` traps by the end of it: none they have met or the page holds,
        in an order of their own (a hash of participant and trap), so the traps are shown about
        equally often over participants."""
        if not self.settings.traps_on_top or position >= len(self._trap_targets):
            return []
        here = self.traps_on_page.get(page, set())
        need = self._trap_targets[position] - len(met) - len(here)
        if need <= 0:
            return []
        free = [t for t in self.trap_views if t not in met and t not in here]
        free.sort(key=lambda t: hashlib.sha256(f"{pid}:{t}".encode()).digest())
        return free[:need]

    def _seen(self, pid: int):
        """The pages this person has had, under any of their participant rows (a database from
        before one Prolific id was one participant may hold two rows of one person)."""
        return _seen_by(pid)

    def first_release(self, pid: int) -> float | None:
        """When this participant can next get a page: None when every slot on a page they have
        not had is answered (the study is full for them), else the earliest time one of those
        slots is free (now, if one is free already; else when its holder's assignment times
        out).

        Parameters
        ----------
        pid : int
            The participant's id.

        Returns
        -------
        float or None
            A Unix time.
        """
        from sqlalchemy import func, select
        s = db.tables()["slots"]
        open_slot = (s.c.done.is_(False) & (s.c.replicate <= self.settings.answers_per_example)
                     & s.c.page.not_in(self._seen(pid)))
        with self.reader.connect() as conn:
            n, earliest = conn.execute(select(func.count(), func.min(func.coalesce(s.c.held_until, 0.0)))
                                       .where(open_slot)).one()
        return max(float(earliest), time.time()) if n else None

    def _view(self, row) -> PageView:
        items = [dict(it, kind="item") for it in self.pages[int(row["page"])]]
        for extra in (row.get("extra_items") or "").split():
            # a trap on top of the page, at a place of this page's own (its token's hash)
            at = int(hashlib.sha256(f"{row['token']}:{extra}".encode()).hexdigest(), 16) % (len(items) + 1)
            items.insert(at, dict(self.trap_views[extra], kind="item"))
        if row["attention_item"]:
            at = int(row["attention_item"], 16) % (len(items) + 1)
            items.insert(at, {"item_id": row["attention_item"], "kind": "attention",
                              "expected": row["attention_expected"]})
        return PageView(token=row["token"], position=int(row["position"]) + 1, total=self.per_participant,
                        items=items)

    def submit(self, pid: int, token: str, form: dict, claim_next: bool = False, mine: list | None = None) -> str:
        """Store a submitted page. Returns ``"stored"``, ``"already"`` (a resubmission: nothing
        stored twice), ``"missing"`` (not every item answered: nothing stored) or ``"unknown"``
        (not this participant's page).

        Parameters
        ----------
        pid : int
            The participant's id.
        token : str
            The page's assignment token.
        form : dict
            The submitted fields; ``answer-<item id>`` holds each item's answer.
        claim_next : bool, default False
            Also claim the participant's next page in the same write when this page is stored
            (:meth:`_claim_along`), as the server does: the page they are sent to next is then
            shown without a write.
        mine : list of dict or None, optional
            The participant's assignment rows, as the caller has just read them
            (:meth:`participant_and_assignments`); None (default): read now. Either way
            outside the writers' turn: the write's compare-and-set (the page not yet
            submitted) decides, as it always has.

        Returns
        -------
        str
        """
        from sqlalchemy.exc import IntegrityError
        if not isinstance(token, str) or not TOKEN_PATTERN.fullmatch(token):
            return "unknown"  # nothing malformed reaches the database (PostgreSQL refuses NUL bytes)
        # every assignment of the participant in one read (a few rows at most): the page
        # submitted is among them, and the traps they met (for the next page's claim) come
        # from the same rows, where two reads used to fetch them one after the other
        if mine is None:
            mine = _READS["assignments"].rows(self.engine, pid=pid)
        row = next((r for r in mine if r["token"] == token), None)
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
        claim = self._claim_along(pid, int(row["position"]) + 1, mine) if claim_next else None

        def store(conn):
            if _write("submitted").run(conn, aid=row["id"], at=now) != 1:
                raise _Lost
            _write("responses").many(conn, records)
            # the slot is done if this page still holds it (a late page, whose slot went
            # to someone else meanwhile, is stored all the same: an extra answer)
            _write("slot_done").run(conn, sid=row["slot_id"], aid=row["id"])
            if claim is not None:
                claim(conn)
        try:
            self.writer.run(store)
        except (IntegrityError, _Lost):
            return "already"  # a concurrent submission of the same page stored it
        return "stored"

    def attention_failures(self, pid: int) -> int:
        """Attention checks participant ``pid`` has answered wrongly.

        Parameters
        ----------
        pid : int
            The participant's id.

        Returns
        -------
        int
        """
        return int(_READS["attention_failed"].first(self.engine, pid=pid)["n"])

    def finish(self, pid: int) -> str:
        """Record the end; the outcome: ``completed``, ``failed_attention``, ``full`` (a
        participant who had answered nothing, and every slot they could have is answered) or
        ``waiting`` (answered nothing, and every such slot is held by someone now: not an end,
        they are to come back when one frees, see :meth:`first_release`).

        Parameters
        ----------
        pid : int
            The participant's id.

        Returns
        -------
        str
        """
        answered = _READS["answered"].first(self.engine, pid=pid)["n"]
        if answered == 0 and not self.closed() and self.first_release(pid) is not None:
            self.writer.run(lambda conn: _write("outcome").run(conn, pid=pid, outcome=WAITING))
            return WAITING
        if answered == 0:
            outcome = "full"
        elif self.attention_failures(pid) >= self.settings.attention_fail_limit:
            outcome = "failed_attention"
        else:
            outcome = "completed"
        self.writer.run(lambda conn: _write("finished").run(conn, pid=pid, at=time.time(), outcome=outcome))
        return outcome

    # -- the researcher's view -------------------------------------------------------------
    def progress(self) -> dict:
        """The researcher's figures: slots, items by answers collected, progress per page,
        participants by outcome, each participant's pages and times, attention failures and the
        simulated share (participants and responses of ``satcal simulate --serve``)."""
        from sqlalchemy import case, func, select
        t = db.tables()
        s, p, r, a = t["slots"], t["participants"], t["responses"], t["assignments"]
        now = time.time()
        wanted = s.c.replicate <= self.settings.answers_per_example
        done = case((s.c.done.is_(True), 1), else_=0)
        held = case(((s.c.done.is_(False)) & (s.c.held_until >= now), 1), else_=0)
        with self.engine.connect() as conn:
            per_page = pd.DataFrame(conn.execute(select(s.c.page, func.count(), func.sum(done), func.sum(held))
                                                 .where(wanted).group_by(s.c.page).order_by(s.c.page)).all(),
                                    columns=["page", "slots", "done", "held"])
            outcomes = dict(conn.execute(select(p.c.outcome, func.count()).group_by(p.c.outcome)).all())
            people = pd.DataFrame(conn.execute(select(
                p.c.id, p.c.kind, p.c.external_id, p.c.outcome, p.c.simulated, p.c.finished_at).order_by(p.c.id)).all(),
                columns=["id", "kind", "external_id", "outcome", "simulated", "finished_at"])
            pages = pd.DataFrame(conn.execute(select(a.c.participant_id, a.c.created_at, a.c.submitted_at)
                                              .where(a.c.submitted_at.is_not(None))).all(),
                                 columns=["id", "created_at", "submitted_at"])
            checks = pd.DataFrame(conn.execute(
                select(a.c.participant_id, func.count(), func.sum(case((r.c.correct.is_(False), 1), else_=0)))
                .select_from(r.join(a, r.c.assignment_id == a.c.id)).where(r.c.kind == "attention")
                .group_by(a.c.participant_id)).all(), columns=["id", "checks", "failed"])
            by_sim = dict(conn.execute(select(p.c.simulated, func.count())
                                       .select_from(r.join(a, r.c.assignment_id == a.c.id).join(p, a.c.participant_id == p.c.id))
                                       .where(r.c.kind == "item").group_by(p.c.simulated)).all())
        for frame in (per_page, checks):
            frame.fillna(0, inplace=True)
        items_on = {page: len(items) for page, items in self.pages.items()}
        per_page["n_items"] = per_page["page"].map(items_on).fillna(0).astype(int)
        examples_by_answers = per_page.groupby("done")["n_items"].sum().to_dict() if len(per_page) else {}
        pages["seconds"] = pages["submitted_at"] - pages["created_at"]
        timing = pages.groupby("id")["seconds"].agg(n_pages="size", median_s="median", total_s="sum")
        people = people.join(timing, on="id").join(checks.set_index("id"), on="id")
        people["worker_id"] = db.worker_ids(people["kind"], people["external_id"]) if len(people) else []
        people["simulated"] = people["simulated"].fillna(False).astype(bool)
        responses = int(sum(by_sim.values()))
        simulated_responses = int(sum(n for k, n in by_sim.items() if k))
        return {"slots": int(per_page["slots"].sum()), "slots_done": int(per_page["done"].sum()),
                "slots_held": int(per_page["held"].sum()),
                "items_by_answers": {int(k): int(v) for k, v in sorted(examples_by_answers.items())},
                "pages": [{"page": int(x.page), "n_items": int(x.n_items), "slots": int(x.slots), "answered": int(x.done),
                           "held": int(x.held)} for x in per_page.itertuples()],
                "participants": {("in progress" if not k else k): int(v) for k, v in sorted(outcomes.items())},
                "people": [{"worker_id": str(x.worker_id), "outcome": x.outcome or "in progress",
                            "simulated": bool(x.simulated), "pages": int(0 if pd.isna(x.n_pages) else x.n_pages),
                            "median_seconds_per_page": None if pd.isna(x.median_s) else round(float(x.median_s), 1),
                            "total_seconds": None if pd.isna(x.total_s) else round(float(x.total_s), 1),
                            "attention_checks": int(0 if pd.isna(x.checks) else x.checks),
                            "attention_failed": int(0 if pd.isna(x.failed) else x.failed)}
                           for x in people.itertuples()],
                "attention_failures": [{"worker_id": str(x.worker_id), "failures": int(x.failed)}
                                       for x in people.sort_values("external_id").itertuples()
                                       if not pd.isna(x.failed) and x.failed > 0],
                "simulated_participants": int(people["simulated"].sum()),
                "simulated_share": (simulated_responses / responses) if responses else 0.0,
                "responses": responses, "answers_per_example": self.settings.answers_per_example,
                "traps_per_participant": self.traps_per_participant, "screening": self.screening,
                "warnings": list(self.warnings),
                **({"adaptive": self.order.status()} if self.order is not None else {})}

    def csrf_token(self, pid: int) -> str:
        """The form token of a participant: an HMAC of their id under the server's secret, so a
        page on another site cannot forge one.

        Parameters
        ----------
        pid : int
            The participant's id.

        Returns
        -------
        str
            Hexadecimal digest.
        """
        import hmac
        return hmac.new(self.secret.encode(), f"csrf:{pid}".encode(), hashlib.sha256).hexdigest()
