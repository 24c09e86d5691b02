"""The hosted study's routes: what each URL does for a participant or the researcher.

:class:`StudyRoutes` holds what the handlers share (the study, the templates, the rate
limiter) and has one method per endpoint, Starlette's ``async def endpoint(request)``;
:func:`satcal.serve.app.create_app` mounts them. Each handler does its database work in one
call to the database threads (:class:`DatabaseThreads`; the event loop never waits on
the database), and a page's items are
rendered once, when the server starts (:meth:`StudyRoutes.item_html`), and so are their answer
controls (:meth:`StudyRoutes.options_html`).
"""
from __future__ import annotations

import asyncio
import functools
import hmac
import threading
import time
from collections import deque
from pathlib import Path

from ..platforms import ANSWER_LABELS, instruction_paragraphs
from .study import ID_PATTERN, WAITING, HostedStudy

__all__ = ["StudyRoutes", "COMPLETION_URL", "MAX_BODY", "KINDS", "same_token", "identity", "parse_urlencoded",
           "read_form"]

COMPLETION_URL = "https://app.prolific.com/submissions/complete?cc={code}"
#: Largest request body accepted (a page of answers is a few KiB).
MAX_BODY = 64 * 1024
#: Requests per participant (and entries per address) in a moving window.
PARTICIPANT_RATE = "120/minute"
ENTRY_RATE = "600/minute"
HERE = Path(__file__).parent
#: Entry parameters: (identity kind, query parameter of the id).
KINDS = {"prolific": "PROLIFIC_PID", "lab": "participant"}
_NO_SESSION = "Please open the study from the link you were given."
_EXPIRED = "This form has expired; please go back and reload the page."
_TOO_MANY = "Too many requests; please wait a minute and reload."


#: Threads that run the database work of requests. On SQLite their writes take turns and share
#: commits (:class:`satcal.serve.db.GroupCommit`); 1 or 2 threads (tried with the commit waited
#: for on the event loop) queued page submissions 200-500 ms at the median under load, 16 or 32
#: queued longer for their turn.
DB_THREADS = 8


class DatabaseThreads:
    """The threads that run the database work of requests (:meth:`run`), started together
    when made (a thread started under load waits for the interpreter lock and holds up the
    event loop). A request's writes are on disk when :meth:`run` returns: its thread waits for
    the group's commit (:class:`satcal.serve.db.GroupCommit`). Letting the thread go on while the request waited for the commit on the event loop was
    tried: the pages were no faster, and a static file was several times slower at p50 and
    about twice at p95 (the queue moved from the database threads to the interpreter lock,
    which every request shares; docs/benchmarks.md).

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine or None, optional
        The study's database (the threads serve any).
    """

    _shared = None
    _lock = threading.Lock()

    def __init__(self, engine=None):
        # one pool for every study of the process (tests make many applications)
        with DatabaseThreads._lock:
            if DatabaseThreads._shared is None:
                from concurrent.futures import ThreadPoolExecutor, wait
                pool = ThreadPoolExecutor(DB_THREADS, thread_name_prefix="satcal-db")
                started = threading.Barrier(DB_THREADS, timeout=30)
                wait([pool.submit(started.wait) for _ in range(DB_THREADS)])
                DatabaseThreads._shared = pool
        self.pool = DatabaseThreads._shared

    async def run(self, func, *args):
        """``func(*args)`` on a database thread, awaited without blocking the event loop.

        Parameters
        ----------
        func : callable
            The database work.
        *args
            Its arguments.

        Returns
        -------
        object
            What ``func`` returned.
        """
        return await asyncio.get_running_loop().run_in_executor(self.pool, functools.partial(func, *args))


class MovingWindow:
    """A moving-window rate limiter in memory: :meth:`hit` allows at most ``item.amount`` hits
    per key in any ``item.get_expiry()`` seconds (``item`` a rate of the ``limits`` library,
    e.g. ``parse("120/minute")``), as its ``MovingWindowRateLimiter`` does. The ``limits``
    library's memory storage starts a timer thread to expire its entries, again and again
    under load; starting threads took a fifth of the event loop's time at 50 participants at
    once. Here a key's old hits go when the key is next hit, and idle keys every ``sweep``
    hits.

    Parameters
    ----------
    sweep : int, default 10,000
        Hits between two sweeps of the idle keys.
    """

    def __init__(self, sweep: int = 10_000):
        self._hits: dict = {}
        self._lock = threading.Lock()
        self._sweep, self._count = sweep, 0

    def hit(self, item, *identifiers) -> bool:
        """Count a hit on the key of ``identifiers``; False (not counted) when the key already
        has ``item.amount`` hits in the window.

        Parameters
        ----------
        item : limits.RateLimitItem
            The rate.
        *identifiers : str
            The key.

        Returns
        -------
        bool
        """
        now, window = time.monotonic(), item.get_expiry()
        with self._lock:
            self._count += 1
            if self._count % self._sweep == 0:
                self._hits = {k: q for k, q in self._hits.items() if q and q[-1] > now - q.window}
            key = item.key_for(*identifiers)
            hits = self._hits.get(key)
            if hits is None:
                hits = self._hits[key] = _Hits(window)
            while hits and hits[0] <= now - window:
                hits.popleft()
            if len(hits) >= item.amount:
                return False
            hits.append(now)
            return True


class _Hits(deque):
    """A key's hit times, with the length of its window (for the sweep of idle keys)."""

    def __init__(self, window: float):
        super().__init__()
        self.window = window


def same_token(given, expected: str) -> bool:
    """``given == expected`` in constant time, for any text a client sends: compared as UTF-8
    bytes (``hmac.compare_digest`` refuses str that is not ASCII).

    Parameters
    ----------
    given : object
        What the client sent (anything not a str is False).
    expected : str
        The token.

    Returns
    -------
    bool
    """
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8"))


#: Fields a form may have (more is refused with 400, as Starlette's parser does).
MAX_FIELDS = 500


def parse_urlencoded(body: bytes):
    """The fields of an ``application/x-www-form-urlencoded`` body, as Starlette's form parser
    gives them (names and values ``unquote_plus`` of the bytes read as Latin-1: ``%XX`` escapes
    as UTF-8, undecodable ones replaced; ``&`` separates fields; a field without ``=`` has an
    empty value), parsed by the standard library's ``parse_qsl`` in C-backed string operations
    instead of python-multipart's byte-at-a-time state machine (80 against 17 us for a page's
    dozen fields here, on the event loop).

    Parameters
    ----------
    body : bytes
        The request body.

    Returns
    -------
    starlette.datastructures.FormData

    Raises
    ------
    starlette.exceptions.HTTPException
        400: more than :data:`MAX_FIELDS` fields.
    """
    from urllib.parse import parse_qsl

    from starlette.datastructures import FormData
    from starlette.exceptions import HTTPException
    # Count the fields parsed, not parse_qsl's '&'s: empty fields ("a=1&&") are skipped, as
    # Starlette's parser skips them; the body is already capped at MAX_BODY bytes.
    pairs = parse_qsl(body.decode("latin-1"), keep_blank_values=True)
    if len(pairs) > MAX_FIELDS:
        raise HTTPException(400, f"Too many fields. Maximum number of fields is {MAX_FIELDS}.")
    return FormData(pairs)


async def read_form(request):
    """The form of a POST: a urlencoded body (what the pages' forms send) by
    :func:`parse_urlencoded`, any other by Starlette (no files, at most :data:`MAX_FIELDS`
    fields of :data:`MAX_BODY` bytes each).

    Parameters
    ----------
    request : starlette.requests.Request
        The POST.

    Returns
    -------
    starlette.datastructures.FormData
    """
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        return parse_urlencoded(await request.body())
    return await request.form(max_files=0, max_fields=MAX_FIELDS, max_part_size=MAX_BODY)


def identity(q):
    """(kind, id, study id, session id, error text) of entry parameters ``q``; kind is None
    when they name no one.

    Parameters
    ----------
    q : Mapping
        The query parameters.

    Returns
    -------
    tuple of (str or None, str, str, str, str)
    """
    if "PROLIFIC_PID" in q:
        kind, ident = "prolific", q.get("PROLIFIC_PID", "")
        study_id, session_id = q.get("STUDY_ID", ""), q.get("SESSION_ID", "")
    elif "participant" in q:
        kind, ident, study_id, session_id = "lab", q.get("participant", "").strip(), "", ""
    else:
        return None, "", "", "", ""
    for name, value in (("participant id", ident), ("study id", study_id), ("session id", session_id)):
        if not isinstance(value, str) or ((value or name == "participant id") and not ID_PATTERN.fullmatch(value)):
            return kind, "", "", "", f"That {name} is not valid: use 1 to 64 letters, digits, '_' or '-'."
    return kind, ident, study_id, session_id, ""


def shown_id(participant) -> str:
    """How the pages name a participant: the Prolific id, or ``code <code>`` for a lab participant.

    Parameters
    ----------
    participant : dict
        The participant row.

    Returns
    -------
    str
    """
    return participant["external_id"] if participant["kind"] == "prolific" else f"code {participant['external_id']}"


class StudyRoutes:
    """The endpoints of one hosted study (see the module docstring).

    Parameters
    ----------
    study : HostedStudy
        The study served.
    participant_rate : str, default "120/minute"
        Requests a participant may make in a moving window (``limits`` notation).
    entry_rate : str, default "600/minute"
        Entries one client address may make in a moving window.
    """

    def __init__(self, study: HostedStudy, participant_rate: str = PARTICIPANT_RATE,
                 entry_rate: str = ENTRY_RATE):
        from limits import parse
        from starlette.templating import Jinja2Templates

        from ..platforms import template_environment
        self.study = study
        self.settings = study.settings
        env = template_environment(HERE / "templates")
        # the templates do not change while the server runs: without this Jinja2 looks at each
        # template file's time on every page (a stat on the event loop, which gives up the
        # interpreter lock and waits for it again: about 0.3 ms a page under load)
        env.auto_reload = False
        for name in ("base.html", "page.html", "consent.html", "message.html", "entry.html", "switch.html",
                     "status.html", "_item.html"):
            env.get_template(name)  # compiled now, not by the first participants
        self.templates = Jinja2Templates(env=env)
        self.limiter = MovingWindow()
        self.per_participant, self.per_entry = parse(participant_rate), parse(entry_rate)
        self._items = self._render_items()
        self._options = {item_id: self.options_html({"item_id": item_id}) for item_id in self._items}
        self.db = DatabaseThreads(study.engine)

    def routes(self) -> list:
        from starlette.routing import Mount, Route
        from starlette.staticfiles import StaticFiles
        return [Route("/", self.entry, methods=["GET"]),
                Route("/switch", self.switch, methods=["POST"]),
                Route("/consent", self.consent, methods=["GET", "POST"]),
                Route("/page", self.page, methods=["GET", "POST"]),
                Route("/done", self.done, methods=["GET"]),
                Route("/status/{token}", self.status, methods=["GET"]),
                Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")]

    # -- rendering --------------------------------------------------------------------------
    def _render_items(self) -> dict:
        """Each item's query and lists as HTML, rendered once: they are the same on every page
        that shows them (only the answer controls and the page around them change)."""
        from markupsafe import Markup
        macro = self.templates.env.get_template("_item.html").module.lists
        return {it["item_id"]: Markup(macro(it)) for items in self.study.pages.values() for it in items}

    def item_html(self, item: dict):
        """The rendered query and lists of ``item`` (rendered now if the server has not seen it).

        Parameters
        ----------
        item : dict
            The item's view (:func:`satcal.platforms.item_view`).

        Returns
        -------
        markupsafe.Markup
        """
        html = self._items.get(item["item_id"])
        if html is None:
            from markupsafe import Markup
            html = Markup(self.templates.env.get_template("_item.html").module.lists(item))
        return html

    def options_html(self, item: dict, chosen: dict | None = None):
        """The answer controls of ``item`` (radio buttons named ``answer-<item id>``), those
        of a page with nothing chosen rendered once, when the server starts; ``chosen``: the
        answers a page sent back with some missing had, which stay checked.

        Parameters
        ----------
        item : dict
            The item's view; only its ``item_id`` is used.
        chosen : dict or None, optional
            ``{"answer-<item id>": code}`` of a page sent back (default None: nothing chosen).

        Returns
        -------
        markupsafe.Markup
        """
        if not chosen:
            html = getattr(self, "_options", {}).get(item["item_id"])
            if html is not None:
                return html
        from markupsafe import Markup
        macro = self.templates.env.get_template("_item.html").module.options
        return Markup(macro(item, ANSWER_LABELS, required=True, chosen=chosen or {}))

    def render(self, request, name, status=200, **context):
        """The template ``name`` as a response, with the study's title and ``context``.

        Parameters
        ----------
        request : starlette.requests.Request
            The request.
        name : str
            The template's file name.
        status : int, optional
            HTTP status (default 200).
        **context
            Template variables.
        """
        return self.templates.TemplateResponse(
            request, name, {"title": self.settings.title, "error": "", "chosen": {}, **context}, status_code=status)

    def message(self, request, status, *paragraphs, code=""):
        """The message page: ``paragraphs`` and, if given, a completion ``code``.

        Parameters
        ----------
        request : starlette.requests.Request
            The request.
        status : int
            HTTP status.
        *paragraphs : str
            The text.
        code : str, optional
            A completion code to show.
        """
        return self.render(request, "message.html", status, paragraphs=paragraphs, code=code)

    # -- who is asking ------------------------------------------------------------------------
    @staticmethod
    def participant_of(request):
        """The participant id of the request's session, or None.

        Parameters
        ----------
        request : starlette.requests.Request
            The request.

        Returns
        -------
        int or None
        """
        pid = request.session.get("pid")
        return int(pid) if isinstance(pid, int) else None

    def refused(self, request):
        """(participant id, None), or (None, the response refusing the request): no session,
        or over the rate limit.

        Parameters
        ----------
        request : starlette.requests.Request
            The request.

        Returns
        -------
        tuple
        """
        pid = self.participant_of(request)
        if pid is None:
            return None, self.message(request, 403, _NO_SESSION)
        if not self.limiter.hit(self.per_participant, "p", str(pid)):
            return None, self.message(request, 429, _TOO_MANY)
        return pid, None

    async def checked_form(self, request, pid):
        """The form of a POST, or None when its CSRF token is not this participant's.

        Parameters
        ----------
        request : starlette.requests.Request
            The POST (no files, at most 500 fields of :data:`MAX_BODY` bytes each).
        pid : int
            The session's participant id, whose token the form must carry.
        """
        form = await read_form(request)
        if not same_token(form.get("csrf", ""), self.study.csrf_token(pid)):
            return None
        return form

    # -- entry --------------------------------------------------------------------------------
    def _enter(self, kind, ident, study_id, session_id, simulated):
        """(refusal text or None, participant id, participant row): the database side of an
        entry, in one trip to a database thread."""
        study = self.study
        before = study.known(kind, ident)
        if before is not None:
            if (kind == "prolific" and before["study_id"] != study_id and before["finished_at"] is not None
                    and before["outcome"] in ("completed", "failed_attention")):
                return "done elsewhere", None, None
            return None, int(before["id"]), before
        # a newcomer: one write, and their row as written (no read after it)
        pid, created = study.register(kind, ident, study_id, session_id, simulated, look_first=False)
        # not created: entered a moment ago by a concurrent request of theirs, whose row may still
        # be in an uncommitted group (then they have not consented either)
        row = study.participant(pid) if not created else None
        return None, pid, row or {"id": pid, "kind": kind, "external_id": ident, "consented_at": None}

    async def start_as(self, request, kind, ident, study_id, session_id, simulated=False):
        """Enter as this participant (created on first entry) and go to their next step;
        ``simulated``: the simulated crowd's dry run (its entry carries the batch's simulation
        token, see :func:`satcal.serve.study.simulation_token`).

        Parameters
        ----------
        request : starlette.requests.Request
            The entry request; its session is cleared and given the participant.
        kind : str
            ``"prolific"`` or ``"lab"`` (:data:`KINDS`).
        ident : str
            The Prolific id or the participant code.
        study_id, session_id : str
            Prolific's STUDY_ID and SESSION_ID ("" for a lab participant).
        simulated : bool, default False
            The simulated crowd's dry run.
        """
        from starlette.responses import RedirectResponse
        refusal, pid, participant = await self.db.run(self._enter, kind, ident, study_id, session_id,
                                                            simulated)
        if refusal is not None:
            # one Prolific id is one participant across the study's STUDY_IDs: done is done
            return self.message(request, 200, "You have already taken part in this study (under another Prolific "
                                              "study), so there are no questions left for you here.",
                                "Please return this study on Prolific.")
        request.session.clear()
        request.session["pid"] = pid
        return RedirectResponse("/page" if participant["consented_at"] else "/consent", 303)

    async def entry(self, request):
        client = request.client.host if request.client else "-"
        if not self.limiter.hit(self.per_entry, "entry", client):
            return self.message(request, 429, _TOO_MANY)
        kind, ident, study_id, session_id, error = identity(request.query_params)
        if kind is None:
            return self.render(request, "entry.html")
        if error:
            return self.render(request, "entry.html", 400, error=error) if kind == "lab" else \
                self.message(request, 400, error)
        current = self.participant_of(request)
        running = await self.db.run(self.study.participant, current) if current is not None else None
        if (running is not None and running["finished_at"] is None
                and (running["kind"], running["external_id"]) != (kind, ident)):
            # a link (perhaps on another site) must not silently swap the participant in the
            # middle of the study for someone else: they choose, with a form only this server
            # can make (its CSRF token is the running participant's)
            return self.render(request, "switch.html", current=shown_id(running),
                               new=ident if kind == "prolific" else f"code {ident}",
                               csrf=self.study.csrf_token(current),
                               fields={KINDS[kind]: ident, "STUDY_ID": study_id, "SESSION_ID": session_id}
                               if kind == "prolific" else {KINDS[kind]: ident})
        simulated = same_token(request.query_params.get("SATCAL_SIMULATED", ""), self.study.simulation_token)
        return await self.start_as(request, kind, ident, study_id, session_id, simulated)

    async def switch(self, request):
        """The confirmed change of participant in a browser with a running session."""
        pid, refusal = self.refused(request)
        if refusal is not None:
            return refusal
        form = await self.checked_form(request, pid)
        if form is None:
            return self.message(request, 403, _EXPIRED)
        kind, ident, study_id, session_id, error = identity(form)
        if kind is None or error:
            return self.message(request, 400, error or _NO_SESSION)
        return await self.start_as(request, kind, ident, study_id, session_id)

    # -- consent and pages --------------------------------------------------------------------
    async def consent(self, request):
        from starlette.responses import RedirectResponse
        pid, refusal = self.refused(request)
        if refusal is not None:
            return refusal
        settings = self.settings
        context = dict(instructions=instruction_paragraphs(settings.instructions), pages=self.study.per_participant,
                       csrf=self.study.csrf_token(pid), consent=instruction_paragraphs(settings.consent),
                       pay=settings.pay, contact=settings.contact,
                       duration=f"{settings.duration_minutes:g}" if settings.duration_minutes else "")
        if request.method == "GET":
            return self.render(request, "consent.html", **context)
        form = await self.checked_form(request, pid)
        if form is None:
            return self.message(request, 403, _EXPIRED)
        if form.get("consent") != "yes":
            return self.render(request, "consent.html", 422, error="Please tick the box to take part.", **context)
        await self.db.run(functools.partial(self.study.consent, pid, claim_first=True))
        return RedirectResponse("/page", 303)

    def _page(self, pid, form):
        """(participant, submission outcome or None, the next page or None): the database side
        of a page request, in one trip to a database thread. The next page is only looked up
        when the response shows it (a GET, or a submission with answers missing)."""
        study = self.study
        # the participant and their assignments in one read (one snapshot), used by the
        # submission or the page shown
        participant, mine = study.participant_and_assignments(pid)
        if participant is None or participant["consented_at"] is None:
            return participant, None, None
        outcome = None
        if form is not None:
            # the next page is claimed in the same write: showing it after the redirect writes nothing
            outcome = study.submit(pid, str(form.get("assignment", "")), form, claim_next=True, mine=mine)
            if outcome != "missing":
                return participant, outcome, None
            mine = None  # read again: the page shown comes after the submission
        return participant, outcome, study.next_page(pid, mine)

    async def page(self, request):
        from starlette.responses import RedirectResponse
        pid, refusal = self.refused(request)
        if refusal is not None:
            return refusal
        form = None
        if request.method == "POST":
            form = await self.checked_form(request, pid)
            if form is None:
                # the CSRF check comes after the session's participant is known to exist
                participant = await self.db.run(self.study.participant, pid)
                if participant is not None and participant["consented_at"] is not None:
                    return self.message(request, 403, _EXPIRED)
        participant, outcome, view = await self.db.run(self._page, pid, form)
        if participant is None:
            request.session.clear()
            return self.message(request, 403, _NO_SESSION)
        if participant["consented_at"] is None:
            return RedirectResponse("/consent", 303)
        if outcome is not None and outcome != "missing":
            return RedirectResponse("/page", 303)  # stored, or already stored: move on
        error, chosen = "", {}
        if outcome == "missing":
            error = "Please answer every question on this page."
            chosen = {k: str(v) for k, v in form.items() if k.startswith("answer-")}
        if view is None:
            return RedirectResponse("/done", 303)
        return self.render(request, "page.html", 422 if error else 200, view=view, labels=ANSWER_LABELS,
                           csrf=self.study.csrf_token(pid), error=error, chosen=chosen, item_html=self.item_html,
                           options_html=self.options_html)

    # -- the end ------------------------------------------------------------------------------
    def _done(self, pid):
        """(page left or None, outcome, participant, first release): the database side of the
        end, in one trip to a database thread."""
        study = self.study
        view = study.next_page(pid)
        if view is not None:
            return view, None, None, None
        outcome = study.finish(pid)
        participant = study.participant(pid)
        at = study.first_release(pid) if outcome == WAITING else None
        return None, outcome, participant, at

    async def done(self, request):
        from starlette.responses import RedirectResponse
        pid = self.participant_of(request)
        if pid is None:
            return self.message(request, 403, _NO_SESSION)
        view, outcome, participant, at = await self.db.run(self._done, pid)
        if view is not None:
            return RedirectResponse("/page", 303)
        settings = self.settings
        if outcome == WAITING:
            at = time.time() if at is None else at
            minutes = max(1, int(-(-(at - time.time()) // 60)))
            timeout = settings.assignment_timeout_minutes
            return self.message(
                request, 200, "Every page of this study is being answered by other participants "
                              "right now, so there is none for you at this moment.",
                f"A page is given to someone else when its participant has not finished it within "
                f"{timeout:g} minutes. Please come back after {time.strftime('%H:%M', time.gmtime(at))} "
                f"UTC (in about {minutes} minute{'s' if minutes != 1 else ''}) with the same link, "
                "or reload this page then.",
                "If you came from Prolific and cannot wait, please return the study there.")
        if outcome == "full" and self.study.closed():  # an adaptive study that has the answers it needs
            return self.message(request, 200, "Thank you for your interest: this study is complete, it has "
                                              "collected the answers it needs.",
                                "If you came from Prolific, please return the study there.")
        if outcome == "full":
            return self.message(request, 200, "Thank you for your interest: every question of this study has "
                                              "been answered already.",
                                "If you came from Prolific, please return the study there.")
        # without a code of its own, a failed attention check ends like a completion: the
        # researcher decides on Prolific (the status page lists the failures)
        code = (settings.failed_attention_code if outcome == "failed_attention" else "") or settings.completion_code
        if participant["kind"] == "prolific" and code:
            return RedirectResponse(COMPLETION_URL.format(code=code), 303)
        return self.message(request, 200, "Thank you! Your answers are saved. You may close this page.", code=code)

    # -- the researcher's page and errors ----------------------------------------------------
    async def status(self, request):
        from starlette.responses import JSONResponse
        if not same_token(request.path_params["token"], self.study.status_token):
            return self.message(request, 404, "Not found.")
        progress = await self.db.run(self.study.progress)
        if request.query_params.get("format") == "json":
            return JSONResponse(progress)
        return self.render(request, "status.html", p=progress, title="Study status (researcher's page)")

    async def not_found(self, request, exc):
        return self.message(request, exc.status_code, "Not found." if exc.status_code == 404 else "Not allowed.")

    @staticmethod
    async def server_error(request, exc):
        from starlette.responses import PlainTextResponse
        # a bug, not the client's doing: never its traceback (uvicorn logs it on the server)
        return PlainTextResponse("Something went wrong on the server; please reload the page.", 500)
