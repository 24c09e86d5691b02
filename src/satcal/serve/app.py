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

from .routes import COMPLETION_URL, ENTRY_RATE, MAX_BODY, PARTICIPANT_RATE, StudyRoutes, same_token
from .study import HostedStudy

__all__ = ["create_app", "COMPLETION_URL", "MAX_BODY", "same_token"]

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
    security headers to every response.

    Parameters
    ----------
    app : ASGI application
        The application wrapped.
    max_body : int, default :data:`MAX_BODY`
        Largest request body accepted, in bytes; a larger one gets 413.
    """

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
    """The ASGI application serving ``study``: its routes (:class:`~satcal.serve.routes.StudyRoutes`)
    behind the size guard and the signed-cookie session.

    Parameters
    ----------
    study : satcal.serve.HostedStudy
        The hosted study.
    https_only : bool, optional
        Send the session cookie over HTTPS only (default False).
    participant_rate : str, optional
        Requests a participant may make, as a ``limits`` rate (default ``"120/minute"``).
    entry_rate : str, optional
        Entries one client address may make, as a ``limits`` rate (default ``"600/minute"``).

    Returns
    -------
    starlette.applications.Starlette
    """
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.sessions import SessionMiddleware

    pages = StudyRoutes(study, participant_rate, entry_rate)
    middleware = [Middleware(GuardMiddleware),
                  Middleware(SessionMiddleware, secret_key=study.secret, session_cookie="satcal_session",
                             max_age=14 * 24 * 3600, same_site="lax", https_only=https_only)]
    app = Starlette(debug=False, routes=pages.routes(), middleware=middleware,
                    exception_handlers={404: pages.not_found, 405: pages.not_found, Exception: pages.server_error},
                    # an adaptive study refits in the background while the server runs
                    lifespan=study.order.lifespan if study.order is not None else None)
    # Starlette answers /page/ with a redirect to http://<Host header>/page: an open redirect
    # to any host a request names. Without it /page/ is a 404.
    app.router.redirect_slashes = False
    return app
