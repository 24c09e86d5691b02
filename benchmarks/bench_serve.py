"""Load benchmark of ``satcal serve`` (issue 10), printed in one run; figures go to
docs/benchmarks.md.

200 simulated participants (Prolific entries), 50 at a time, each through consent and three
pages of ten items as a browser without JavaScript (every request a real HTTP request to a
real server process), against SQLite (one server process) and PostgreSQL (two processes
sharing the database; Debian's postgresql, started privately as the tests do). Printed per
page kind: requests, p50 and p95 latency; errors; and whether the stored answers equal the
submitted ones (none lost, none doubled); and a page submission together with the page it
redirects to (``submit + next``: what a participant waits for between two pages). The first peer is the same server's static stylesheet,
fetched under the same load by the same client (httpx; by default a thread of the process
whose threads are the participants), one fetch starting at most every ``--static-every``
seconds (default 0.02: a probe, whose own requests are a small part of the load; 0 fetches one
after another, which at ``--think 1`` made most of the server's requests): the ratio says what a page costs above
serving a file. The server's CPU (Linux, /proc) from before the static peers start to after they stop is printed per request it answered in that span: the participants', the static file's and the static file's on a new connection (:func:`cpu_requests`). A page submission is stored on disk
before it is answered, a file is not: the second peer is a row stored durably (SQLite, WAL,
``synchronous=FULL``) by a minimal uvicorn + Starlette server of its own process, fetched the
same way (:func:`durable_peer`), so the second ratio says what a page costs above the fsync
any durable answer pays on this machine. A participant's entry is its first request, on a
connection of its own, where the first peer reuses one: the third peer is the stylesheet fetched
on a new connection each time, by a client made as ``drive`` makes a participant's (at most
every ``--fresh-every`` seconds, default 0.1), the entry's like-for-like peer. Each request of
the participants and of the two file peers is split by httpcore's trace into the TCP connect,
the server's time to the response's headers, the body and the client's own time
(:func:`split`), so where the tail goes is printed rather than guessed.
A client of one process measures its own interpreter lock as well: the faster the server
answers the participants, the longer the peer's thread waits for the lock, so the ratio falls
without the pages getting faster. ``--client-processes K`` spreads the participants over K
processes and gives the peer a process of its own. ``--think S`` has each participant spend S seconds on a form before submitting it (the first
50 arriving over S seconds): without it the 50 participants submit as fast as the server
answers, a closed loop that keeps the server saturated, where a page's latency is mostly its
wait in the server's queue (Little's law: 50 / throughput) and the ratio to a file that skips
that queue says where the queue is rather than how fast a page is. On a shared
machine one run says little, so SQLite runs ``--runs`` times (a fresh database each time), and
the ratios of each run and their median are printed with the load average. ``--stacks`` names
uvicorn's event loop and HTTP parser (``satcal serve --loop --http``), the same for the server
measured and its peers (the static files are that server's; the durable peer runs on them too),
so every ratio is like for like; several alternate run by run (default auto: uvloop and
httptools when installed, the ``serve`` extra, else asyncio and h11).

    python benchmarks/bench_serve.py [--participants 200] [--concurrency 50] [--runs 5] [--client-processes 4]
                                     [--think 0 1] [--static-every 0.02] [--no-postgres]
                                     [--stacks asyncio/h11 uvloop/httptools]
    python benchmarks/bench_serve.py --adaptive [--refit-seconds 5] [--runs 3] [--against SRC] [--json PATH]

With ``--adaptive`` the same load runs twice on SQLite, on a fixed study and on an adaptive one
(``[design] adaptive = true``: a candidate pool of as many examples as the fixed study's, pages
handed out by the criterion's priorities, refitted in the server's background thread every
``--refit-seconds``, the stopping rule asked at each look), and the ratio of their page
latencies says what the refits add; with ``--runs R`` the two alternate in R blocks (the order
rotated block by block) and the median of the blocks' ratios is printed with the sign test's
95% interval for it; ``--against SRC`` adds the adaptive study served by another copy of satcal
(``SRC``, e.g. main's ``src``) to every block, so a change to the refit meets its base under the
same load.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


def make_workspace(root: Path, answers_per_example: int, pages_per_participant: int, adaptive: dict | None = None):
    import satcal
    from satcal.workspace import Workspace
    root.mkdir(parents=True, exist_ok=True)
    qrels = root / "qrels.tsv"
    satcal.load_ecir2015().judgments.table.to_csv(qrels, sep="\t", index=False)
    ws = Workspace.init(root / "study", qrels, platform="serve")
    text = (ws.path / "study.toml").read_text()
    text = re.sub(r"(?m)^answers_per_example = .*$", f"answers_per_example = {answers_per_example}", text)
    text = re.sub(r"(?m)^pages_per_participant = .*$", f"pages_per_participant = {pages_per_participant}", text)
    text = text.replace('completion_code = ""', 'completion_code = "BENCH1"')
    for name, value in (adaptive or {}).items():
        text = re.sub(rf"(?m)^{name} = .*$", f"{name} = {value}", text)
    (ws.path / "study.toml").write_text(text)
    ws = Workspace.open(ws.path)
    ws.generate()
    ws.export()
    return ws


#: Least seconds from the start of one fetch of the static file (the first peer) to the next:
#: a probe of at most 50 requests a second. Unpaced (0), its loop was most of what the server
#: did at ``--think 1`` (7,234-9,630 of 9,400-11,800 requests a run, about 3/4 of the server's
#: CPU), so the pages measured queued behind the peer's own load rather than the
#: participants'; without think time a fetch takes longer than this, and the peer runs
#: unpaced as before.
STATIC_EVERY = 0.02


def honest(form):
    from satcal.serve.client import asked_option
    rng = np.random.default_rng(abs(hash(form.hidden.get("assignment", ""))) % 2 ** 32)
    return {name: asked_option(form, name) or str(rng.choice(values)) for name, values in form.radios.items()}


def static_latencies(url: str, stop: threading.Event, every: float = STATIC_EVERY,
                     parts: list | None = None) -> list[float]:
    """The peer: the stylesheet, fetched in a loop while the participants run, one fetch
    starting at most every ``every`` seconds (a fetch slower than that is followed at once by
    the next; 0: always at once, unpaced)."""
    import httpx
    out = []
    with httpx.Client() as http:
        start = time.perf_counter()
        while not stop.wait(max(0.0, start + every - time.perf_counter())):
            start = time.perf_counter()
            times: dict = {}
            http.get(url + "/static/satcal.css", extensions={"trace": trace_into(times)})
            out.append(time.perf_counter() - start)
            if parts is not None:
                parts.append(split(times, start, start + out[-1]))
    return out


#: Least seconds from one fetch of the static file on a new connection (the entry's like-for-like
#: peer) to the next: 10 connections a second, a probe beside the ~200 entries of a run.
FRESH_EVERY = 0.1


def trace_into(times: dict):
    """An httpcore trace callback (``extensions={"trace": ...}``) recording when each step of one
    request starts and completes, by perf_counter, into ``times``."""
    def trace(event, info):
        times[event] = time.perf_counter()
    return trace


def split(times: dict, start: float, end: float) -> tuple[float, float, float, float]:
    """One request's seconds (connect, server, body, client) from its trace ``times``: connect
    is the TCP handshake (``connect_tcp``; 0 on a reused connection), which the kernel completes
    before the server's accept loop sees the connection; server is from the first byte of the
    request written to the response's headers read (the accept loop, h11's new connection, the
    handler and loopback); body is from the headers read to the body read (the server's later
    sends, e.g. a file's chunks read on its thread pool, and the client's reading); client is
    the rest, the client's own time (building the request, the pool, waiting for the
    interpreter lock)."""
    connect = times.get("connection.connect_tcp.complete", 0.0) - times.get("connection.connect_tcp.started", 0.0)
    headers = times.get("http11.receive_response_headers.complete", end)
    server = headers - times.get("http11.send_request_headers.started", start)
    body = times.get("http11.receive_response_body.complete", headers) - headers
    return connect, server, body, (end - start) - connect - server - body


PARTS = ("connect", "server", "body", "client")


def traced_request(self, visit, kind: str, method: str, url: str, data=None):
    """``Participant._request`` timing the same span, with each request's connect / server / body / client
    split (:func:`split`) kept as the kinds ``kind + " connect"`` and so on (:data:`PARTS`)."""
    times: dict = {}
    start = time.perf_counter()
    response = self.http.request(method, url, data=data, extensions={"trace": trace_into(times)})
    end = time.perf_counter()
    visit.latencies.setdefault(kind, []).append(end - start)
    for part, value in zip(PARTS, split(times, start, end)):
        visit.latencies.setdefault(f"{kind} {part}", []).append(value)
    return response


def fresh_static_latencies(url: str, stop: threading.Event, every: float = FRESH_EVERY) -> tuple[list, list]:
    """The entry's like-for-like peer: the stylesheet, each fetch on a new connection of a new
    client made as ``drive`` makes a participant's (httpx, one shared TLS context, the same
    limits and timeout), the client made before the clock starts, as the participant's is
    before its entry; one fetch starting at most every ``every`` seconds. Returns the latencies
    and each fetch's (connect, server, body, client) split."""
    import httpx
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=50)
    tls = httpx.create_ssl_context()
    out, parts = [], []
    start = time.perf_counter()
    while not stop.wait(max(0.0, start + every - time.perf_counter())):
        with httpx.Client(timeout=120, follow_redirects=False, limits=limits, verify=tls) as http:
            times: dict = {}
            start = time.perf_counter()
            http.get(url + "/static/satcal.css", extensions={"trace": trace_into(times)})
            end = time.perf_counter()
        out.append(end - start)
        parts.append(split(times, start, end))
    return out, parts


def durable_peer(port: int, path: str, loop: str = "auto", http: str = "auto") -> None:
    """The second peer's server: uvicorn and Starlette as ``satcal serve`` runs them, one route
    that stores a row in SQLite (WAL, ``synchronous=FULL``: one fsync a commit, as the study
    database) and answers once it is committed. What any durable answer costs on this machine,
    with none of satcal's work."""
    import sqlite3

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, at REAL NOT NULL)")
    lock = threading.Lock()

    def store(request):  # a sync endpoint: Starlette runs it on its threads, as a file's read
        with lock:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (at) VALUES (?)", (time.time(),))
            conn.execute("COMMIT")
        return PlainTextResponse("stored")

    uvicorn.run(Starlette(routes=[Route("/store", store, methods=["POST"])]), host="127.0.0.1", port=port,
                log_level="warning", loop=loop, http=http)


def durable_latencies(url: str, stop: threading.Event) -> list[float]:
    """The second peer: a row stored durably by a minimal server (:func:`durable_peer`), every
    20 ms (unpaced, a loop of them took a core and the disk from the server measured)."""
    import httpx
    out = []
    with httpx.Client() as http:
        while not stop.wait(0.02):
            start = time.perf_counter()
            http.post(url + "/store")
            out.append(time.perf_counter() - start)
    return out


class DurablePeer:
    """:func:`durable_peer` in a process of its own, for the length of a ``with``."""

    def __init__(self, directory: Path, loop: str = "auto", http: str = "auto"):
        from satcal.serve.client import free_port
        self.loop, self.http = loop, http
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.path = directory / "durable-peer.db"

    def __enter__(self):
        import subprocess

        import httpx
        for suffix in ("", "-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)
        self.process = subprocess.Popen([sys.executable, __file__, "--durable-peer", str(self.port), str(self.path),
                                         self.loop, self.http])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.post(self.url + "/store", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("the durable peer did not start")

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait(timeout=20)


def _peer_process(url: str, stop, out, every: float = STATIC_EVERY) -> None:
    """The peer in a process of its own (no interpreter lock shared with the participants)."""
    out.send(static_latencies(url, stop, every))


def _drive_part(job):
    from satcal.serve.client import drive
    url, ids, concurrency, think = job
    return drive(url, ids, concurrency=concurrency, choose=honest, think=think)


def drive_in_processes(url: str, ids: list, concurrency: int, processes: int, think: float = 0.0) -> list:
    """``drive`` with the participants spread over ``processes`` client processes (their
    visits in the order of ``ids``)."""
    import multiprocessing
    if processes <= 1:
        from satcal.serve.client import drive
        return drive(url, ids, concurrency=concurrency, choose=honest, think=think)
    parts = [ids[i::processes] for i in range(processes)]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        results = pool.map(_drive_part, [(url, part, max(1, concurrency // processes), think) for part in parts])
    visits = [None] * len(ids)
    for i, part in enumerate(results):
        visits[i::processes] = part
    return visits


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) process ``pid`` and its running children (the server
    processes of ``--workers N``) have used so far, from /proc (Linux); None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        children = [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
                    for c in (task / "children").read_text().split()]
    except OSError:
        return None
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own + sum(process_cpu(c) or 0.0 for c in children)


def children_cpu(pid: int) -> float | None:
    """CPU seconds the running children of process ``pid`` (and theirs) have used so far: on an
    adaptive study with one server process, its refit process (and multiprocessing's resource
    tracker, which idles); None off Linux."""
    total = process_cpu(pid)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if total is None else total - (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_refit(ws, server, db_url=None, timeout: float = 300.0) -> None:
    """On an adaptive study, wait until the server's refit process has made a refit on the
    answers stored so far and its CPU has stopped rising (under 0.05 s in a second): the cold
    start (the process's imports, the first multi-start fits) is then behind it, as in a study
    under way. A fixed study returns at once."""
    start = time.monotonic()
    if refits_made(ws, server.url, db_url) is None:
        return
    while refits_made(ws, server.url, db_url) < 1 and time.monotonic() - start < timeout:
        time.sleep(0.5)
    last = children_cpu(server.process.pid)
    while last is not None and time.monotonic() - start < timeout:
        time.sleep(1.0)
        now = children_cpu(server.process.pid)
        if now is None or now - last < 0.05:
            return
        last = now


def refits_made(ws, url: str, db_url=None) -> int | None:
    """Refits the server's adaptive page order has made so far (the researcher's status page,
    ``adaptive.refits``); None on a fixed study."""
    import httpx
    from sqlalchemy import select
    from satcal.serve import db
    engine = db.connect(db_url or db.default_url(ws.path))
    with engine.connect() as conn:
        meta = db.tables()["meta"]
        token = conn.execute(select(meta.c.value).where(meta.c.name == "status_token")).scalar()
    engine.dispose()
    got = httpx.get(f"{url}/status/{token}", params={"format": "json"}, timeout=60).json()
    return got["adaptive"]["refits"] if "adaptive" in got else None


def cpu_requests(participants: int, peer: list, fresh: list) -> int:
    """The requests the study server answered in a run, the denominator of its CPU a request:
    the participants' ``participants``, the static file's on a reused connection (``peer``, one
    latency each) and on a new connection (``fresh``, ``[latencies, splits]``, empty when that
    peer did not run). The durable write's requests go to a server of their own, not counted."""
    return int(participants) + len(peer) + (len(fresh[0]) if fresh else 0)


@contextlib.contextmanager
def client_collector(mode: str):
    """The client's cyclic garbage collector while the participants run: "paused" (default) or
    "on". The client is one Python process of 50 participant threads and the peers' threads,
    whose full collections took 90-135 ms each (two or three a run): every thread stopped at
    once, and the think timers that ran out meanwhile then fired together, a burst in the
    server's queue that a real participant's browser, a process of its own, never makes. The
    server's own collector is untouched. Forked client processes inherit the setting."""
    paused = mode == "paused" and gc.isenabled()
    if paused:
        gc.collect()
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def run(ws, label: str, participants: int, concurrency: int, db_url=None, workers=1, ratios=None,
        client_processes: int = 1, think: float = 0.0, static_every: float = STATIC_EVERY,
        fresh_every: float = FRESH_EVERY, stack: tuple[str, str] = ("auto", "auto"), client_gc: str = "paused",
        warm_up: int = 0):
    from satcal.serve import db
    from satcal.study.hosting import server_stack
    from satcal.serve.client import ServerProcess
    ids = [f"{label[:2].upper()}{i:04d}" for i in range(participants)]
    if db_url is None:  # a fresh database: every run meets the same free slots
        for suffix in ("", "-wal", "-shm"):
            Path(str(ws.path / "serve.db") + suffix).unlink(missing_ok=True)
    load = os.getloadavg()
    durable: list[float] = []
    loop, http = server_stack(*stack)  # the server, its static file and the durable peer all on these
    with ServerProcess(ws.path, db_url, workers=workers, loop=loop, http=http) as server, \
            DurablePeer(ws.path.parent, loop, http) as second:
        if warm_up:   # a study already under way: answers stored, its refit process started and warm
            drive_in_processes(server.url, [f"WU{i:04d}" for i in range(warm_up)], concurrency, 1, think)
            wait_for_refit(ws, server, db_url)
            load = os.getloadavg()
        second_stop = threading.Event()
        second_side = threading.Thread(target=lambda: durable.extend(durable_latencies(second.url, second_stop)))
        second_side.start()
        peer: list[float] = []
        peer_parts: list | None = None if client_processes > 1 else []
        fresh: list = []
        fresh_stop = threading.Event()
        fresh_side = threading.Thread(target=lambda: fresh.extend(fresh_static_latencies(server.url, fresh_stop,
                                                                                         fresh_every)))
        if client_processes > 1:
            import multiprocessing
            ctx = multiprocessing.get_context("fork")
            stop, (receive, send) = ctx.Event(), ctx.Pipe(duplex=False)
            side = ctx.Process(target=_peer_process, args=(server.url, stop, send, static_every))
        else:
            stop = threading.Event()
            side = threading.Thread(target=lambda: peer.extend(static_latencies(server.url, stop, static_every,
                                                                                peer_parts)))
        # the server's CPU from before the two static peers start to after they stop: every
        # request it answers in that span is counted below, the participants' and the peers'
        cpu_before = process_cpu(server.process.pid)
        refit_before = children_cpu(server.process.pid), refits_made(ws, server.url, db_url)
        side.start()
        if fresh_every > 0:
            fresh_side.start()
        start = time.perf_counter()
        with client_collector(client_gc):
            visits = drive_in_processes(server.url, ids, concurrency, client_processes, think)
        wall = time.perf_counter() - start
        stop.set()
        second_stop.set()
        fresh_stop.set()
        if client_processes > 1:
            peer = receive.recv()
        side.join()
        if fresh_every > 0:
            fresh_side.join()
        cpu_after = process_cpu(server.process.pid)
        refit_after = children_cpu(server.process.pid), refits_made(ws, server.url, db_url)
        second_side.join()
    # what the server said it ran on (its banner, flushed once it stopped), not what was asked
    said = next((line.strip().removeprefix("server: ") for line in server.log().splitlines()
                 if "server: uvicorn" in line), "the server did not say")
    engine = db.connect(db_url or db.default_url(ws.path))
    stored = db.snapshot(engine)
    engine.dispose()
    stored = stored[stored["worker_id"].isin(ids)]
    sent = pd.DataFrame([(pid, n.removeprefix("answer-"), v) for pid, v_ in zip(ids, visits)
                         for page in v_.submitted.values() for n, v in page.items()],
                        columns=["worker_id", "item_id", "answer"])
    merged = sent.merge(stored[["worker_id", "item_id", "answer"]], how="outer", indicator=True,
                        on=["worker_id", "item_id"], suffixes=("_sent", "_stored"))
    lost = int((merged["_merge"] == "left_only").sum())
    invented = int((merged["_merge"] == "right_only").sum())
    changed = int(((merged["_merge"] == "both") & (merged["answer_sent"] != merged["answer_stored"])).sum())
    doubled = int(stored.duplicated(["worker_id", "item_id"]).sum())
    errors = [e for v in visits for e in v.errors]
    completed = sum(v.end_url.endswith("cc=BENCH1") for v in visits)
    print(f"\n== {label}: {participants} participants, {concurrency} at a time, {workers} server "
          f"process(es), {client_processes} client process(es), {think:g} s on each form, the static file "
          f"{'at most every %g s' % static_every if static_every > 0 else 'unpaced'}; {said}; wall {wall:.1f} s; {completed} reached the completion redirect; load average "
          f"{load[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    kinds: dict[str, list[float]] = {}
    for v in visits:
        for kind, values in v.latencies.items():
            kinds.setdefault(kind, []).extend(values)
    requests = sum(len(values) for kind, values in kinds.items()
                   if not kind.endswith(tuple(" " + part for part in PARTS)))
    if cpu_before is not None and cpu_after is not None:
        # every request the server answered: the participants', the static file's on a reused
        # connection and on a new one (the durable write is another server's)
        served = cpu_requests(requests, peer, fresh)
        cpu_ms = 1000 * (cpu_after - cpu_before) / served
        print(f"server CPU {cpu_after - cpu_before:.2f} s over {served} requests ({requests} participants', "
              f"{len(peer)} static files, {len(fresh[0]) if fresh else 0} on a new connection): "
              f"{cpu_ms:.2f} ms a request")
        if ratios is not None:
            ratios.setdefault("cpu", []).append(cpu_ms)
        if None not in (refit_before[0], refit_after[0]) and workers == 1:
            # the server process's own, without its children (the refit process: below)
            own = cpu_after - cpu_before - (refit_after[0] - refit_before[0])
            print(f"server process alone (no children): {own:.2f} s, {1000 * own / served:.2f} ms a request")
            if ratios is not None:
                ratios.setdefault("own cpu", []).append(1000 * own / served)
    if None not in refit_before + refit_after and workers == 1:
        # the server's child processes: its refit process (and the idle resource tracker)
        spent, made = refit_after[0] - refit_before[0], refit_after[1] - refit_before[1]
        print(f"refit process CPU {spent:.2f} s over {made} refits in the same span"
              + (f": {spent / made:.2f} s a refit" if made else ""))
        if ratios is not None:
            ratios.setdefault("refit", []).append((spent, made))
    print(f"{'page':<14} {'requests':>8} {'p50 ms':>8} {'p95 ms':>8}")
    for kind in ("entry", "consent", "consent (post)", "page", "page (post)", "done"):
        values = np.array(kinds.get(kind, [])) * 1000
        if values.size:
            print(f"{kind:<14} {values.size:>8} {np.percentile(values, 50):>8.1f} {np.percentile(values, 95):>8.1f}")
    # what a participant waits for between pages: the submission and the next page it redirects to
    turns = np.array([po + ge for v in visits for po, ge in zip(v.latencies.get("page (post)", []),
                                                                  v.latencies.get("page", [])[1:])]) * 1000
    if turns.size:
        print(f"{'submit + next':<14} {turns.size:>8} {np.percentile(turns, 50):>8.1f} {np.percentile(turns, 95):>8.1f}")
    peer_ms = np.array(peer) * 1000
    print(f"{'static (peer)':<14} {peer_ms.size:>8} {np.percentile(peer_ms, 50):>8.1f} {np.percentile(peer_ms, 95):>8.1f}")
    fresh_ms = np.array(fresh[0] if fresh else [np.nan]) * 1000
    print(f"{'static, new connection (entry peer)':<14} {len(fresh[0]) if fresh else 0:>8} "
          f"{np.percentile(fresh_ms, 50):>8.1f} {np.percentile(fresh_ms, 95):>8.1f}")
    durable_ms = np.array(durable) * 1000
    print(f"{'durable write (second peer)':<14} {durable_ms.size:>8} {np.percentile(durable_ms, 50):>8.1f} "
          f"{np.percentile(durable_ms, 95):>8.1f}")
    for kind in ("entry", "page (post)"):
        ms = np.array(kinds[kind]) * 1000
        p50, p95 = np.percentile(ms, 50) / np.percentile(peer_ms, 50), np.percentile(ms, 95) / np.percentile(peer_ms, 95)
        d50 = np.percentile(ms, 50) / np.percentile(durable_ms, 50)
        d95 = np.percentile(ms, 95) / np.percentile(durable_ms, 95)
        f50, f95 = np.percentile(ms, 50) / np.percentile(fresh_ms, 50), np.percentile(ms, 95) / np.percentile(fresh_ms, 95)
        print(f"{kind} / static file: p50 {p50:.2f}x, p95 {p95:.2f}x (goal p95 <= 1.5x); "
              f"/ static file on a new connection: p50 {f50:.2f}x, p95 {f95:.2f}x; "
              f"/ durable write: p50 {d50:.2f}x, p95 {d95:.2f}x")
        if ratios is not None:
            ratios.setdefault(kind, []).append((p50, p95))
            ratios.setdefault(kind + " fresh", []).append((f50, f95))
            ratios.setdefault(kind + " durable", []).append((d50, d95))
    # where each side's time goes (:func:`split`): p95 of each part, and the parts' medians over
    # the slowest 5% of the requests
    sides = {kind: np.column_stack([kinds[kind]] + [kinds[f"{kind} {part}"] for part in PARTS])
             for kind in ("entry", "page (post)") if f"{kind} connect" in kinds}
    if peer_parts:
        sides["static"] = np.column_stack([peer, np.array(peer_parts)])
    if fresh and fresh[1]:
        sides["static, new conn"] = np.column_stack([fresh[0], np.array(fresh[1])])
    print(f"{'split (ms)':<17} {'p95 all':>8} {'connect':>8} {'server':>8} {'body':>8} {'client':>8}   "
          f"slowest 5%, medians: connect server body client")
    for kind, a in sides.items():
        a = a * 1000
        tail = a[a[:, 0] >= np.percentile(a[:, 0], 95)]
        p = np.percentile(a, 95, axis=0)
        m = np.median(tail, axis=0)
        print(f"{kind:<17} {p[0]:>8.1f} {p[1]:>8.2f} {p[2]:>8.1f} {p[3]:>8.1f} {p[4]:>8.1f}   "
              f"{m[1]:.2f} {m[2]:.1f} {m[3]:.1f} {m[4]:.1f}")
        if ratios is not None:
            ratios.setdefault("split " + kind, []).append(tuple(p) + tuple(m[1:]))
    if ratios is not None:
        ratios.setdefault("load", []).append((load[0], os.getloadavg()[0]))
    print(f"errors: {len(errors)}{' (first: ' + errors[0] + ')' if errors else ''}")
    print(f"answers submitted {len(sent)}, stored {len(stored)}: lost {lost}, doubled {doubled}, "
          f"changed {changed}, invented {invented}")
    if not (errors or lost or doubled or changed or invented):
        return {**{kind: np.array(values) * 1000 for kind, values in kinds.items()},
                "submit + next": turns, "static": peer_ms}
    return None


def median_interval(values, level: float = 0.95) -> tuple[float, float, float, float]:
    """The median of ``values`` and a distribution-free interval for the population median (the
    sign test's: order statistics k and n + 1 - k with k the largest whose two-sided binomial
    tail, P(Bin(n, 1/2) < k) x 2, is at most 1 - level), and that interval's exact coverage;
    (median, nan, nan, nan) when n is too small for the level."""
    from math import comb
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    tail = lambda k: sum(comb(n, i) for i in range(k)) / 2 ** n   # P(Bin(n, 1/2) <= k - 1)
    k = max((k for k in range(1, n // 2 + 1) if 2 * tail(k) <= 1 - level), default=None)
    if k is None:
        return float(np.median(x)), float("nan"), float("nan"), float("nan")
    return float(np.median(x)), float(x[k - 1]), float(x[n - k]), 1 - 2 * tail(k)


class _ServerPath:
    """``PYTHONPATH`` of the servers started inside the ``with`` (``satcal serve`` inherits the
    environment, its refit process too): ``path`` first, so they run that copy of satcal."""

    def __init__(self, path: str | None):
        self.path, self.old = path, None

    def __enter__(self):
        if self.path:
            self.old = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = self.path
        return self

    def __exit__(self, *exc):
        if self.path:
            if self.old is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = self.old


def block_summary(records: list) -> None:
    """:func:`adaptive_comparison`'s summary of its runs' figures (``records``, as ``--json``
    keeps them; whole blocks only): the blocks' ratios to the fixed study's (and of the adaptive
    arm to the ``against`` arm's), their median with the sign test's interval, each arm's medians,
    the server's CPU a request and the refit process's CPU, and the load."""
    names = list(dict.fromkeys(r["arm"] for r in records))
    against = "adaptive, against" in names
    by_block: dict = {}
    for r in records:
        by_block.setdefault(r["block"], {})[r["arm"]] = r
    blocks = [b for b in by_block.values() if len(b) == len(names)]
    records = [r for b in blocks for r in b.values()]
    runs = len(blocks)
    kinds = ("page", "page (post)", "submit + next", "entry", "static")
    comparisons = [(arm, "fixed") for arm in names[1:]] + ([("adaptive", "adaptive, against")] if against else [])
    for top, bottom in comparisons:
        print(f"\n{top} / {bottom}, {runs} blocks: median of the blocks' ratios [sign-test 95% interval "
              f"(its exact coverage)], blocks above 1")
        for kind in kinds:
            for q in (50, 95):
                r = [b[top][f"{kind} p{q}"] / b[bottom][f"{kind} p{q}"] for b in blocks]
                m, lo, hi, cover = median_interval(r)
                print(f"  {kind + ' p' + str(q):<18} {m:.3f}x [{lo:.3f}, {hi:.3f}] ({cover:.3f}), "
                      f"{sum(x > 1 for x in r)} of {len(r)} above 1")
    print(f"\n{'arm':<18} {'page p50':>8} {'p95':>7} {'post p50':>8} {'p95':>7} {'server CPU a request, ms':>25} "
          f"{'refit CPU s (refits)':>22}")
    for arm in names:
        rows = [r for r in records if r["arm"] == arm]
        cpu = [r["cpu_ms"] for r in rows if r["cpu_ms"] is not None]
        spent = [r["refit_cpu_s"] for r in rows if r["refit_cpu_s"] is not None]
        made = [r["refits"] for r in rows if r["refits"] is not None]
        print(f"{arm:<18} {np.median([r['page p50'] for r in rows]):>8.1f} {np.median([r['page p95'] for r in rows]):>7.1f} "
              f"{np.median([r['page (post) p50'] for r in rows]):>8.1f} {np.median([r['page (post) p95'] for r in rows]):>7.1f} "
              f"{'median %.3f (%.3f-%.3f)' % (np.median(cpu), min(cpu), max(cpu)) if cpu else '':>25} "
              f"{'%.1f a run (%d)' % (np.median(spent), sum(made)) if spent else '':>22}")
    for arm in names:
        own = [r.get("own_cpu_ms") for r in records if r["arm"] == arm and r.get("own_cpu_ms") is not None]
        if own:
            print(f"{arm}: the server process alone (its children, the refit process, left out): median "
                  f"{np.median(own):.3f} ms a request ({min(own):.3f}-{max(own):.3f})")
    for key, what in (("cpu_ms", "server CPU a request, with its children"), ("own_cpu_ms", "the server process alone")):
        for top in names[1:]:
            r = [b[top][key] / b["fixed"][key] for b in blocks if b[top].get(key) and b["fixed"].get(key)]
            if r:
                m, lo, hi, cover = median_interval(r)
                print(f"{what}, {top} / fixed: median {m:.3f}x [{lo:.3f}, {hi:.3f}] ({cover:.3f})")
    loads = [r["load"] for r in records]
    print(f"load average (1 min) at the runs' starts and ends: {min(min(x) for x in loads):.1f}-"
          f"{max(max(x) for x in loads):.1f}, median {np.median([x for l in loads for x in l]):.1f}")


def adaptive_comparison(tmp: Path, participants: int, concurrency: int, refit_seconds: float, runs: int = 1,
                        think: float = 0.0, against: str | None = None, json_out: str | None = None,
                        warm_up: int = 0) -> bool:
    """The same load on a fixed study and on an adaptive one of the same size, ``runs`` blocks
    (a fresh database each run), each participant spending ``think`` seconds on a form (the first
    of ``--think``). With ``against`` (a copy of satcal's ``src``), a third arm: the adaptive
    study served by that code, e.g. main's, so a change to the refit is measured against its
    base in the same blocks. Within a block the arms run in turn, the order rotated block by block
    (fixed first in one, the adaptive arm first in the next, ...), so no arm always meets the
    load first. Printed: each block's ratios (adaptive / fixed, p50 and p95 of each page kind),
    their median over the blocks with the sign test's distribution-free 95% interval for it,
    how many blocks had the ratio above 1, each arm's pooled p50 / p95, the server's CPU a
    request in every arm and the refit process's CPU. ``json_out`` keeps every run's figures.
    ``warm_up`` participants go through each run's server first, unmeasured, and the run waits for
    the refit process to settle (:func:`wait_for_refit`): the measured load then meets a study
    under way, not one whose refit process is starting and fitting cold."""
    import json
    fixed = make_workspace(tmp / "fixed", answers_per_example=3, pages_per_participant=3)
    n = len(fixed.table("examples.csv"))
    adaptive = make_workspace(tmp / "adaptive", answers_per_example=3, pages_per_participant=3,
                              adaptive={"adaptive": "true", "pool_size": n, "refit_seconds": refit_seconds})
    arms = {"fixed": (fixed, None), "adaptive": (adaptive, None)}
    if against:
        arms["adaptive, against"] = (adaptive, against)
    print(f"fixed study: {n} examples; adaptive study: a pool of {len(adaptive.table('examples.csv'))}, "
          f"refit every {refit_seconds:g} s; {runs} block(s) of {len(arms)} runs, the order rotated"
          + (f"; 'adaptive, against' served from {against}" if against else ""))
    kinds = ("page", "page (post)", "submit + next", "entry", "static")
    names = list(arms)
    records, blocks = [], []
    for i in range(runs):
        order = names[i % len(names):] + names[:i % len(names)]
        got = {}
        for arm in order:
            ws, path = arms[arm]
            fig: dict = {}
            with _ServerPath(path):
                out = run(ws, f"SQLite, {arm}, block {i + 1}", participants, concurrency, ratios=fig, think=think,
                          warm_up=warm_up)
            if out is None:
                return False
            refit = fig.get("refit", [(None, None)])[0]
            got[arm] = {"block": i + 1, "arm": arm, "position": order.index(arm),
                        "load": fig["load"][0], "cpu_ms": fig.get("cpu", [None])[0],
                        "own_cpu_ms": fig.get("own cpu", [None])[0],
                        "refit_cpu_s": refit[0], "refits": refit[1],
                        **{f"{kind} p{q}": float(np.percentile(out[kind], q)) for kind in kinds for q in (50, 95)}}
            records.append(got[arm])
            if json_out:   # after every run: a run cut short keeps what it measured
                Path(json_out).write_text(json.dumps(records, indent=1))
        blocks.append(got)
        print(f"block {i + 1} ({', '.join(order)}), / fixed, p50 and p95: " + "; ".join(
            f"{arm}: " + ", ".join(f"{kind} {got[arm][kind + ' p50'] / got['fixed'][kind + ' p50']:.2f}x "
                                   f"{got[arm][kind + ' p95'] / got['fixed'][kind + ' p95']:.2f}x" for kind in kinds[:3])
            for arm in names[1:]))
    block_summary(records)
    return True


def summary(ratios: dict, runs: int, think: float, concurrency: int, stack: tuple[str, str] = ("", "")) -> None:
    """Each run's p95 and p50 ratios to the two peers, their medians and the load, for one
    think time and one event loop and HTTP parser (``stack``)."""
    regime = (f"no think time: a closed loop at saturation, latency ~ {concurrency} / throughput" if think == 0 else
              f"{think:g} s on each form: {concurrency} participants at once, the server not saturated")
    print(f"\nSQLite, uvicorn on {stack[0]} + {stack[1]}, {runs} runs, {regime}; p95 of each / p95 of the static "
          f"file in the same run (goal <= 1.5x)")
    print("load average before -> after: " + ", ".join(f"{a:.1f} -> {b:.1f}" for a, b in ratios["load"]))
    for kind in ("entry", "page (post)"):
        p95 = [r[1] for r in ratios[kind]]
        p50 = [r[0] for r in ratios[kind]]
        print(f"{kind:<12} p95 ratios {' '.join(f'{x:.2f}' for x in p95)}; median {np.median(p95):.2f}x, "
              f"met in {sum(x <= 1.5 for x in p95)} of {len(p95)}; p50 ratio median {np.median(p50):.2f}x")
    for kind in ("entry", "page (post)"):
        f95 = [r[1] for r in ratios.get(kind + " fresh", [])]
        if f95:
            print(f"{kind:<12} / static on a new connection: p95 ratios {' '.join(f'{x:.2f}' for x in f95)}; "
                  f"median {np.median(f95):.2f}x, met in {sum(x <= 1.5 for x in f95)} of {len(f95)}")
    print("split, medians over the runs (ms): p95 of all, connect, server, body, client; "
          "the slowest 5%'s medians of connect, server, body, client")
    for key in [k for k in ratios if k.startswith("split ")]:
        print(f"{key[6:]:<17} " + " ".join(f"{x:.2f}" for x in np.median(np.array(ratios[key]), axis=0)))
    if ratios.get("cpu"):
        print("server CPU a request (ms): " + " ".join(f"{x:.2f}" for x in ratios["cpu"])
              + f"; median {np.median(ratios['cpu']):.2f}")
    print("p95 of each / p95 of the durable write (second peer) in the same run:")
    for kind in ("entry", "page (post)"):
        d95 = [r[1] for r in ratios[kind + " durable"]]
        d50 = [r[0] for r in ratios[kind + " durable"]]
        print(f"{kind:<12} p95 ratios {' '.join(f'{x:.2f}' for x in d95)}; median {np.median(d95):.2f}x; "
              f"p50 ratio median {np.median(d50):.2f}x")


def stack_argument(text: str) -> tuple[str, str]:
    """``--stacks``' LOOP/HTTP (one of them alone: the other auto) as :func:`server_stack`
    resolves it; any other text, or one not installed, refused by argparse in one line."""
    import argparse

    from satcal.errors import SatcalError
    from satcal.study.hosting import server_stack
    parts = text.split("/")
    if len(parts) > 2:
        raise argparse.ArgumentTypeError(f"{text!r}: expected LOOP/HTTP, e.g. asyncio/h11")
    try:
        return server_stack(*parts)
    except SatcalError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("serve: ")) from None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--participants", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5, help="SQLite runs (default 5)")
    parser.add_argument("--client-processes", type=int, default=1,
                        help="spread the participants over this many client processes, the peer in one "
                             "of its own (default 1: every participant and the peer threads of one process)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--adaptive", action="store_true", help="fixed against adaptive study, SQLite")
    parser.add_argument("--refit-seconds", type=float, default=2.0)
    parser.add_argument("--against", metavar="SRC",
                        help="with --adaptive: a third arm, the adaptive study served by the satcal in SRC "
                             "(a copy of another commit's src/, e.g. main's): its PYTHONPATH")
    parser.add_argument("--json", metavar="PATH", help="with --adaptive: every run's figures, as JSON")
    parser.add_argument("--warm-up", type=int, default=0, metavar="P",
                        help="with --adaptive: P participants through each run's server first, unmeasured, and "
                             "the refit process settled, so the load meets a study under way (default 0)")
    parser.add_argument("--think", type=float, nargs="+", default=[0.0],
                        help="seconds each participant spends on a form before submitting it, the first "
                             "wave arriving over as many seconds (default 0: as fast as the server answers); "
                             "several values: each run of each, in turn (e.g. --think 0 1: both regimes)")
    parser.add_argument("--static-every", type=float, default=STATIC_EVERY,
                        help=f"least seconds from one fetch of the static file to the next (default {STATIC_EVERY:g}; "
                             "0: one after another, as before)")
    parser.add_argument("--fresh-every", type=float, default=FRESH_EVERY,
                        help=f"least seconds from one fetch of the static file on a new connection (the entry's "
                             f"peer) to the next (default {FRESH_EVERY:g}; 0: none)")
    parser.add_argument("--stacks", nargs="+", type=stack_argument, metavar="LOOP/HTTP",
                        help="uvicorn's event loop and HTTP parser for the server and its peers alike, e.g. "
                             "asyncio/h11 uvloop/httptools; several: each run of each, in turn (default auto/auto: "
                             "uvloop and httptools when installed)")
    parser.add_argument("--client-gc", choices=["paused", "on"], nargs="+", default=["paused"],
                        help="the client process's garbage collector while participants run (default paused: "
                             "its full collections stop every participant at once, see client_collector); "
                             "several: each run of each, in turn (e.g. --client-gc on paused)")
    parser.add_argument("--durable-peer", nargs=4, metavar=("PORT", "PATH", "LOOP", "HTTP"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.durable_peer:
        return durable_peer(int(args.durable_peer[0]), *args.durable_peer[1:])
    from satcal.serve import client
    client.Participant._request = traced_request  # the same span timed, its split kept beside it
    ok = True
    if args.adaptive:
        with tempfile.TemporaryDirectory() as tmp:
            sys.exit(0 if adaptive_comparison(Path(tmp), args.participants, args.concurrency, args.refit_seconds,
                                              args.runs, args.think[0], args.against, args.json,
                                              args.warm_up) else 1)
    with tempfile.TemporaryDirectory() as tmp:
        ws = make_workspace(Path(tmp) / "sqlite", answers_per_example=3, pages_per_participant=3)
        stacks = args.stacks or [stack_argument("auto/auto")]   # each checked and resolved by argparse
        by_think: dict = {(think, stack, gc_mode): {} for think in args.think for stack in stacks
                          for gc_mode in args.client_gc}
        for i in range(args.runs):
            for (think, stack, gc_mode), ratios in by_think.items():  # the regimes in turn: each meets the same load
                ok &= run(ws, f"SQLite, run {i + 1} of {args.runs}, client collector {gc_mode}", args.participants,
                          args.concurrency, ratios=ratios, client_processes=args.client_processes, think=think,
                          static_every=args.static_every, fresh_every=args.fresh_every, stack=stack,
                          client_gc=gc_mode) is not None
        for (think, stack, gc_mode), ratios in by_think.items():
            if len(args.client_gc) > 1:
                print(f"\n-- client collector {gc_mode}")
            summary(ratios, args.runs, think, args.concurrency, stack)
        if not args.no_postgres:
            from pg import ensure_postgres, temporary_postgres
            reason = ensure_postgres()
            if reason:
                print(f"\nPostgreSQL skipped: {reason}")
            else:
                ws_pg = make_workspace(Path(tmp) / "pg", answers_per_example=3, pages_per_participant=3)
                with temporary_postgres() as url:
                    ok &= run(ws_pg, "PostgreSQL", args.participants, args.concurrency, url, workers=2,
                              think=args.think[0], static_every=args.static_every, stack=stacks[0]) is not None
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
