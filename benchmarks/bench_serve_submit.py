"""CPU of one page submission, fixed against adaptive hosted study, in process (issue 24).

``bench_serve.py --adaptive`` measures latency under a load the shared machine adds to; this
measures the CPU a submission costs, which the machine's load does not change: the two
workspaces ``bench_serve.py`` builds (``make_workspace``; the adaptive one with its first plan
published and no background refit), driven through the ASGI app by Starlette's TestClient,
participants of the two studies alternating (A B A B). Per page submission (``POST /page``,
until its 303 answer; the GET it redirects to, which writes nothing, is not counted) it records the process's CPU (``time.process_time``: the event
loop's thread, the database thread and the client, which is the same code on both sides), and
on the database thread the CPU of its trip (``StudyRoutes._page``: the participant's read, the
store and the next page's claim in one write, ``time.thread_time``).

    python benchmarks/bench_serve_submit.py [--participants 100]

Prints per side the median and mean of each, the ratio adaptive / fixed, the pages' sizes
(items a page, pages, slots) and what the claim's query costs alone on each side.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve import make_workspace  # noqa: E402


def hosted(ws):
    """The hosted study of ``ws`` and its app; an adaptive study's first plan published, as the
    server's start publishes it, and no background refit (the app's lifespan is not run)."""
    from satcal.serve import create_app
    study = ws.hosted_study()
    if study.order is not None:
        study.order.refresh()
    return study, create_app(study)


def participant_run(app, pid: str, cpu: list, wall: list):
    """One participant through the study with the TestClient; every ``POST /page``'s process
    CPU and wall time appended (the POST alone, not the GET it redirects to)."""
    from starlette.testclient import TestClient
    from satcal.serve.client import parse_form
    # not as a context manager: the lifespan (the adaptive study's background refit) stays off
    http = TestClient(app, follow_redirects=False)
    r = http.get(f"/?PROLIFIC_PID={pid}&STUDY_ID=bench&SESSION_ID={pid}")
    url = "/"
    for _ in range(50):
        while r.is_redirect:
            url = r.headers["location"]
            if url.startswith("http"):
                return
            r = http.get(url)
        form = parse_form(r.text)
        if form is None or form.method != "post":
            return
        fields = dict(form.hidden)
        fields.update(form.checkboxes)
        fields.update({name: values[0] for name, values in form.radios.items()})
        target = form.action or url
        c0, w0 = time.process_time(), time.perf_counter()
        r = http.post(target, data=fields)
        if target.rstrip("/").endswith("page"):
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)


def claim_query_cpu(study, repeats: int = 200) -> float:
    """Median thread CPU (seconds) of the claim's choice of slot alone, read-only, for a
    participant with no pages (in a transaction rolled back)."""
    out = []
    with study.engine.connect() as conn:
        for _ in range(repeats):
            t = time.thread_time()
            study._choose_slot(conn, 0, dict(ape=study.settings.answers_per_example, now=time.time(), pid=-1))
            out.append(time.thread_time() - t)
        conn.rollback()
    return float(np.median(out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--participants", type=int, default=100, help="participants a side (3 pages each)")
    args = parser.parse_args()
    from satcal.serve import routes as routes_mod
    with tempfile.TemporaryDirectory() as tmp:
        fixed = make_workspace(Path(tmp) / "fixed", answers_per_example=3, pages_per_participant=3)
        n = len(fixed.table("examples.csv"))
        adaptive = make_workspace(Path(tmp) / "adaptive", answers_per_example=3, pages_per_participant=3,
                                  adaptive={"adaptive": "true", "pool_size": n, "refit_seconds": 3600})
        original = routes_mod.StudyRoutes._page
        sides = {}
        for name, ws in (("fixed", fixed), ("adaptive", adaptive)):
            study, app = hosted(ws)
            sizes = [len(p) for p in study.pages.values()]
            sides[name] = dict(study=study, app=app, trips=[], cpu=[], wall=[],
                               size=(len(study.pages), float(np.mean(sizes)), len(ws.table("items.csv"))))
        # one patched _page for both sides, its list chosen by the study it runs on
        def _page(self, pid, form):
            start = time.thread_time()
            try:
                return original(self, pid, form)
            finally:
                if form is not None:
                    next(s for s in sides.values() if s["study"] is self.study)["trips"].append(
                        time.thread_time() - start)
        routes_mod.StudyRoutes._page = _page
        for i in range(args.participants):
            for name in (("fixed", "adaptive") if i % 2 == 0 else ("adaptive", "fixed")):
                s = sides[name]
                participant_run(s["app"], f"{name[0]}{i:05d}abcdefabcdefabcdef", s["cpu"], s["wall"])
        routes_mod.StudyRoutes._page = original
        print(f"load {open('/proc/loadavg').read().split()[:3]}")
        for name, s in sides.items():
            pages, per_page, items = s["size"]
            cpu, trips, wall = (np.array(s[k]) * 1000 for k in ("cpu", "trips", "wall"))
            print(f"{name:<9} pages {pages}, {per_page:.2f} items a page, items.csv {items} rows; "
                  f"{len(cpu)} submissions: process CPU median {np.median(cpu):.2f} ms mean {cpu.mean():.2f}; "
                  f"database trip CPU median {np.median(trips):.2f} ms mean {trips.mean():.2f}; "
                  f"wall median {np.median(wall):.2f} ms; claim query alone {claim_query_cpu(s['study']) * 1000:.3f} ms")
        f, a = sides["fixed"], sides["adaptive"]
        print("adaptive / fixed: process CPU median %.2fx, database trip median %.2fx" % (
            np.median(a["cpu"]) / np.median(f["cpu"]), np.median(a["trips"]) / np.median(f["trips"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
