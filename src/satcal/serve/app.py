"""The hosted study's web application (Starlette, served by uvicorn).

Server-rendered HTML forms that work without JavaScript; every page from a Jinja2 template with
autoescaping. The participant is known by a signed session cookie; every form carries a CSRF
token (an HMAC of the participant's id under the server's secret) besides the cookie's
SameSite=Lax. Requests are bounded in size and rate; responses carry a Content-Security-Policy
that allows no script, no framing and form submissions only to this server and Prolific.
"""
from __future__ import annotations

import hmac
from pathlib import Path

from ..platforms import ANSWER_LABELS, instruction_paragraphs
from .study import ID_PATTERN, HostedStudy

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
    from starlette.responses import JSONResponse, RedirectResponse
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
        token = str(form.get("csrf", ""))
        if not hmac.compare_digest(token, study.csrf_token(pid)):
            return None
        return form

    async def entry(request):
        q = request.query_params
        client = request.client.host if request.client else "-"
        if not limiter.hit(per_entry, "entry", client):
            return message(request, 429, "Too many requests; please wait a minute and reload.")
        if "PROLIFIC_PID" in q:
            kind, ident = "prolific", q.get("PROLIFIC_PID", "")
            study_id, session_id = q.get("STUDY_ID", ""), q.get("SESSION_ID", "")
        elif "participant" in q:
            kind, ident, study_id, session_id = "lab", q.get("participant", "").strip(), "", ""
        else:
            return render(request, "entry.html")
        for name, value in (("participant id", ident), ("study id", study_id), ("session id", session_id)):
            if (value or name == "participant id") and not ID_PATTERN.fullmatch(value):
                text = (f"That {name} is not valid: use 1 to 64 letters, digits, '_' or '-'.")
                return render(request, "entry.html", 400, error=text) if kind == "lab" else message(request, 400, text)
        pid = await run_in_threadpool(study.enter, kind, ident, study_id, session_id)
        request.session.clear()
        request.session["pid"] = pid
        participant = await run_in_threadpool(study.participant, pid)
        return RedirectResponse("/page" if participant["consented_at"] else "/consent", 303)

    async def consent(request):
        pid, refusal = refused(request)
        if refusal is not None:
            return refusal
        instructions = instruction_paragraphs(settings.instructions)
        context = dict(instructions=instructions, pages=study.per_participant, csrf=study.csrf_token(pid))
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
        if not hmac.compare_digest(request.path_params["token"], study.status_token):
            return message(request, 404, "Not found.")
        progress = await run_in_threadpool(study.progress)
        if request.query_params.get("format") == "json":
            return JSONResponse(progress)
        return render(request, "status.html", p=progress)

    async def not_found(request, exc):
        return message(request, exc.status_code, "Not found." if exc.status_code == 404 else "Not allowed.")

    routes = [Route("/", entry, methods=["GET"]),
              Route("/consent", consent, methods=["GET", "POST"]),
              Route("/page", page, methods=["GET", "POST"]),
              Route("/done", done, methods=["GET"]),
              Route("/status/{token}", status, methods=["GET"]),
              Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")]
    middleware = [Middleware(GuardMiddleware),
                  Middleware(SessionMiddleware, secret_key=study.secret, session_cookie="satcal_session",
                             max_age=14 * 24 * 3600, same_site="lax", https_only=https_only)]
    return Starlette(routes=routes, middleware=middleware, exception_handlers={404: not_found, 405: not_found})
