"""The hosted study's web application (Starlette, served by uvicorn).

Server-rendered HTML forms that work without JavaScript; every page from a Jinja2 template with
autoescaping. The participant is known by a signed session cookie; every form carries a CSRF
token (an HMAC of the participant's id under the server's secret) besides the cookie's
SameSite=Lax. Requests are bounded in size and rate; responses carry a Content-Security-Policy
that allows no script, no framing and form submissions only to this server and Prolific.

Hostile input gets a 4xx page, never a 500 or a traceback: tokens are compared as bytes, a
page token is checked for its form before it reaches the database, and redirects are relative
paths (the Router's trailing-slash redirect, built from the Host header, is off). An entry link
never replaces a running session without the participant saying so on a page of this server.
"""
from __future__ import annotations

import hmac
import time
from pathlib import Path

from ..platforms import ANSWER_LABELS, instruction_paragraphs
from .study import ID_PATTERN, WAITING, HostedStudy

__all__ = ["create_app", "COMPLETION_URL", "MAX_BODY"]

COMPLETION_URL = "https://app.prolific.com/submissions/complete?cc={code}"
#: Largest request body accepted (a page of answers is a few KiB).
MAX_BODY = 64 * 1024
#: Requests per participant (and entries per address) in a moving window.
PARTICIPANT_RATE = "120/minute"
ENTRY_RATE = "600/minute"
HERE = Path(__file__).parent
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'none'; style-src 'self'; img-src 'self' https:; "
                                 b"media-src https: http:; form-action 'self' https://app.prolific.com; "
                                 b"frame-ancestors 'none'; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]


class GuardMiddleware:
    """Pure ASGI: refuse bodies over ``MAX_BODY`` (by header and while streaming) and add the
    security headers to every response."""

    def __init__(self, app, max_body: int = MAX_BODY):
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.responses import PlainTextResponse
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            return await PlainTextResponse("request too large", 413, headers=_plain(SECURITY_HEADERS))(scope, receive, send)
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:
                raise _TooLarge
            return message

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + SECURITY_HEADERS
            await send(message)

        try:
            await self.app(scope, limited_receive, send_with_headers)
        except _TooLarge:
            await PlainTextResponse("request too large", 413)(scope, receive, send_with_headers)


class _TooLarge(Exception):
    pass


def _plain(headers):
    return {k.decode(): v.decode() for k, v in headers}


def same_token(given, expected: str) -> bool:
    """``given == expected`` in constant time, for any text a client sends: compared as UTF-8
    bytes (``hmac.compare_digest`` refuses str that is not ASCII)."""
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8"))


#: Entry parameters: (identity kind, query parameter of the id).
KINDS = {"prolific": "PROLIFIC_PID", "lab": "participant"}


def create_app(study: HostedStudy, https_only: bool = False, participant_rate: str = PARTICIPANT_RATE,
               entry_rate: str = ENTRY_RATE):
    """The ASGI application serving ``study``."""
    from limits import parse
    from limits.storage import MemoryStorage
    from limits.strategies import MovingWindowRateLimiter
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware import Middleware
    from starlette.middleware.sessions import SessionMiddleware
    from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
    from starlette.templating import Jinja2Templates

    from ..platforms import template_environment
    templates = Jinja2Templates(env=template_environment(HERE / "templates"))
    limiter = MovingWindowRateLimiter(MemoryStorage())
    per_participant, per_entry = parse(participant_rate), parse(entry_rate)
    settings = study.settings
    title = settings.title

    def render(request, name, status=200, **context):
        return templates.TemplateResponse(request, name, {"title": title, "error": "", "chosen": {}, **context}, status_code=status)

    def message(request, status, *paragraphs, code=""):
        return render(request, "message.html", status, paragraphs=paragraphs, code=code)

    def participant_of(request):
        pid = request.session.get("pid")
        return int(pid) if isinstance(pid, int) else None

    def refused(request):
        """(participant id, None), or (None, the response refusing the request): no session,
        or over the rate limit."""
        pid = participant_of(request)
        if pid is None:
            return None, message(request, 403, "Please open the study from the link you were given.")
        if not limiter.hit(per_participant, "p", str(pid)):
            return None, message(request, 429, "Too many requests; please wait a minute and reload.")
        return pid, None

    async def checked_form(request, pid):
        """The form of a POST, or None when its CSRF token is not this participant's."""
        form = await request.form(max_files=0, max_fields=500, max_part_size=MAX_BODY)
        if not same_token(form.get("csrf", ""), study.csrf_token(pid)):
            return None
        return form

    def identity(q):
        """(kind, id, study id, session id, error text) of entry parameters ``q``; kind is
        None when they name no one."""
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
        return participant["external_id"] if participant["kind"] == "prolific" else f"code {participant['external_id']}"

    async def start_as(request, kind, ident, study_id, session_id, simulated=False):
        """Enter as this participant (created on first entry) and go to their next step;
        ``simulated``: the simulated crowd's dry run (its entry carries the batch's simulation
        token, see :func:`satcal.serve.study.simulation_token`)."""
        before = await run_in_threadpool(study.known, kind, ident)
        if (before is not None and kind == "prolific" and before["study_id"] != study_id
                and before["finished_at"] is not None and before["outcome"] in ("completed", "failed_attention")):
            # one Prolific id is one participant across the study's STUDY_IDs: done is done
            return message(request, 200, "You have already taken part in this study (under another Prolific "
                                         "study), so there are no questions left for you here.",
                           "Please return this study on Prolific.")
        pid = await run_in_threadpool(study.enter, kind, ident, study_id, session_id, simulated)
        request.session.clear()
        request.session["pid"] = pid
        participant = await run_in_threadpool(study.participant, pid)
        return RedirectResponse("/page" if participant["consented_at"] else "/consent", 303)

    async def entry(request):
        client = request.client.host if request.client else "-"
        if not limiter.hit(per_entry, "entry", client):
            return message(request, 429, "Too many requests; please wait a minute and reload.")
        kind, ident, study_id, session_id, error = identity(request.query_params)
        if kind is None:
            return render(request, "entry.html")
        if error:
            return render(request, "entry.html", 400, error=error) if kind == "lab" else message(request, 400, error)
        current = participant_of(request)
        running = await run_in_threadpool(study.participant, current) if current is not None else None
        if (running is not None and running["finished_at"] is None
                and (running["kind"], running["external_id"]) != (kind, ident)):
            # a link (perhaps on another site) must not silently swap the participant in the
            # middle of the study for someone else: they choose, with a form only this server
            # can make (its CSRF token is the running participant's)
            return render(request, "switch.html", current=shown_id(running),
                          new=ident if kind == "prolific" else f"code {ident}", csrf=study.csrf_token(current),
                          fields={KINDS[kind]: ident, "STUDY_ID": study_id, "SESSION_ID": session_id}
                          if kind == "prolific" else {KINDS[kind]: ident})
        simulated = same_token(request.query_params.get("SATCAL_SIMULATED", ""), study.simulation_token)
        return await start_as(request, kind, ident, study_id, session_id, simulated)

    async def switch(request):
        """The confirmed change of participant in a browser with a running session."""
        pid, refusal = refused(request)
        if refusal is not None:
            return refusal
        form = await checked_form(request, pid)
        if form is None:
            return message(request, 403, "This form has expired; please go back and reload the page.")
        kind, ident, study_id, session_id, error = identity(form)
        if kind is None or error:
            return message(request, 400, error or "Please open the study from the link you were given.")
        return await start_as(request, kind, ident, study_id, session_id)

    async def consent(request):
        pid, refusal = refused(request)
        if refusal is not None:
            return refusal
        instructions = instruction_paragraphs(settings.instructions)
        context = dict(instructions=instructions, pages=study.per_participant, csrf=study.csrf_token(pid),
                       consent=instruction_paragraphs(settings.consent), pay=settings.pay, contact=settings.contact,
                       duration=f"{settings.duration_minutes:g}" if settings.duration_minutes else "")
        if request.method == "GET":
            return render(request, "consent.html", **context)
        form = await checked_form(request, pid)
        if form is None:
            return message(request, 403, "This form has expired; please go back and reload the page.")
        if form.get("consent") != "yes":
            return render(request, "consent.html", 422, error="Please tick the box to take part.", **context)
        await run_in_threadpool(study.consent, pid)
        return RedirectResponse("/page", 303)

    async def page(request):
        pid, refusal = refused(request)
        if refusal is not None:
            return refusal
        participant = await run_in_threadpool(study.participant, pid)
        if participant is None:
            request.session.clear()
            return message(request, 403, "Please open the study from the link you were given.")
        if participant["consented_at"] is None:
            return RedirectResponse("/consent", 303)
        error, chosen = "", {}
        if request.method == "POST":
            form = await checked_form(request, pid)
            if form is None:
                return message(request, 403, "This form has expired; please go back and reload the page.")
            outcome = await run_in_threadpool(study.submit, pid, str(form.get("assignment", "")), form)
            if outcome != "missing":
                return RedirectResponse("/page", 303)  # stored, or already stored: move on
            error = "Please answer every question on this page."
            chosen = {k: str(v) for k, v in form.items() if k.startswith("answer-")}
        view = await run_in_threadpool(study.next_page, pid)
        if view is None:
            return RedirectResponse("/done", 303)
        return render(request, "page.html", 422 if error else 200, view=view, labels=ANSWER_LABELS,
                      csrf=study.csrf_token(pid), error=error, chosen=chosen)

    async def done(request):
        pid = participant_of(request)
        if pid is None:
            return message(request, 403, "Please open the study from the link you were given.")
        view = await run_in_threadpool(study.next_page, pid)
        if view is not None:
            return RedirectResponse("/page", 303)
        outcome = await run_in_threadpool(study.finish, pid)
        participant = await run_in_threadpool(study.participant, pid)
        if outcome == WAITING:
            at = await run_in_threadpool(study.first_release, pid)
            at = time.time() if at is None else at
            minutes = max(1, int(-(-(at - time.time()) // 60)))
            timeout = settings.assignment_timeout_minutes
            return message(request, 200, "Every page of this study is being answered by other participants "
                                         "right now, so there is none for you at this moment.",
                           f"A page is given to someone else when its participant has not finished it within "
                           f"{timeout:g} minutes. Please come back after {time.strftime('%H:%M', time.gmtime(at))} "
                           f"UTC (in about {minutes} minute{'s' if minutes != 1 else ''}) with the same link, "
                           "or reload this page then.",
                           "If you came from Prolific and cannot wait, please return the study there.")
        if outcome == "full" and study.closed():  # an adaptive study that has the answers it needs
            return message(request, 200, "Thank you for your interest: this study is complete, it has "
                                         "collected the answers it needs.",
                           "If you came from Prolific, please return the study there.")
        if outcome == "full":
            return message(request, 200, "Thank you for your interest: every question of this study has "
                                         "been answered already.",
                           "If you came from Prolific, please return the study there.")
        # without a code of its own, a failed attention check ends like a completion: the
        # researcher decides on Prolific (the status page lists the failures)
        code = (settings.failed_attention_code if outcome == "failed_attention" else "") or settings.completion_code
        if participant["kind"] == "prolific" and code:
            return RedirectResponse(COMPLETION_URL.format(code=code), 303)
        return message(request, 200, "Thank you! Your answers are saved. You may close this page.", code=code)

    async def status(request):
        if not same_token(request.path_params["token"], study.status_token):
            return message(request, 404, "Not found.")
        progress = await run_in_threadpool(study.progress)
        if request.query_params.get("format") == "json":
            return JSONResponse(progress)
        return render(request, "status.html", p=progress, title="Study status (researcher's page)")

    async def not_found(request, exc):
        return message(request, exc.status_code, "Not found." if exc.status_code == 404 else "Not allowed.")

    async def server_error(request, exc):
        # a bug, not the client's doing: never its traceback (uvicorn logs it on the server)
        return PlainTextResponse("Something went wrong on the server; please reload the page.", 500)

    routes = [Route("/", entry, methods=["GET"]),
              Route("/switch", switch, methods=["POST"]),
              Route("/consent", consent, methods=["GET", "POST"]),
              Route("/page", page, methods=["GET", "POST"]),
              Route("/done", done, methods=["GET"]),
              Route("/status/{token}", status, methods=["GET"]),
              Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")]
    middleware = [Middleware(GuardMiddleware),
                  Middleware(SessionMiddleware, secret_key=study.secret, session_cookie="satcal_session",
                             max_age=14 * 24 * 3600, same_site="lax", https_only=https_only)]
    app = Starlette(debug=False, routes=routes, middleware=middleware,
                    exception_handlers={404: not_found, 405: not_found, Exception: server_error},
                    # an adaptive study refits in the background while the server runs
                    lifespan=study.order.lifespan if study.order is not None else None)
    # Starlette answers /page/ with a redirect to http://<Host header>/page: an open redirect
    # to any host a request names. Without it /page/ is a 404.
    app.router.redirect_slashes = False
    return app
