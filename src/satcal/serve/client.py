"""A participant as a browser without JavaScript: open the entry URL, fill each form, submit
it, follow redirects, until the completion redirect or the last page.

The simulated crowd (``satcal simulate DIR --serve URL``), the tests and the load benchmark
drive the server with it; it reads nothing but the HTML a participant receives.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urljoin, urlparse

__all__ = ["Form", "parse_form", "Participant", "Visit", "ServerProcess", "drive", "asked_option", "attentive"]


@dataclass
class Form:
    """The first ``<form>`` of a page: where it goes, its hidden inputs, its radio groups (with
    the text of the section each sits in) and its checkboxes.

    Attributes
    ----------
    action : str
        The form's ``action`` URL as written ("" submits to the page's own URL).
    method : str
        Its ``method``, lower case (``"get"`` unless stated).
    hidden : dict
        ``{name: value}`` of its hidden inputs.
    radios : dict
        ``{name: [value, ...]}``: each radio group's values, in page order.
    radio_labels : dict
        ``{(name, value): text}``: the text of each radio button's label.
    context : dict
        ``{name: text}``: the text of the ``<section>`` each radio group sits in.
    checkboxes : dict
        ``{name: value}`` of its checkboxes (``"on"`` for one without a value).
    """

    action: str = ""
    method: str = "get"
    hidden: dict = field(default_factory=dict)
    radios: dict = field(default_factory=dict)          # name -> [values]
    radio_labels: dict = field(default_factory=dict)    # (name, value) -> label text
    context: dict = field(default_factory=dict)         # name -> text of its <section>
    checkboxes: dict = field(default_factory=dict)      # name -> value


class _FormParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.form: Form | None = None
        self.done = False
        self.section: list[str] = []
        self.label_for: tuple | None = None
        self.label_text: list[str] = []

    def handle_starttag(self, tag, attrs):
        """Open the first form, or note a section, an input or a label of it.

        Parameters
        ----------
        tag : str
            The tag's name.
        attrs : list of tuple
            Its attributes, as (name, value).
        """
        a = dict(attrs)
        if self.done:
            return
        if tag == "form" and self.form is None:
            self.form = Form(action=a.get("action", ""), method=a.get("method", "get").lower())
        elif tag == "section":
            self.section = []
        elif tag == "input" and self.form is not None:
            kind, name, value = a.get("type", "text").lower(), a.get("name"), a.get("value", "")
            if not name:
                return
            if kind == "hidden":
                self.form.hidden[name] = value
            elif kind == "radio":
                self.form.radios.setdefault(name, []).append(value)
                self.form.context[name] = " ".join(self.section)
                self.label_for, self.label_text = (name, value), []
            elif kind == "checkbox":
                self.form.checkboxes[name] = value or "on"

    def handle_endtag(self, tag):
        """Close the form, or finish a label's text.

        Parameters
        ----------
        tag : str
            The tag's name.
        """
        if tag == "form" and self.form is not None:
            self.done = True
        elif tag == "label" and self.label_for is not None:
            self.form.radio_labels[self.label_for] = " ".join("".join(self.label_text).split())
            self.label_for = None

    def handle_data(self, data):
        """Collect text for the current section and label.

        Parameters
        ----------
        data : str
            The text.
        """
        if data.strip():
            self.section.append(" ".join(data.split()))
        if self.label_for is not None:
            self.label_text.append(data)


def parse_form(html_text: str) -> Form | None:
    """The first ``<form>`` of the page ``html_text``, or None when it has none.

    Parameters
    ----------
    html_text : str
        The page's HTML.

    Returns
    -------
    Form or None
    """
    parser = _FormParser()
    parser.feed(html_text)
    return parser.form


@dataclass
class Visit:
    """What happened to one participant: pages answered, per-request latencies by page kind,
    the answers submitted (form name -> value, by page token), and where they ended.

    Attributes
    ----------
    latencies : dict
        ``{page kind: [seconds, ...]}``: each request's latency, by the path it went to
        (``"entry"``, ``"page"``, ...; ``" (post)"`` appended for a submitted form).
    submitted : dict
        ``{assignment: {name: value}}``: the radio answers submitted on each page of items, by
        the page's ``assignment`` token.
    end_url : str
        The completion redirect that left the server; "" when the visit ended on the server.
    end_text : str
        The last page's HTML when the visit ended on the server (an error, or a page without a
        form to post).
    errors : list of str
        What went wrong: an HTTP error (``"<status> at <url>"``), ``"too many steps"`` or an
        exception; empty when nothing did.
    pages : int
        Pages of items answered (a property).
    """

    latencies: dict = field(default_factory=dict)
    submitted: dict = field(default_factory=dict)
    end_url: str = ""
    end_text: str = ""
    errors: list = field(default_factory=list)

    @property
    def pages(self) -> int:
        return len(self.submitted)


class Participant:
    """One participant's browser: a cookie jar and the forms it is given.

    ``choose(form)`` returns ``{radio name: value}`` for a page of items; by default the
    first value of each group.

    Parameters
    ----------
    base_url : str
        The server's address, e.g. ``http://127.0.0.1:8000``.
    client : httpx.Client, optional
        The HTTP client to use (its cookies are the participant's); default a new one that
        does not follow redirects.
    timeout : float, default 60
        Seconds a request of the new client may take.
    """

    def __init__(self, base_url: str, client=None, timeout: float = 60):
        import httpx
        self.base = base_url.rstrip("/") + "/"
        self.http = client or httpx.Client(timeout=timeout, follow_redirects=False)

    def _request(self, visit: Visit, kind: str, method: str, url: str, data=None):
        start = time.perf_counter()
        response = self.http.request(method, url, data=data)
        visit.latencies.setdefault(kind, []).append(time.perf_counter() - start)
        return response

    def run(self, entry_query: str, choose=None, max_steps: int = 10_000, think: float = 0.0) -> Visit:
        """Enter with ``entry_query`` (e.g. ``PROLIFIC_PID=...&STUDY_ID=...``) and go through.

        Parameters
        ----------
        entry_query : str
            The query string of the entry URL.
        choose : callable or None, optional
            ``choose(form) -> {name: value}``; None picks the first option of each group.
        max_steps : int, optional
            Requests at most (default 10,000).
        think : float, default 0
            Seconds spent on each form before submitting it (reading it; not part of any
            latency); 0 submits at once.

        Returns
        -------
        Visit
        """
        visit = Visit()
        url = urljoin(self.base, "?" + entry_query)
        method, data, kind = "GET", None, "entry"
        for _ in range(max_steps):
            response = self._request(visit, kind, method, url, data)
            while response.is_redirect:
                target = urljoin(url, response.headers["location"])
                if urlparse(target).netloc != urlparse(self.base).netloc:
                    visit.end_url = target  # the completion redirect leaves the server
                    return visit
                url, kind = target, urlparse(target).path.strip("/") or "entry"
                response = self._request(visit, kind, "GET", url)
            if response.status_code >= 400 and response.status_code != 422:
                visit.errors.append(f"{response.status_code} at {url}")
                visit.end_text = response.text
                return visit
            form = parse_form(response.text)
            if form is None or form.method != "post":
                visit.end_text = response.text
                return visit
            fields = dict(form.hidden)
            fields.update(form.checkboxes)
            if form.radios:
                answers = (choose or _first)(form)
                fields.update(answers)
                visit.submitted[form.hidden.get("assignment", "")] = answers
            url = urljoin(url, form.action or url)
            method, data = "POST", fields
            if think > 0:
                time.sleep(think)
            kind = (urlparse(url).path.strip("/") or "entry") + " (post)"
        visit.errors.append("too many steps")
        return visit


def _first(form: Form) -> dict:
    return {name: values[0] for name, values in form.radios.items()}


def asked_option(form: Form, name: str) -> str | None:
    """The option an instructional attention check asks for (the label its text names), or
    None for an ordinary item.

    Parameters
    ----------
    form : Form
        The page's form.
    name : str
        A radio group's name.

    Returns
    -------
    str or None
    """
    text = form.context.get(name, "")
    for value in form.radios[name]:
        label = form.radio_labels.get((name, value), "")
        if label and f"choose {label}" in text:
            return value
    return None


def attentive(form: Form) -> dict:
    """A participant who follows attention checks and answers every item with its first option.

    Parameters
    ----------
    form : Form
        The page's form.

    Returns
    -------
    dict
        Radio name to the value chosen.
    """
    return {name: asked_option(form, name) or values[0] for name, values in form.radios.items()}


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``satcal serve DIR`` in a child process on 127.0.0.1, for notebooks, tests and
    benchmarks: ``with ServerProcess(dir) as server: ... server.url``.

    ``kill()`` ends it with SIGKILL (as a crash would); ``start()`` runs it again.

    Parameters
    ----------
    directory : str or os.PathLike
        The study directory served.
    db_url : str, optional
        The database URL (``satcal serve --db``); default the study's own SQLite file.
    port : int, optional
        Port on 127.0.0.1; default a free one.
    workers : int, default 1
        Server processes (``satcal serve --workers``).
    startup_timeout : float, default 60
        Seconds :meth:`start` waits for the server to answer before it gives up.
    loop : str, default "auto"
        uvicorn's event loop (``satcal serve --loop``: auto, asyncio or uvloop).
    http : str, default "auto"
        uvicorn's HTTP parser (``satcal serve --http``: auto, h11 or httptools).
    """

    def __init__(self, directory, db_url: str | None = None, port: int | None = None, workers: int = 1,
                 startup_timeout: float = 60, loop: str = "auto", http: str = "auto"):
        self.directory, self.db_url, self.workers = str(directory), db_url, workers
        self.loop, self.http = loop, http
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.timeout = startup_timeout
        self.process = None
        self.output = ""

    def start(self) -> "ServerProcess":
        import subprocess
        import sys
        import tempfile

        import httpx
        cmd = [sys.executable, "-m", "satcal", "serve", self.directory, "--port", str(self.port),
               "--workers", str(self.workers), "--loop", self.loop, "--http", self.http] + (
                   ["--db", self.db_url] if self.db_url else [])
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"satcal serve exited with {self.process.returncode}: {self.log()}")
            try:
                if httpx.get(self.url + "/static/satcal.css", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"satcal serve did not answer within {self.timeout} s: {self.log()}")

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def kill(self) -> None:
        import signal
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except Exception:
                self.kill()

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def drive(url: str, participants: list[str], concurrency: int = 50, choose=None, choose_for=None,
          study_id: str = "load", progress: bool = False, simulated: str = "", think: float = 0.0) -> list[Visit]:
    """Send Prolific participants (ids ``participants``) through the study at ``url``,
    ``concurrency`` at a time, each as a browser without JavaScript. Each answers with
    ``choose`` (a form -> answers function), or with ``choose_for(participant)`` when given.
    ``simulated``: the batch's simulation token (:func:`satcal.serve.study.simulation_token`),
    which makes the server mark the participants simulated.

    Parameters
    ----------
    url : str
        Address of the running study.
    participants : list of str
        Prolific ids, one participant each.
    concurrency : int, optional
        Participants at once (default 50).
    choose : callable or None, optional
        ``choose(form) -> {name: value}``; None picks the first option of each group.
    choose_for : callable or None, optional
        ``choose_for(participant) -> choose``, which wins over ``choose``.
    study_id : str, optional
        The STUDY_ID sent (default ``"load"``).
    progress : bool, optional
        Show progress (default False).
    simulated : str, optional
        The simulation token; empty (default) sends none.
    think : float, default 0
        Seconds each participant spends on a form before submitting it (:meth:`Participant.run`);
        with it, the first ``concurrency`` participants also arrive spread over that many
        seconds instead of all at once. 0 (default): as fast as the server answers.

    Returns
    -------
    list of Visit
        In the order of ``participants``.
    """
    from concurrent.futures import ThreadPoolExecutor

    import httpx
    from tqdm.auto import tqdm
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency)
    # one TLS context for every participant: httpx makes one per client otherwise, loading the
    # CA bundle each time (19 ms of CPU holding the interpreter lock, 40% of a load test's
    # client CPU, stalling every other participant's thread and the latencies they time)
    tls = httpx.create_ssl_context()

    first = {pid: i for i, pid in enumerate(participants[:concurrency])}

    def one(pid):
        """Send the participant ``pid`` through the study; an HTTP error ends the visit with its text.

        Parameters
        ----------
        pid : str
            The Prolific id.

        Returns
        -------
        Visit
        """
        with httpx.Client(timeout=120, follow_redirects=False, limits=limits, verify=tls) as http:
            try:
                query = f"PROLIFIC_PID={pid}&STUDY_ID={study_id}&SESSION_ID={pid}"
                query += f"&SATCAL_SIMULATED={simulated}" if simulated else ""
                if think > 0 and pid in first:
                    time.sleep(think * first[pid] / concurrency)
                return Participant(url, http).run(query, choose_for(pid) if choose_for else choose,
                                                  think=think)
            except httpx.HTTPError as exc:
                visit = Visit()
                visit.errors.append(f"{type(exc).__name__}: {exc}")
                return visit

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(tqdm(pool.map(one, participants), total=len(participants), disable=not progress,
                         desc="participants", unit="participant"))
