"""satcal serve: the hosted study, checked against a real server process (uvicorn), the real
databases (SQLite; PostgreSQL where Debian's package can be installed) and a participant that
reads only the HTML it is given, as a browser without JavaScript would."""
import re
import threading
import time

import numpy as np
import pandas as pd
import pytest

from satcal.serve.client import attentive

CODE, FAILED = "C0MPL3TE", "FA1LED"


def _configure(ws, **serve):
    """Rewrite study.toml's [design] and [serve] values."""
    text = (ws.path / "study.toml").read_text()
    for name, value in serve.items():
        rendered = f'"{value}"' if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
        text, n = re.subn(rf"(?m)^{name} = .*$", f"{name} = {rendered}", text)
        assert n == 1, name
    (ws.path / "study.toml").write_text(text)
    from satcal.workspace import Workspace
    return Workspace.open(ws.path)


@pytest.fixture
def served_ws(exported_workspace, tmp_path, copy_workspace):
    ws = copy_workspace(exported_workspace("serve", 10), tmp_path)
    # traps only where the batch put them: these tests count each item's answers by its slots
    # (traps on top of pages: test_every_participant_meets_the_trap_rules_count_...)
    return _configure(ws, completion_code=CODE, failed_attention_code=FAILED, pages_per_participant=3,
                      answers_per_example=2, attention_checks=1, attention_fail_limit=1, traps_on_top=False)


def _study(ws, url=None):
    from satcal.serve import HostedStudy
    return ws.hosted_study(url)


def _pages(ws):
    return ws.table("key.csv").groupby("page")["item_id"].apply(set).to_dict()


def _stored(ws, url=None):
    from satcal.serve import db
    engine = db.connect(url or db.default_url(ws.path))
    try:
        return db.snapshot(engine)
    finally:
        engine.dispose()


def _submitted(visits):
    rows = [(pid, name.removeprefix("answer-"), value)
            for pid, visit in visits for answers in visit.submitted.values() for name, value in answers.items()]
    return pd.DataFrame(rows, columns=["worker_id", "item_id", "answer"])


# --------------------------------------------------------------------------------------------
# The participant's way through, on a real server process
# --------------------------------------------------------------------------------------------
def _uvicorn_auto():
    """The event loop and HTTP parser uvicorn itself picks for "auto" (the peer of what satcal
    says it runs): its loop factory's loop and its auto protocol class."""
    import asyncio

    import uvicorn
    from uvicorn.protocols.http.auto import AutoHTTPProtocol
    factory = uvicorn.Config(app=None, loop="auto").get_loop_factory()
    loop = factory() if factory is not None else asyncio.new_event_loop()
    try:
        name = "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
    finally:
        loop.close()
    return name, {"HttpToolsProtocol": "httptools", "H11Protocol": "h11"}[AutoHTTPProtocol.__name__]


@pytest.mark.parametrize("stack", [("auto", "auto"), ("asyncio", "h11")])
def test_prolific_participant_reaches_completion_redirect(served_ws, stack):
    """On uvicorn's automatic choice (uvloop and httptools when installed, the serve extra) and
    on the pure-Python asyncio and h11 a machine without them runs, the answers are stored as
    sent, and serve says at start which it runs (for auto: what uvicorn itself picks)."""
    from satcal.serve.client import Participant, ServerProcess
    with ServerProcess(served_ws.path, loop=stack[0], http=stack[1]) as server:
        visit = Participant(server.url).run("PROLIFIC_PID=5f0c1a2b3c4d5e6f7a8b9c0d&STUDY_ID=st1&SESSION_ID=se1",
                                            attentive)
    loop, http = _uvicorn_auto() if stack == ("auto", "auto") else stack
    assert f"server: uvicorn, {loop} event loop, {http} HTTP parser" in server.log()
    assert visit.errors == []
    assert visit.end_url == f"https://app.prolific.com/submissions/complete?cc={CODE}"
    assert visit.pages == 3
    stored = _stored(served_ws)
    # what was stored is exactly what was submitted, attention check included
    got = stored[["item_id", "answer"]].sort_values("item_id").reset_index(drop=True)
    sent = _submitted([("x", visit)])[["item_id", "answer"]].sort_values("item_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, sent)
    # three whole pages of the batch, all different, plus one attention check
    pages = _pages(served_ws)
    items = set(stored.loc[stored["status"] == "", "item_id"])
    whole = [p for p, ids in pages.items() if ids <= items]
    assert len(whole) == 3 and sum(len(pages[p]) for p in whole) == len(items)
    assert (stored["status"] != "").sum() == 1


def test_serve_without_uvloop_and_httptools_falls_back_or_refuses_in_one_line(served_ws, monkeypatch):
    """Without uvloop and httptools installed (hidden from the import system here), auto means
    asyncio and h11, as uvicorn's own auto falls back to on ImportError; asking for one by name
    is refused in one line, before anything starts (no serving entry written)."""
    import importlib.util

    from click.testing import CliRunner

    from satcal.cli import main
    from satcal.study.hosting import server_stack
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name in ("uvloop", "httptools") else real(name, *a, **k))
    assert server_stack() == ("asyncio", "h11")
    assert server_stack("asyncio", "h11") == ("asyncio", "h11")
    res = CliRunner().invoke(main, ["serve", str(served_ws.path), "--loop", "uvloop"])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "satcal: error: serve: uvloop is not installed (pip install 'satcal[serve]'), or leave it to auto"]
    assert not (served_ws.path / "batches" / "serving.json").exists()


def test_simulate_serve_with_no_server_there_names_the_address(served_ws):
    """simulate --serve at an address where nothing listens: one line naming the address and
    the command that starts the hosted study, exit 2, nothing written."""
    import socket
    from click.testing import CliRunner
    from satcal.cli import main
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    res = CliRunner().invoke(main, ["simulate", str(served_ws.path), "--serve", url])
    assert res.exit_code == 2
    assert res.stderr.strip().startswith(f"satcal: error: {url}: no hosted study answers there (ConnectError")
    assert f"satcal serve {served_ws.path}" in res.stderr and res.stderr.count("\n") == 1
    assert not (served_ws.path / "simulated" / "serve-truth.json").exists()


def test_failed_attention_check_gets_the_other_code(served_ws):
    from satcal.serve.client import Participant, ServerProcess

    def careless(form):  # answers attention checks with anything but what they ask for
        from satcal.serve.client import asked_option
        out = {}
        for name, values in form.radios.items():
            asked = asked_option(form, name)
            out[name] = [v for v in values if v != asked][0] if asked else values[0]
        return out

    with ServerProcess(served_ws.path) as server:
        visit = Participant(server.url).run("PROLIFIC_PID=careless1&STUDY_ID=st1&SESSION_ID=s", careless)
    assert visit.end_url.endswith(f"cc={FAILED}")


def test_lab_participant_gets_a_thank_you_page_and_returning_resumes(served_ws):
    from satcal.serve.client import Participant, ServerProcess, parse_form
    with ServerProcess(served_ws.path) as server:
        import httpx
        with httpx.Client(follow_redirects=True) as http:
            first = http.get(server.url + "/?participant=lab-07")
            consent = parse_form(first.text)
            page1 = http.post(server.url + "/consent", data={**consent.hidden, "consent": "yes"})
            token1 = parse_form(page1.text).hidden["assignment"]
        # the same person comes back in a new browser: same page, same token
        with httpx.Client(follow_redirects=True) as http:
            again = http.get(server.url + "/?participant=lab-07")
            assert parse_form(again.text).hidden["assignment"] == token1
        visit = Participant(server.url).run("participant=lab-07", attentive)
    assert visit.end_url == "" and "Thank you" in visit.end_text
    assert visit.pages == 3 and token1 in visit.submitted
    assert set(_stored(served_ws)["worker_id"]) == {"lab:lab-07"}


def test_resubmitted_page_and_forged_forms_store_nothing_twice(served_ws):
    import httpx
    from satcal.serve.client import ServerProcess, parse_form
    with ServerProcess(served_ws.path) as server, httpx.Client(follow_redirects=True) as http:
        page = http.get(server.url + "/?PROLIFIC_PID=again1&STUDY_ID=s&SESSION_ID=s")
        page = http.post(server.url + "/consent", data={**parse_form(page.text).hidden, "consent": "yes"})
        form = parse_form(page.text)
        answers = {n: v[0] for n, v in form.radios.items()}
        # not every item answered: nothing stored, the page comes back with the choices kept
        partial = dict(list(answers.items())[:2])
        back = http.post(server.url + "/page", data={**form.hidden, **partial})
        assert back.status_code == 422 and "answer every question" in back.text
        assert back.text.count("checked") == 2 and len(_stored(served_ws)) == 0
        # a forged CSRF token: refused, nothing stored
        forged = http.post(server.url + "/page", data={**form.hidden, "csrf": "0" * 64, **answers})
        assert forged.status_code == 403 and len(_stored(served_ws)) == 0
        # the same page three times (double click, reload, back button): stored once
        results = [http.post(server.url + "/page", data={**form.hidden, **answers}) for _ in range(3)]
        assert all(r.status_code == 200 for r in results)
        stored = _stored(served_ws)
        assert len(stored) == len(answers) and stored["item_id"].is_unique
        # concurrent double submission of the next page: stored once
        nxt = parse_form(results[-1].text)
        nxt_answers = {n: v[-1] for n, v in nxt.radios.items()}
        threads = [threading.Thread(target=lambda: httpx.post(
            server.url + "/page", data={**nxt.hidden, **nxt_answers}, cookies=http.cookies)) for _ in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        stored = _stored(served_ws)
        assert len(stored) == len(answers) + len(nxt_answers) and stored["item_id"].is_unique


def test_urlencoded_forms_parse_as_starlettes_parser_parses_them():
    """The pages' forms are parsed by ``parse_urlencoded`` (the standard library's parse_qsl);
    the peer is Starlette's own parser (python-multipart), on seeded random bodies of escapes,
    '+', raw bytes, blank and valueless fields, repeated names and stray '=' and '&'; and both
    refuse more than 500 fields."""
    import asyncio

    from starlette.datastructures import Headers
    from starlette.exceptions import HTTPException
    from starlette.formparsers import FormParser, MultiPartException

    from satcal.serve.routes import MAX_BODY, MAX_FIELDS, parse_urlencoded

    def starlette(body: bytes):
        async def stream():
            yield body
        headers = Headers({"content-type": "application/x-www-form-urlencoded"})
        return asyncio.run(FormParser(headers, stream(), max_fields=MAX_FIELDS, max_part_size=MAX_BODY).parse())

    rng = np.random.default_rng(23)
    atoms = [b"a", b"answer-x1", b"csrf", b"=", b"&", b"&&", b"+", b"%20", b"%C3%A9", b"%e9", b"%zz", b"%",
             b"\xc3\xa9", b"\xff", b" ", b";", b"both_bad", b"", b"=="]
    for _ in range(400):
        body = b"".join(atoms[i] for i in rng.integers(0, len(atoms), int(rng.integers(0, 25))))
        assert parse_urlencoded(body).multi_items() == starlette(body).multi_items(), body
    page = b"&".join(b"answer-%06d=a_better" % i for i in range(12)) + b"&assignment=" + b"0" * 32 + b"&csrf=ab"
    assert parse_urlencoded(page).multi_items() == starlette(page).multi_items()
    many = b"&".join(b"f%d=1" % i for i in range(MAX_FIELDS + 1))
    with pytest.raises(HTTPException):
        parse_urlencoded(many)
    with pytest.raises(MultiPartException):
        starlette(many)
    # Empty fields are not fields: both accept 500 real fields with stray '&'s around them.
    for padded in (b"f=1" + b"&" * 600, b"&".join(b"f%d=1" % i for i in range(MAX_FIELDS)) + b"&"):
        assert parse_urlencoded(padded).multi_items() == starlette(padded).multi_items()


def test_bad_participant_ids_and_large_requests_are_refused(served_ws):
    import httpx
    from satcal.serve.client import ServerProcess
    with ServerProcess(served_ws.path) as server:
        hostile = "<script>alert(1)</script>"
        r = httpx.get(server.url + "/", params={"PROLIFIC_PID": hostile, "STUDY_ID": "s", "SESSION_ID": "s"})
        assert r.status_code == 400 and hostile not in r.text
        r = httpx.get(server.url + "/", params={"PROLIFIC_PID": "a" * 65})
        assert r.status_code == 400
        r = httpx.post(server.url + "/page", content=b"x" * (200 * 1024),
                       headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.status_code == 413
        r = httpx.get(server.url + "/page")  # no session: no page
        assert r.status_code == 403
        r = httpx.get(server.url + "/status/not-the-token")
        assert r.status_code == 404
    assert len(_stored(served_ws)) == 0


def test_no_key_field_in_any_served_byte(served_ws):
    """Walk the whole study, keep every byte served (bodies and headers), and look for the
    key: example and trap ids, orientation, trap flags, expected answers, levels, hashes."""
    import httpx
    from satcal.serve.client import Participant, ServerProcess
    served = []

    def keep(response):
        response.read()
        served.append(str(response.headers) + response.text)

    key = served_ws.table("key.csv")
    with ServerProcess(served_ws.path) as server:
        with httpx.Client(follow_redirects=False, event_hooks={"response": [keep]}) as http:
            visit = Participant(server.url, http).run("PROLIFIC_PID=leak1&STUDY_ID=s&SESSION_ID=s", attentive)
            http.get(server.url + "/static/satcal.css")
    assert visit.pages == 3 and len(served) > 8
    everything = "\n".join(served)
    shown = set(re.findall(r'name="answer-([0-9a-f]+)"', everything))
    assert shown & set(key["item_id"])  # the item ids themselves are opaque and shown
    for secret in pd.concat([key["source_id"], key["example_hash"]]).unique():
        assert not re.search(rf"(?<![\w-]){re.escape(secret)}(?![\w-])", everything), secret
    for word in ("swapped", "is_trap", "expected", "source_id", "example_id", "trap", "phi", "level"):
        assert word not in everything.lower(), word


# --------------------------------------------------------------------------------------------
# Assignment: even spread, never twice, timeouts
# --------------------------------------------------------------------------------------------
def test_every_page_gets_exactly_its_answers_from_different_participants(served_ws):
    from satcal.serve.client import ServerProcess, drive
    pages = _pages(served_ws)
    needed = 2 * len(pages) // 3 + 3  # enough participants to fill every slot (3 pages each)
    with ServerProcess(served_ws.path) as server:
        visits = drive(server.url, [f"P{i:03d}" for i in range(needed)], concurrency=12, choose=attentive)
    assert all(v.errors == [] for v in visits)
    stored = _stored(served_ws)
    items = stored[stored["status"] == ""]
    counts = items.groupby("item_id")["worker_id"].agg(["size", "nunique"])
    assert set(counts.index) == set().union(*pages.values())
    assert (counts["size"] == 2).all() and (counts["nunique"] == 2).all()  # two different people
    sent = _submitted(list(zip([f"P{i:03d}" for i in range(needed)], visits)))
    assert len(sent) == len(stored)


def test_abandoned_page_is_given_to_someone_else_after_the_timeout(served_ws, monkeypatch):
    import satcal.serve.study as study_module
    ws = _configure(served_ws, answers_per_example=1, pages_per_participant=1, attention_checks=0,
                    assignment_timeout_minutes=1)
    study = _study(ws)
    clock = [1_000_000.0]
    monkeypatch.setattr(study_module.time, "time", lambda: clock[0])
    n_pages = len(study.pages)
    holders = [study.enter("lab", f"p{i}") for i in range(n_pages)]
    views = {pid: study.next_page(pid) for pid in holders}
    assert len({v.token for v in views.values()}) == n_pages  # every page held once
    late = study.enter("lab", "late")
    assert study.next_page(late) is None  # nothing free while all are held
    clock[0] += 61  # the first holder's page times out ...
    released = study.next_page(late)
    assert released is not None
    first_page = {tuple(i["item_id"] for i in v.items): pid for pid, v in views.items()}
    abandoner = first_page[tuple(i["item_id"] for i in released.items)]
    # ... and when its first holder answers after all, the answers are kept (an extra answer)
    answers = {f"answer-{i['item_id']}": "both_good" for i in released.items}
    assert study.submit(abandoner, views[abandoner].token, answers) == "stored"
    assert study.submit(late, released.token, answers) == "stored"
    stored = _stored(ws)
    assert len(stored) == 2 * len(released.items)
    assert study.progress()["slots_done"] == 1


def test_answers_per_example_can_grow_and_database_is_bound_to_its_batch(served_ws):
    from satcal.errors import SatcalError
    study = _study(served_ws)
    assert study.stored["slots"] == 2 * len(study.pages)
    study.engine.dispose()
    ws = _configure(served_ws, answers_per_example=3)
    study = _study(ws)
    assert study.stored["slots"] == 3 * len(study.pages)
    study.engine.dispose()
    key = ws.table("key.csv")
    key.loc[0, "swapped"] = str(key.loc[0, "swapped"] != "True")
    key.to_csv(ws.file("key.csv"), index=False)
    with pytest.raises(SatcalError, match="belongs to another batch"):
        _study(ws)


def test_attention_checks_are_spread_over_a_participants_pages():
    from satcal.serve.study import attention_positions
    assert attention_positions(5, 2) == {1, 3}
    assert attention_positions(4, 1) == {2}
    assert attention_positions(3, 5) == {0, 1, 2}  # at most one per page
    assert attention_positions(6, 0) == set()


def test_every_participant_meets_the_trap_rules_count_spread_over_their_pages(served_ws):
    """Traps on top of a page: the cumulative number met after page j is ceil(m (j + 1) / P)
    or what the pages themselves held, walked again here page by page; none twice. m is
    "auto": the trap rule's own count for the batch's traps (quality.traps_needed on their
    chance rates), at most the items of a participant's 4 pages, at least quality.min_traps."""
    from satcal.quality import _chance, trap_exclusion, traps_needed
    # pages of 14 items, so 4 of them hold the rule's count at trap_power 0.999 ("auto" items a page would leave
    # room for the traps on top: test_auto_pages_with_traps_on_top_stay_within_three_screens)
    ws = _configure(served_ws, pages_per_participant=4, answers_per_example=6, attention_checks=0,
                    traps_on_top=True, items_per_page=14)
    ws.export(force=True)
    assert ws["serve.traps_per_participant"] == "auto"  # the default
    key = ws.table("key.csv")
    traps = key[key["is_trap"] == "True"]
    needed = traps_needed(_chance(traps), 0.7, ws["quality.trap_power"])
    seen = int(4 * len(key) / key["page"].nunique())
    m = min(max(min(needed, seen), ws["quality.min_traps"]), len(traps))
    study = _study(ws)
    assert study.traps_per_participant == m == needed  # this batch's pages hold enough items
    assert f"meets {m} traps over their 4 pages" in study.screening
    assert f"probability {trap_exclusion(_chance(traps), 0.7, m):.3f}" in study.screening
    study = _study(ws)
    key = ws.table("key.csv").set_index("item_id")
    trap_ids = set(key.index[key["is_trap"] == "True"])
    page_of = key["page"].astype(int)
    for n in range(6):
        pid = study.enter("lab", f"t{n}")
        met = []
        for j in range(4):
            view = study.next_page(pid)
            ids = [it["item_id"] for it in view.items]
            page = page_of[[i for i in ids if i not in trap_ids][0]] if set(ids) - trap_ids else None
            natives = [i for i in ids if i in trap_ids and page_of[i] == page]
            extras = [i for i in ids if i in trap_ids and page_of[i] != page]
            target = -(-m * (j + 1) // 4)  # P = 4
            assert len(extras) == max(0, target - len(met) - len(natives))
            assert set(ids) >= set(page_of.index[page_of == page])  # the page's own items all there
            met += natives + extras
            assert study.submit(pid, view.token, {f"answer-{i}": "both_bad" for i in ids}) == "stored"
        assert len(met) == len(set(met)) >= m  # met the count, never one trap twice
    stored = _stored(ws)
    assert not stored.duplicated(["worker_id", "item_id"]).any()


def test_screening_warnings_name_what_the_design_cannot_give():
    from satcal.serve.study import screening_warnings
    pages = {p: [f"i{p}-{j}" for j in range(10)] for p in range(1, 214)}  # 213 pages of 10
    traps = [f"i{p}-0" for p in range(1, 21)]  # 20 traps
    assert screening_warnings(pages, traps, 5, 3, True) == []
    off = screening_warnings(pages, traps, 5, 3, False)
    # 5 pages x 20 / 213 = 0.47 traps a participant on average
    assert len(off) == 1 and "meets 0.5 traps on average" in off[0] and "2130 items on 213 pages" in off[0]
    few = screening_warnings(pages, traps[:2], 5, 3, True)
    assert len(few) == 1 and "has 2 trap(s), fewer than the 3 each participant meets" in few[0]
    assert screening_warnings(pages, [], 5, 0, False) == []
    # 2 pages of 2 items, plus traps on top up to 3: 4 + (3 - 2 x 20 / 213) = 6.8 answers, under the
    # 10 the straight-lining test needs
    small = {p: [f"i{p}-{j}" for j in range(2)] for p in range(1, 214)}
    short = screening_warnings(small, [f"i{p}-0" for p in range(1, 21)], 2, 3, True)
    assert len(short) == 1 and "gives about 7 answers (2 pages), fewer than the 10 the straight-lining" in short[0]



def test_participant_traps_take_the_trap_rules_count_capped_by_the_pages():
    """``serve.traps_per_participant``: "auto" is quality.traps_needed of the batch's chance
    rates, at most the items a participant's pages hold, at least min_traps; a number is kept
    with a warning of the power quality.trap_exclusion gives it."""
    from satcal.quality import trap_exclusion, trap_rule_line, traps_needed
    from satcal.serve.study import participant_traps
    chance = [0.25] * 30 + [0.5] * 20  # one accepted answer, and "better or both bad"
    needed = traps_needed(chance, 0.7, 0.99)
    assert 5 < needed <= 50
    # pages holding enough items: the rule's count, no warning
    n, line, warned = participant_traps(chance, needed + 3, 5, "auto", 0.7, 0.99, 5)
    assert (n, warned) == (needed, [])
    assert f"probability {trap_exclusion(chance, 0.7, needed):.3f}" in line
    # pages holding fewer items: stopped there, the power it reaches and the pages that reach the count
    few = needed - 4
    n, line, warned = participant_traps(chance, few, 5, "auto", 0.7, 0.99, 5)
    assert n == few and len(warned) == 1
    assert f"probability {trap_exclusion(chance, 0.7, few):.3f}, not quality.trap_power = 0.99" in warned[0]
    assert f"pages_per_participant to {-(-needed * 5 // few)}" in warned[0]
    # fewer items than min_traps: min_traps
    assert participant_traps(chance, 3, 1, "auto", 0.7, 0.99, 5)[0] == 5
    # min_traps above the rule's count (or a low trap_power): never fewer than ingest scores
    assert participant_traps(chance, 100, 5, "auto", 0.7, 0.99, needed + 5)[0] == needed + 5
    low = traps_needed(chance, 0.7, 0.5)
    assert low < 10 and participant_traps(chance, 100, 5, "auto", 0.7, 0.5, 10)[0] == 10
    # a number below the count: kept, with its power
    n, line, warned = participant_traps(chance, 100, 5, 7, 0.7, 0.99, 5)
    assert n == 7 and warned == [f"[serve] traps_per_participant = 7 is below the trap rule's {needed}: a participant "
                                 f"answering at random is excluded by the traps alone with probability "
                                 f"{trap_exclusion(chance, 0.7, 7):.3f}, not quality.trap_power = 0.99; set it to "
                                 f'{needed} or "auto"']
    assert participant_traps(chance, 100, 5, needed, 0.7, 0.99, 5)[::2] == (needed, [])
    # a batch with fewer traps than the count: all of them, and a warning
    n, _, warned = participant_traps(chance[:10], 100, 5, "auto", 0.7, 0.99, 5)
    assert n == 10 and warned[0].startswith(f"the batch has 10 traps, fewer than the trap rule's "
                                             f"{traps_needed(chance[:10], 0.7, 0.99)}")
    # traps chance passes as often as the threshold asks: no count is enough, min_traps kept
    n, _, warned = participant_traps([0.75] * 20, 100, 5, "auto", 0.7, 0.99, 5)
    assert n == 5 and warned == [trap_rule_line([0.75] * 20, 0.7, 0.99)]
    # no traps at all
    assert participant_traps([], 100, 5, "auto", 0.7, 0.99, 5)[0] == 0

def test_auto_items_a_page_leave_room_for_the_traps_shown_on_top():
    """A hand-worked case: pages hold 5 items by reading load, 5 pages a participant, 20 traps
    of chance 1/4 (the rule asks 19 at threshold 0.7, power 0.99) among 80 examples (a fifth
    of any page is traps). 5 own items: 25 seen, 19 traps, 5 on the pages, ceil(14 / 5) = 3 on
    top: 8 > 5. 4: 19 - 4 = 15, 3 on top: 7. 3: 15 traps (at most the 15 items seen), 12, 3 on
    top: 6. 2: 10 traps, 8, 2 on top: 4 <= 5, so 2."""
    from satcal.quality import traps_needed
    from satcal.serve.study import items_per_page_with_traps
    chance = [0.25] * 20
    assert traps_needed(chance, 0.7, 0.99) == 19
    assert items_per_page_with_traps(5, 5, chance, 80, "auto", 0.7, 0.99, 5) == 2
    # a fixed 5 a participant: their 5 pages of 5 hold them (5 x 5 / 5), none on top
    assert items_per_page_with_traps(5, 5, chance, 80, 5, 0.7, 0.99, 5) == 5
    # 10 a participant: 5 + ceil((10 - 5) / 5) = 6 > 5; 4 + ceil((10 - 4) / 5) = 6 > 5;
    # 3 + ceil((10 - 3) / 5) = 5
    assert items_per_page_with_traps(5, 5, chance, 80, 10, 0.7, 0.99, 5) == 3
    # no traps: the reading load alone; a page too small for any trap: one item
    assert items_per_page_with_traps(5, 5, [], 80, "auto", 0.7, 0.99, 5) == 5
    assert items_per_page_with_traps(1, 5, chance, 80, "auto", 0.7, 0.99, 5) == 1


def test_auto_pages_with_traps_on_top_stay_within_three_screens(exported_workspace, tmp_path, copy_workspace):
    """items_per_page = "auto" with traps shown on top: every page a participant gets, its own
    items, the traps on top and the attention check, is estimated (the stylesheet's heights,
    satcal.platforms.serve.item_heights, checked in Chromium) within the three screens the
    reading-load budget allows. Before, the budget counted the page's own items only and "auto"
    traps (up to as many again) were added on top: 356 + 10 x 246 = 2816 px here."""
    from satcal.platforms.serve import ITEM_FRAME_PX, PAGE_BUDGET_PX, PAGE_FRAME_PX, item_heights
    ws = copy_workspace(exported_workspace("serve", 10), tmp_path)
    ws = _configure(ws, pages_per_participant=5, attention_checks=2, traps_on_top=True)
    assert ws["presentation.items_per_page"] == "auto" and ws["serve.traps_per_participant"] == "auto"
    ws.export(force=True)
    visible = ws.table("items.csv").set_index("item_id")
    height = pd.Series(item_heights(visible, ws.k), index=visible.index)
    study = _study(ws)
    assert study.traps_per_participant >= ws["quality.min_traps"]
    for n in range(3):
        pid = study.enter("lab", f"h{n}")
        for _ in range(5):
            view = study.next_page(pid)
            ids = [it["item_id"] for it in view.items if it["kind"] == "item"]
            checks = sum(it["kind"] != "item" for it in view.items)
            assert PAGE_FRAME_PX + height[ids].sum() + checks * ITEM_FRAME_PX <= PAGE_BUDGET_PX
            assert study.submit(pid, view.token, {f"answer-{it['item_id']}": "both_bad" for it in view.items}) == "stored"


def test_a_version_1_database_is_migrated_and_its_dry_run_marked(served_ws):
    from sqlalchemy import inspect, insert, select, text
    from satcal.serve import db
    study = _study(served_ws)
    engine = study.engine
    p = db.tables()["participants"]
    with db.writer(engine).begin() as conn:  # back to version 1, as a database made before
        conn.execute(text("ALTER TABLE participants DROP COLUMN simulated"))
        conn.execute(text("ALTER TABLE assignments DROP COLUMN extra_items"))
        conn.execute(text(f"DROP INDEX {db.SLOT_INDEX[0]}"))  # version 3's
        conn.execute(text("UPDATE satcal_meta SET value = '1' WHERE name = 'schema_version'"))
        for ext, sid in (("SIM-0001", "simulated"), ("SIM-0002", "other"), ("5f0c1a2b", "simulated")):
            conn.execute(text("INSERT INTO participants (kind, external_id, study_id, session_id, created_at, outcome) "
                              f"VALUES ('prolific', '{ext}', '{sid}', '', 0, '')"))
    engine.dispose()
    study = _study(served_ws)
    with study.engine.connect() as conn:
        marked = dict(conn.execute(select(p.c.external_id, p.c.simulated)).all())
        version = conn.execute(select(db.tables()["meta"].c.value).where(db.tables()["meta"].c.name == "schema_version")).scalar_one()
    assert version == str(db.SCHEMA_VERSION) == "3"
    assert marked == {"SIM-0001": True, "SIM-0002": False, "5f0c1a2b": False}
    indexes = {ix["name"]: ix["column_names"] for ix in inspect(study.engine).get_indexes("slots")}
    assert indexes[db.SLOT_INDEX[0]] == list(db.SLOT_INDEX[1:])
    view = study.next_page(study.enter("lab", "after-migration"))  # the new columns work
    assert view is not None


def test_serve_passes_over_a_uvloop_that_is_found_but_does_not_import(served_ws, tmp_path, monkeypatch):
    """A uvloop package on the path whose import fails (its C part built for another Python):
    auto falls back to asyncio, as uvicorn's own auto does on ImportError, and ``--loop
    uvloop`` is refused in one line (before, find_spec alone said uvloop, and uvicorn failed
    in a traceback)."""
    import sys

    from click.testing import CliRunner

    from satcal.cli import main
    from satcal.study.hosting import server_stack
    broken = tmp_path / "site" / "uvloop"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('uvloop built for another Python')\n")
    monkeypatch.syspath_prepend(str(broken.parent))
    for name in [m for m in sys.modules if m == "uvloop" or m.startswith("uvloop.")]:
        monkeypatch.delitem(sys.modules, name)
    assert server_stack("auto", "h11") == ("asyncio", "h11")
    res = CliRunner().invoke(main, ["serve", str(served_ws.path), "--loop", "uvloop"])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "satcal: error: serve: uvloop is not installed (pip install 'satcal[serve]'), or leave it to auto"]


def test_a_schema_2_database_made_by_the_schema_2_code_is_migrated_keeping_every_answer(tmp_path):
    """tests/data/serve-schema2.db, written by satcal at schema 2 (2e70104;
    tests/data/make_serve_schema2_db.py says how): opened by this code it is at schema 3 with
    the slot index, every response read from the file before (sqlite3, not satcal) is in the
    snapshot unchanged, the page a participant held across the upgrade is still theirs to
    submit, and a newcomer's page is stored beside them."""
    import importlib.util
    import shutil
    import sqlite3
    from pathlib import Path

    from sqlalchemy import inspect

    from satcal.serve import db
    from satcal.serve.study import HostedStudy, ServeSettings
    data = Path(__file__).resolve().parent / "data"
    spec = importlib.util.spec_from_file_location("make_serve_schema2_db", data / "make_serve_schema2_db.py")
    made = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(made)
    path = tmp_path / "serve.db"
    shutil.copyfile(data / "serve-schema2.db", path)
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT value FROM satcal_meta WHERE name = 'schema_version'").fetchone() == ("2",)
    before = raw.execute("SELECT r.id, p.external_id, r.item_id, r.answer FROM responses r JOIN assignments a "
                         "ON r.assignment_id = a.id JOIN participants p ON a.participant_id = p.id").fetchall()
    held = raw.execute("SELECT a.page FROM assignments a JOIN participants p ON a.participant_id = p.id "
                       "WHERE p.external_id = 'p4' AND a.submitted_at IS NULL").fetchall()
    raw.close()
    assert len(before) == 12 and held == [(3,)]   # as the script made it
    engine = db.connect(f"sqlite:///{path}")
    settings = ServeSettings(pages_per_participant=2, attention_checks=0, answers_per_example=2,
                             traps_per_participant=0, min_traps=0, traps_on_top=False)
    study = HostedStudy(made.views(made.SCHEMA_2_PAGES), settings, engine, made.SCHEMA_2_DIGEST)
    with engine.connect() as conn:
        version = conn.exec_driver_sql("SELECT value FROM satcal_meta WHERE name = 'schema_version'").scalar_one()
    assert version == str(db.SCHEMA_VERSION) == "3"
    indexes = {ix["name"]: ix["column_names"] for ix in inspect(engine).get_indexes("slots")}
    assert indexes[db.SLOT_INDEX[0]] == list(db.SLOT_INDEX[1:])
    stored = db.snapshot(engine)
    kept = set(zip(stored["row_id"], stored["item_id"], stored["answer"]))
    assert len(stored) == 12 and kept == {(f"r{i}", item, answer) for i, _, item, answer in before}
    # the participant who held a page across the upgrade submits it; a newcomer answers one
    p4 = study.enter("lab", "p4")
    view = study.next_page(p4)
    assert view.position == 1 and view.items[0]["item_id"] in made.SCHEMA_2_PAGES[held[0][0]]
    assert study.submit(p4, view.token, {f"answer-{it['item_id']}": "both_good" for it in view.items}) == "stored"
    p5 = study.enter("lab", "p5")
    view = study.next_page(p5)
    assert study.submit(p5, view.token, {f"answer-{it['item_id']}": "a_better" for it in view.items}) == "stored"
    after = db.snapshot(engine)
    engine.dispose()
    assert len(after) == 16
    assert set(zip(after["row_id"], after["item_id"], after["answer"])) >= kept
    new = after[~after["row_id"].isin(stored["row_id"])]
    assert sorted(new["answer"]) == ["a_better", "a_better", "both_good", "both_good"]


def test_the_choice_of_slot_walks_the_slot_index_and_picks_what_a_scan_picks(served_ws):
    """SQLite's plan of the claim's choice of slot searches the slot index, with no scan of the
    slots and no sort (a scan and sort of every slot took 0.8 ms of the writers' turn a claim),
    and it picks the slot a plain scan of the table, sorted in Python, picks."""
    import sqlite3

    from satcal.serve import db
    from satcal.serve.study import _choose
    ws = _configure(served_ws, answers_per_example=2, pages_per_participant=3)
    study = _study(ws)
    for n in range(4):  # slots held, done and seen, so the first free slot is not the first slot
        pid = study.enter("lab", f"x{n}")
        view = study.next_page(pid)
        if n % 2:
            study.submit(pid, view.token, {f"answer-{it['item_id']}": "both_bad" for it in view.items})
    pid = study.enter("lab", "chooser")
    sql, order, defaults, _ = _choose(0)._prepared(study.engine.dialect)
    now = time.time()
    values = {**defaults, "ape": 2, "now": now, "pid": pid}
    raw = sqlite3.connect(study.engine.url.database)
    plan = " ".join(row[3] for row in raw.execute("EXPLAIN QUERY PLAN " + sql, [values[n] for n in order]))
    assert f"SEARCH slots USING INDEX {db.SLOT_INDEX[0]}" in plan and "SCAN slots" not in plan
    assert "TEMP B-TREE" not in plan
    got = raw.execute(sql, [values[n] for n in order]).fetchall()
    slots = raw.execute("SELECT id, page, replicate, done, assignment_id, held_until FROM slots").fetchall()
    free = sorted((rep, page, sid) for sid, page, rep, done, aid, until in slots
                  if not done and rep <= 2 and (aid is None or until < now))
    assert got == [(free[0][2], free[0][1])]
    raw.close()


def test_status_page_figures_per_page_and_participant(served_ws, monkeypatch):
    import satcal.serve.study as study_module
    ws = _configure(served_ws, answers_per_example=1, pages_per_participant=2, attention_checks=1)
    study = _study(ws)
    clock = [1_000.0]
    monkeypatch.setattr(study_module.time, "time", lambda: clock[0])
    a, b = study.enter("prolific", "AAA"), study.enter("prolific", "SIMB", simulated=True)
    answered = {}
    for pid, seconds in ((a, (30.0, 50.0)), (b, (4.0, 6.0))):
        for s in seconds:
            view = study.next_page(pid)
            clock[0] += s
            # b answers every attention check wrongly, a rightly
            wrong = lambda it: "b_better" if it["expected"] == "a_better" else "a_better"
            form = {f"answer-{it['item_id']}": "both_good" if it["kind"] == "item"
                    else wrong(it) if pid == b else it["expected"] for it in view.items}
            assert study.submit(pid, view.token, form) == "stored"
            answered[pid] = answered.get(pid, 0) + sum(it["kind"] == "item" for it in view.items)
    p = study.progress()
    people = {x["worker_id"]: x for x in p["people"]}
    assert people["AAA"]["pages"] == 2 and people["AAA"]["median_seconds_per_page"] == 40.0
    assert people["AAA"]["total_seconds"] == 80.0 and people["SIMB"]["total_seconds"] == 10.0
    assert people["SIMB"]["simulated"] and not people["AAA"]["simulated"]
    assert p["simulated_participants"] == 1
    assert p["simulated_share"] == pytest.approx(answered[b] / (answered[a] + answered[b]))
    assert sum(x["answered"] for x in p["pages"]) == 4 == p["slots_done"]
    # one attention check each (attention_checks = 1): b failed theirs
    assert p["attention_failures"] == [{"worker_id": "SIMB", "failures": 1}]
    assert (people["SIMB"]["attention_failed"], people["SIMB"]["attention_checks"]) == (1, 1)
    assert (people["AAA"]["attention_failed"], people["AAA"]["attention_checks"]) == (0, 1)


# --------------------------------------------------------------------------------------------
# Into the pipeline
# --------------------------------------------------------------------------------------------
def test_ingest_reads_the_database_losslessly_and_snapshots_supersede(served_ws):
    from satcal.cli import main
    from satcal.serve.client import ServerProcess, drive
    from click.testing import CliRunner
    runner = CliRunner()
    with ServerProcess(served_ws.path) as server:
        drive(server.url, ["A1", "A2"], concurrency=2, choose=attentive)
        first = runner.invoke(main, ["ingest", str(served_ws.path), "--platform", "serve"])
        assert first.exit_code == 0, first.output
        again = runner.invoke(main, ["ingest", str(served_ws.path), "--platform", "serve"])
        assert "already ingested" in again.output
        drive(server.url, ["A3"], concurrency=1, choose=attentive)
        third = runner.invoke(main, ["ingest", str(served_ws.path), "--platform", "serve"])
        assert third.exit_code == 0, third.output
    stored = _stored(served_ws)
    answers, rejects = served_ws.table("answers.csv"), served_ws.table("rejects.csv")
    assert len(answers) + len(rejects) == len(stored)  # every response accounted for, once
    attention = stored["status"] != ""
    assert set(rejects.loc[rejects["reason"].str.startswith("platform status: attention"), "row_id"]) == \
        set(stored.loc[attention, "row_id"])
    assert set(answers["worker_id"]) <= {"A1", "A2", "A3"}
    assert pd.to_numeric(answers["seconds"]).ge(0).all()
    index = pd.read_csv(served_ws.path / "raw" / "index.csv")
    superseded = pd.read_csv(served_ws.path / "raw" / "superseded.csv")
    assert len(index) == 1 and len(superseded) == 1  # the earlier snapshot is kept, not counted
    assert (served_ws.path / "raw" / superseded["file"][0]).exists()


def test_a_database_that_lost_responses_is_refused(served_ws):
    from satcal.errors import SatcalError
    from satcal.serve.client import ServerProcess, drive
    with ServerProcess(served_ws.path) as server:
        drive(server.url, ["B1"], concurrency=1, choose=attentive)
    first = served_ws.snapshot_served(None, served_ws.path / "snap1")
    served_ws.ingest([first], platform="serve")
    from satcal.serve import db
    engine = db.connect(db.default_url(served_ws.path))
    with db.writer(engine).begin() as conn:
        conn.execute(db.tables()["responses"].delete().where(db.tables()["responses"].c.id == 1))
    engine.dispose()
    before = (served_ws.path / "answers.csv").read_bytes()
    with pytest.raises(SatcalError, match="not in the study database now"):
        served_ws.ingest([served_ws.snapshot_served(None, served_ws.path / "snap2")], platform="serve")
    assert (served_ws.path / "answers.csv").read_bytes() == before


def attentive_asked(form):
    from satcal.serve.client import asked_option
    return {name: asked_option(form, name) for name in form.radios}


def test_simulated_crowd_through_the_server_is_analysable(served_ws):
    """The documented dry run (serve, simulate --serve, ingest, analyze) is reported as
    simulated, and its attention failures and trap-failing participants are excluded."""
    import json
    import zlib
    from satcal.serve.client import ServerProcess, drive
    # the rules this test recomputes are traps, straight-lining and attention checks; the
    # judgment-consistency and crowd-likelihood rules (tests in test_quality) would read the
    # careful participants' hash-chosen example answers as guesses, so they are off here
    ws = _configure(served_ws, answers_per_example=1, pages_per_participant=2, traps_on_top=True,
                    consistency_alpha=0, crowd_alpha=0)
    with ServerProcess(ws.path) as server:
        # two careful people first (right on traps and attention checks), one whose id looks
        # like the simulated crowd's but who enters without its token
        shown = ws.table("key.csv").set_index("item_id")["expected_shown"].str.split(";").str[0]

        codes = ("a_better", "b_better", "both_good", "both_bad")

        def careful(form):  # right on traps and checks; examples answered by their lists, varied
            return {name: asked or (shown[name[7:]] if shown.get(name[7:], "") else codes[zlib.crc32(name.encode()) % 4])
                    for name, asked in attentive_asked(form).items()}
        drive(server.url, ["REAL1", "SIM-9999"], concurrency=2, choose=careful)

        def careless(form):  # right on traps, wrong on attention checks
            right = careful(form)
            return {name: [v for v in form.radios[name] if v != asked][0] if asked else right[name]
                    for name, asked in attentive_asked(form).items()}
        drive(server.url, ["CARELESS"], concurrency=1, choose=careless)

        def straight(form):  # "both bad" to everything, attention checks included
            return {name: "both_bad" for name in form.radios}
        drive(server.url, ["BOTHBAD"], concurrency=1, choose=straight)
        visits, truth = ws.simulate_served(server.url, concurrency=8)
    assert truth["errors"] == [] and truth["pages"] == sum(v.pages for v in visits) > 0
    report = ws.ingest([ws.snapshot_served(None, ws.path / "snap")], platform="serve")
    stored = _stored(ws)
    assert len(report.answers) + len(report.rejects) == len(stored)
    # marked by the database (the entry's token), not by the id
    sim = set(stored.loc[stored["simulated"] == "yes", "worker_id"])
    assert sim == {w for w in stored["worker_id"] if w.startswith("SIM-")} - {"SIM-9999"}
    w = report.workers.set_index("worker_id")
    assert set(w.index[w["simulated"]]) == sim & set(w.index)
    # screening, computed again from the stored responses and the key: every participant with
    # both pages met min_traps (5) traps; excluded = failed an attention check (limit 1) or, over
    # 5 or more traps, trap answers likelier at chance than at accuracy 0.7 (a trap with c of the
    # 4 codes accepted: log(c/0.7) when right, log((1-c)/0.3) when missed, summed > 0) or a
    # one-sided binomial p of "accuracy >= 0.7" under 0.05, or straight-lining: one shown answer
    # in >= 90% of 10+ answers and 4 x scipy's one-sided binomial p against the others' rate < 0.001
    key = ws.table("key.csv").set_index("item_id")
    items = stored[stored["status"] == ""].join(key[["is_trap", "swapped", "expected"]], on="item_id")
    traps = items[items["is_trap"] == "True"]
    flip = {"a_better": "b_better", "b_better": "a_better"}
    canonical = np.where(traps["swapped"] == "True", traps["answer"].map(lambda a: flip.get(a, a)), traps["answer"])
    right = pd.Series([a in e.split(";") for a, e in zip(canonical, traps["expected"])], index=traps.index)
    chance = traps["expected"].str.split(";").str.len() / 4
    evidence = np.where(chance >= 0.7, 0.0, np.where(right, np.log(chance / 0.7), np.log((1 - chance) / 0.3)))
    per = pd.DataFrame({"n": traps.groupby("worker_id").size(), "right": right.groupby(traps["worker_id"]).sum(),
                        "evidence": pd.Series(evidence, index=traps.index).groupby(traps["worker_id"]).sum()})
    pages = stored[stored["status"] == ""].groupby("worker_id")["page_token"].nunique()
    assert (per.reindex(pages.index[pages == 2])["n"] >= 5).all()
    failed = set(stored.loc[stored["attention_passed"] == "no", "worker_id"])
    from scipy.stats import binom, binomtest
    low = set(per.index[(per["n"] >= 5) & ((per["evidence"] > 0) | (binom.cdf(per["right"], per["n"], 0.7) < 0.05))])
    valid = items[items["is_trap"].notna()]  # answers to the batch's items (not attention checks)
    lined = set()
    for worker, own in valid.groupby("worker_id"):
        code, x = own["answer"].value_counts().sort_index().idxmax(), own["answer"].value_counts().max()
        others = valid[valid["worker_id"] != worker]["answer"]
        p = min(1, 4 * binomtest(int(x), len(own), (others == code).mean(), alternative="greater").pvalue)
        if len(own) >= 10 and x / len(own) >= 0.9 and p < 0.001:
            lined.add(worker)
    assert "BOTHBAD" in lined and len(valid[valid["worker_id"] == "BOTHBAD"]) >= 10
    by_traps = set(low)
    low |= lined
    assert set(w.index[w["excluded"]]) == (failed | low) & set(w.index) and "CARELESS" in failed
    assert set(failed) <= set(truth["spammers"]) | {"CARELESS", "BOTHBAD"}
    assert not w.loc["REAL1", "excluded"] and not w.loc["SIM-9999", "excluded"]
    assert set(report.answers["worker_id"]).isdisjoint(failed | low)
    # the report carries the simulated share, with the banner
    share = report.answers["worker_id"].isin(sim).mean()
    assert 0 < share < 1 and ws.simulated_share() == pytest.approx(share)
    result = ws.analyze(bootstrap=0, model_check_folds=0)
    kept = report.answers[~report.answers["is_trap"].astype(bool)]
    assert result.meta["crowd"]["answers"] == len(kept) > 0
    calibration = json.loads((ws.path / "analysis" / "calibration.json").read_text())
    flat = json.dumps(calibration)
    assert '"simulated": true' in flat and f'"simulated_share": {share}' in flat
    html = (ws.path / "analysis" / "report.html").read_text()
    assert "Simulated answers." in html and f"yes, {100 * share:.0f}% of the answers" in html
    # the workers section counts each exclusion once, by the first reason: traps, straight-lining, attention
    seen = set(w.index)
    counts = (len(by_traps & seen), len((lined - by_traps) & seen), len((failed - by_traps - lined) & seen))
    assert (f"{counts[0]} whose trap answers put their trust below the threshold, {counts[1]} who straight-lined"
            in " ".join(html.split())) and f"and {counts[2]} who failed attention checks" in " ".join(html.split())
    # keep_failed_attention keeps those who failed attention checks but not traps
    ws = _configure(ws, keep_failed_attention=True)
    kept_report = ws.ingest([], platform="serve")
    kw = kept_report.workers.set_index("worker_id")
    assert set(kw.index[kw["excluded"]]) == low & set(kw.index) and not kw.loc["CARELESS", "excluded"]
    # keeping those who failed attention checks does not keep a straight-liner
    assert kw.loc["BOTHBAD", "excluded"] and kw.loc["BOTHBAD", "straight_lining"]
    assert (kw.loc[sorted(failed & set(kw.index)), "attention_failed"] >= 1).all()


# --------------------------------------------------------------------------------------------
# Under load, killed, and on PostgreSQL
# --------------------------------------------------------------------------------------------
def _check_lossless(ws, visits, ids, url=None):
    stored = _stored(ws, url)
    sent = _submitted(list(zip(ids, visits)))
    key = ["worker_id", "item_id"]
    assert not stored.duplicated(key).any()  # nothing doubled
    merged = sent.merge(stored[key + ["answer"]], on=key, how="outer", suffixes=("_sent", "_stored"),
                        indicator=True)
    assert (merged["_merge"] == "both").all()  # nothing lost, nothing invented
    assert (merged["answer_sent"] == merged["answer_stored"]).all()
    return stored


def test_concurrent_participants_lose_and_double_nothing_on_sqlite(served_ws):
    from satcal.serve.client import ServerProcess, drive
    ws = _configure(served_ws, answers_per_example=3)
    ids = [f"C{i:03d}" for i in range(60)]
    with ServerProcess(ws.path) as server:
        visits = drive(server.url, ids, concurrency=30, choose=attentive)
    assert [v.errors for v in visits if v.errors] == []
    _check_lossless(ws, visits, ids)


@pytest.fixture(scope="module")
def postgres_url():
    pytest.importorskip("psycopg")
    from pg import ensure_postgres, temporary_postgres
    reason = ensure_postgres()
    if reason:
        pytest.skip(reason)
    with temporary_postgres() as url:
        yield url


def test_concurrent_participants_on_postgresql_with_two_server_processes(served_ws, postgres_url):
    from satcal.serve.client import ServerProcess, drive
    ids = [f"G{i:03d}" for i in range(60)]
    with ServerProcess(served_ws.path, postgres_url, workers=2) as server:
        visits = drive(server.url, ids, concurrency=30, choose=attentive)
    assert [v.errors for v in visits if v.errors] == []
    stored = _check_lossless(served_ws, visits, ids, postgres_url)
    items = stored[stored["status"] == ""]
    assert items.groupby("item_id").size().max() <= 2  # no slot given twice


def test_same_prolific_id_entering_at_once_is_one_row_on_postgresql(served_ws, postgres_url):
    study = _study(served_ws, postgres_url)
    try:
        assert _enter_at_once(study) == (1, 1)
    finally:
        study.engine.dispose()


def _most_pages_stored(ws) -> int:
    """The most pages any one participant has stored so far."""
    stored = _stored(ws)
    return 0 if stored.empty else int(stored.groupby("worker_id")["page_token"].nunique().max())


def test_sigkill_mid_load_keeps_every_committed_page(served_ws):
    """Participants whose page submission got its redirect (the commit) must find that page
    whole after the server is killed with SIGKILL and restarted; a page is all or nothing."""
    import httpx
    from satcal.serve.client import ServerProcess, drive
    ws = _configure(served_ws, answers_per_example=3, pages_per_participant=4)
    server = ServerProcess(ws.path).start()
    ids = [f"K{i:03d}" for i in range(240)]
    # (240 participants: the server finishes 80 before the poll below sees 400 answers on a quiet machine)
    result = {}
    runner = threading.Thread(target=lambda: result.setdefault("visits", drive(server.url, ids, 20, attentive)))
    runner.start()
    deadline = time.monotonic() + 120  # kill once pages are being committed, mid-load
    while time.monotonic() < deadline and (len(_stored(ws)) < 400 or _most_pages_stored(ws) < 3):
        time.sleep(0.2)  # (a participant with 3 stored pages has 2 the client saw acknowledged)
    server.kill()
    runner.join()
    server.start()  # the same database, after the crash
    try:
        assert httpx.get(server.url + "/static/satcal.css").status_code == 200
    finally:
        server.stop()
    stored = _stored(ws)
    assert not stored.duplicated(["worker_id", "item_id"]).any()
    pages = _pages(ws)
    page_of = {i: p for p, ids_ in pages.items() for i in ids_}
    # committed pages: every page a participant moved past (a later page was served to them)
    visits = result["visits"]
    committed = 0
    for pid, visit in zip(ids, visits):
        tokens = list(visit.submitted)
        for token in tokens[:-1]:  # a page followed by another was acknowledged
            answers = visit.submitted[token]
            got = stored[(stored["worker_id"] == pid) & stored["page_token"].eq(token)]
            assert dict(zip("answer-" + got["item_id"], got["answer"])) == answers
            committed += 1
    assert committed > 0
    assert any(v.errors for v in visits)  # the kill did land mid-load
    # all or nothing: every stored page holds all its items
    items = stored[stored["status"] == ""].assign(page=lambda d: d["item_id"].map(page_of))
    sizes = items.groupby(["page_token", "page"]).size()
    assert all(n == len(pages[p]) for (_, p), n in sizes.items())
    assert np.isfinite(pd.to_numeric(stored["seconds"])).all()


# --------------------------------------------------------------------------------------------
# Hostile and unlucky requests (issues 25 and 26): never a 500, never a traceback, never a
# redirect off the server, never a silent change of participant, busy is not full
# --------------------------------------------------------------------------------------------
TRACEBACK_MARKS = ("Traceback", 'File "', "Error:", "Exception")


def _client(study, **rates):
    """The app in-process (Starlette's TestClient), exceptions turned into responses as a
    real server would send them."""
    from starlette.testclient import TestClient
    from satcal.serve import create_app
    return TestClient(create_app(study, **rates), raise_server_exceptions=False, follow_redirects=False)


def _sound(response):
    """The response is an answer, not a crash: no 5xx, no traceback text."""
    assert response.status_code < 500, (response.request.method, response.request.url, response.text[:300])
    for mark in TRACEBACK_MARKS:
        assert mark not in response.text, (mark, response.request.url)
    return response


def _into_page(http, query):
    """Enter with ``query``, consent, and return the first page's form."""
    from satcal.serve.client import parse_form
    r = _sound(http.get("/?" + query))
    assert r.status_code == 303
    if r.headers["location"] == "/consent":
        form = parse_form(_sound(http.get("/consent")).text)
        r = _sound(http.post("/consent", data={**form.hidden, "consent": "yes"}))
        assert r.headers["location"] == "/page"
    return parse_form(_sound(http.get("/page")).text)


def test_non_ascii_and_malformed_tokens_are_refused_not_crashed(served_ws):
    study = _study(served_ws)
    http = _client(study)
    form = _into_page(http, "participant=tok1")
    wrong = {"ascii": "0" * 64, "non-ascii": "\u00e9" * 64, "latin-1 bytes": b"\xff\xfe".decode("latin-1") * 32}
    for what, token in wrong.items():
        for path in ("/consent", "/page"):
            r = _sound(http.post(path, data={**form.hidden, "csrf": token}))
            assert r.status_code == 403, (what, path)
        assert _sound(http.get("/status/" + token)).status_code == 404, what
    # raw bodies a browser would never send: invalid escapes, bytes that are not UTF-8, NULs
    urlencoded = {"content-type": "application/x-www-form-urlencoded"}
    for body in (b"csrf=%ff%fe&consent=yes", b"csrf=\xff\xfe", b"csrf=%zz&a=%", b"%%%=&&==", b"\x00=\x00"):
        for path in ("/consent", "/page", "/switch"):
            assert _sound(http.post(path, content=body, headers=urlencoded)).status_code == 403, (body, path)
    # the right CSRF token with malformed fields: consent not given (422), a page token that is
    # no page's (the participant moves on to their page, nothing stored), no one to switch to
    body = b"csrf=" + form.hidden["csrf"].encode() + b"&assignment=%00%ff&answer-x=%00&consent=%ff"
    for path, status in (("/consent", 422), ("/page", 303), ("/switch", 400)):
        assert _sound(http.post(path, content=body, headers=urlencoded)).status_code == status, path
    assert _sound(http.get("/status/" + study.status_token)).status_code == 200  # the right one still works
    assert len(_stored(served_ws)) == 0
    # the page a participant is on is unchanged by all of it
    from satcal.serve.client import parse_form
    assert parse_form(_sound(http.get("/page")).text).hidden["assignment"] == form.hidden["assignment"]


def test_redirects_never_follow_the_host_header(served_ws):
    """Every Location the server sends is a path on this server (or Prolific's completion
    URL), whatever Host the request names; a trailing slash is a 404, not a redirect."""
    from satcal.serve.client import Participant
    http = _client(_study(served_ws))
    http.headers["host"] = "evil.example"
    for path in ("/page/", "/consent/", "/done/", "/status/", "/static"):
        r = _sound(http.get(path))
        assert r.status_code == 404 and "location" not in r.headers, path
    locations = []
    http.event_hooks["response"].append(lambda r: locations.append(r.headers.get("location")))
    visit = Participant("http://testserver", http).run("PROLIFIC_PID=host1&STUDY_ID=s&SESSION_ID=s", attentive)
    assert visit.pages == 3 and visit.end_url.endswith(f"cc={CODE}")
    sent = [loc for loc in locations if loc is not None]
    assert len(sent) >= 5
    for loc in sent:
        assert (loc.startswith("/") and not loc.startswith("//")) or \
            loc.startswith("https://app.prolific.com/"), loc


def test_a_thinking_participant_pauses_before_each_submission_only(served_ws, monkeypatch):
    """``think`` (the load benchmark's reading time): one pause of that length right before
    each form the participant submits (consent and three pages, counted from the requests the
    server received), none before a GET."""
    import types

    from satcal.serve import client
    events = []
    monkeypatch.setattr(client, "time", types.SimpleNamespace(
        perf_counter=time.perf_counter, sleep=lambda s: events.append(("think", s))))
    http = _client(_study(served_ws))
    http.event_hooks["request"].append(lambda r: events.append((r.method, r.url.path)))
    visit = client.Participant("http://testserver", http).run("PROLIFIC_PID=think1&STUDY_ID=s&SESSION_ID=s",
                                                              attentive, think=2.5)
    assert visit.pages == 3 and visit.end_url.endswith(f"cc={CODE}")
    posts = [i for i, e in enumerate(events) if e[0] == "POST"]
    thinks = [i for i, e in enumerate(events) if e[0] == "think"]
    assert [events[i][1] for i in posts] == ["/consent", "/page", "/page", "/page"]
    assert thinks == [i - 1 for i in posts] and all(events[i][1] == 2.5 for i in thinks)


def test_a_link_never_swaps_a_running_participant_without_their_confirmation(served_ws):
    from satcal.serve.client import parse_form
    study = _study(served_ws)
    http = _client(study)
    form = _into_page(http, "participant=runner")
    token = form.hidden["assignment"]
    # a third-party link to another participant: a question, not a swap
    r = _sound(http.get("/?participant=intruder"))
    assert r.status_code == 200 and "runner" in r.text and "intruder" in r.text
    assert study.known("lab", "intruder") is None  # nobody created by the link
    assert parse_form(_sound(http.get("/page")).text).hidden["assignment"] == token
    switch = parse_form(r.text)
    assert switch.action == "/switch" and switch.method == "post" and switch.hidden["participant"] == "intruder"
    # a forged confirmation (another site cannot know the token): refused, still the runner
    forged = _sound(http.post("/switch", data={**switch.hidden, "csrf": "f" * 64}))
    assert forged.status_code == 403
    assert parse_form(_sound(http.get("/page")).text).hidden["assignment"] == token
    # a confirmation without the running session's cookie (a cross-site POST): refused
    from starlette.testclient import TestClient
    cookieless = TestClient(http.app, raise_server_exceptions=False, follow_redirects=False)
    assert _sound(cookieless.post("/switch", data=switch.hidden)).status_code == 403
    # the same person's own link resumes without a question
    r = _sound(http.get("/?participant=runner"))
    assert r.status_code == 303 and r.headers["location"] == "/page"
    # confirmed on the page: now the other participant, from their own start
    r = _sound(http.post("/switch", data=switch.hidden))
    assert r.status_code == 303 and r.headers["location"] == "/consent"
    intruder = study.known("lab", "intruder")
    assert intruder is not None and intruder["consented_at"] is None
    # a Prolific link in a browser running a Prolific participant: asked too, with its ids kept
    http2 = _client(study)
    _into_page(http2, "PROLIFIC_PID=pro1&STUDY_ID=s1&SESSION_ID=a")
    r = _sound(http2.get("/?PROLIFIC_PID=pro2&STUDY_ID=s1&SESSION_ID=b"))
    assert r.status_code == 200
    assert parse_form(r.text).hidden == {"csrf": study.csrf_token(study.known("prolific", "pro1")["id"]),
                                         "PROLIFIC_PID": "pro2", "STUDY_ID": "s1", "SESSION_ID": "b"}


def test_a_finished_session_is_replaced_by_a_new_link_without_a_question(served_ws):
    from satcal.serve.client import Participant
    study = _study(served_ws)
    http = _client(study)
    visit = Participant("http://testserver", http).run("participant=early", attentive)
    assert visit.pages == 3 and study.known("lab", "early")["finished_at"] is not None
    r = _sound(http.get("/?participant=late"))
    assert r.status_code == 303 and r.headers["location"] == "/consent"
    assert study.known("lab", "late") is not None


def test_one_prolific_id_is_one_participant_across_study_ids(served_ws):
    """The researcher duplicated the Prolific study: the same person enters under a second
    STUDY_ID. They resume where they were; no page is shown to them twice; and once done,
    the second study gets no completion code for nothing."""
    from satcal.serve.client import Participant, parse_form
    study = _study(served_ws)
    first = _client(study)
    form = _into_page(first, "PROLIFIC_PID=dup1&STUDY_ID=studyA&SESSION_ID=s1")
    answers = {n: v[0] for n, v in form.radios.items()}
    assert _sound(first.post("/page", data={**form.hidden, **answers})).headers["location"] == "/page"
    second_page = parse_form(_sound(first.get("/page")).text).hidden["assignment"]
    # a new browser, the other STUDY_ID: the page they were on, not page 1 again
    second = _client(study)
    r = _sound(second.get("/?PROLIFIC_PID=dup1&STUDY_ID=studyB&SESSION_ID=s2"))
    assert r.headers["location"] == "/page"  # consent was given already
    assert parse_form(_sound(second.get("/page")).text).hidden["assignment"] == second_page
    visit = Participant("http://testserver", second).run("PROLIFIC_PID=dup1&STUDY_ID=studyB&SESSION_ID=s2",
                                                         attentive)
    assert visit.end_url.endswith(f"cc={CODE}")
    stored = _stored(served_ws)
    pages = _pages(served_ws)
    page_of = {i: p for p, ids in pages.items() for i in ids}
    shown = stored.loc[stored["status"] == ""].assign(page=lambda d: d["item_id"].map(page_of))
    assert shown.groupby("page_token")["page"].first().is_unique  # no page twice
    assert shown["page_token"].nunique() == 3 and not stored.duplicated(["worker_id", "item_id"]).any()
    assert set(stored["study_id"]) == {"studyA"}  # one participant, as first entered
    # entering under a third STUDY_ID after finishing: told so, no completion code
    third = _client(study)
    r = _sound(third.get("/?PROLIFIC_PID=dup1&STUDY_ID=studyC&SESSION_ID=s3"))
    assert r.status_code == 200 and "already taken part" in r.text and CODE not in r.text
    assert "location" not in r.headers
    # and the same STUDY_ID again still ends with its completion redirect, as before
    visit = Participant("http://testserver", _client(study)).run("PROLIFIC_PID=dup1&STUDY_ID=studyA&SESSION_ID=s1")
    assert visit.end_url.endswith(f"cc={CODE}") and visit.pages == 0


def _enter_at_once(study):
    """16 threads enter one Prolific id under 4 STUDY_IDs at once: (distinct participant ids
    they were given, participant rows stored for that id)."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda i: study.enter("prolific", "race1", f"st{i % 4}", f"se{i}"), range(16)))
    from sqlalchemy import func, select
    from satcal.serve import db
    p = db.tables()["participants"]
    with study.engine.connect() as conn:
        rows = conn.execute(select(func.count()).select_from(p).where(p.c.external_id == "race1")).scalar_one()
    return len(set(ids)), rows


def test_same_prolific_id_entering_under_two_study_ids_at_once_is_one_row(served_ws):
    assert _enter_at_once(_study(served_ws)) == (1, 1)


def test_a_busy_study_asks_newcomers_to_come_back_and_full_is_only_when_answered(served_ws, monkeypatch):
    import satcal.serve.study as study_module
    from satcal.serve.client import parse_form
    ws = _configure(served_ws, answers_per_example=1, pages_per_participant=1, attention_checks=0,
                    assignment_timeout_minutes=2)
    study = _study(ws)
    start = float(int(time.time()))
    clock = [start]
    monkeypatch.setattr(study_module.time, "time", lambda: clock[0])
    holders = {pid: study.next_page(pid) for pid in (study.enter("lab", f"h{i}") for i in range(len(study.pages)))}
    clock[0] += 30  # every slot held, none answered; the first frees at start + 2 minutes
    http = _client(study)
    r = _sound(http.get("/?participant=newcomer"))
    form = parse_form(_sound(http.get("/consent")).text)
    r = _sound(http.post("/consent", data={**form.hidden, "consent": "yes"}))
    r = _sound(http.get("/page"))
    assert r.headers["location"] == "/done"
    r = _sound(http.get("/done"))
    frees = time.strftime("%H:%M", time.gmtime(start + 120))
    assert r.status_code == 200 and f"after {frees} UTC" in r.text and "in about 2 minutes" in r.text
    assert "answered already" not in r.text
    assert study.progress()["participants"] == {"in progress": len(study.pages), "waiting": 1}
    assert study.known("lab", "newcomer")["finished_at"] is None
    # the slot times out: the newcomer, reloading, gets that page and is in progress again
    clock[0] = start + 121
    r = _sound(http.get("/done"))
    assert r.headers["location"] == "/page"
    page = parse_form(_sound(http.get("/page")).text)
    assert study.progress()["participants"] == {"in progress": len(study.pages) + 1}
    answers = {n: v[0] for n, v in page.radios.items()}
    assert _sound(http.post("/page", data={**page.hidden, **answers})).headers["location"] == "/page"
    # the holders answer too (the abandoner's late page is kept as an extra answer)
    for pid, view in holders.items():
        assert study.submit(pid, view.token, {f"answer-{i['item_id']}": "both_bad" for i in view.items}) == "stored"
    assert study.progress()["slots_done"] == len(study.pages)
    # now every slot is answered: full, and recorded so
    late = _client(study)
    _sound(late.get("/?participant=latecomer"))
    form = parse_form(_sound(late.get("/consent")).text)
    _sound(late.post("/consent", data={**form.hidden, "consent": "yes"}))
    r = _sound(late.get("/done"))
    assert "answered already" in r.text and study.known("lab", "latecomer")["outcome"] == "full"


def test_fuzzed_requests_get_no_500_and_no_traceback(served_ws):
    """Seeded random bytes in paths, tokens, query strings, form fields, bodies, content types,
    cookies and Host headers, anonymous and inside a running participant's session (whose
    right CSRF token lets the noise reach the study's own logic); bounded in count and time."""
    from collections import Counter
    from urllib.parse import quote, quote_from_bytes
    from satcal.serve.client import parse_form
    study = _study(served_ws)
    rates = dict(participant_rate="100000/minute", entry_rate="100000/minute")
    http = _client(study, **rates)
    form = _into_page(http, "participant=fuzz")
    session = http.cookies["satcal_session"]
    anonymous = _client(study, **rates)
    rng = np.random.default_rng(20261124)
    alphabet = np.frombuffer(b"%&=+;/?#\\.\x00\xff\xfe\xc3\xa9 abcAZ09_-", dtype=np.uint8)

    def noise(n):
        """n random bytes: from the whole byte range, or from the characters that matter."""
        pool = rng.integers(0, 256, n, dtype=np.uint8) if rng.random() < 0.5 else rng.choice(alphabet, n)
        return pool.tobytes()

    def pick(options, weights=None):
        return options[rng.choice(len(options), p=weights)]

    forms = ["/consent", "/page", "/switch", "/"]
    fields = ["csrf", "consent", "assignment", "participant", "PROLIFIC_PID", "STUDY_ID", "SESSION_ID"]
    types = ["application/x-www-form-urlencoded", "multipart/form-data; boundary=xyz", "multipart/form-data",
             "application/json", "text/plain; charset=utf-8"]
    seen, deadline = Counter(), time.monotonic() + 20
    for i in range(500):
        if time.monotonic() > deadline:
            break
        if i % 25 == 0:  # keep to the page the participant is on, so the noise meets a live page
            form = parse_form(_sound(http.get("/page")).text) or form
        client = http if rng.random() < 0.75 else anonymous
        method = pick(["GET", "POST", "PUT", "HEAD"], [0.35, 0.55, 0.05, 0.05])
        path, where = pick(forms + ["/done", "/status/" + study.status_token]), rng.random()
        if where < 0.15:
            path = "/status/" + quote_from_bytes(noise(int(rng.integers(1, 40))), safe="")
        elif where < 0.25:
            path += "/"
        elif where < 0.35:
            path = path.rstrip("/") + "/" + quote_from_bytes(noise(int(rng.integers(1, 20))), safe="")
        query = "&".join(f"{pick(fields + ['x'])}={quote_from_bytes(noise(int(rng.integers(0, 30))))}"
                         for _ in range(int(rng.integers(0, 4))))
        headers = {"content-type": pick(types, [0.7, 0.1, 0.05, 0.1, 0.05])}
        if rng.random() < 0.6:  # the participant's own form with one field made of noise
            data = {**form.hidden, "consent": "yes", "participant": "fuzz",
                    **{n: v[0] for n, v in form.radios.items()}}
            data[pick(fields + list(form.radios), None)] = noise(int(rng.integers(0, 70))).decode("latin-1")
            body = "&".join(f"{quote(k)}={quote(v, encoding='latin-1')}" for k, v in data.items()).encode()
            headers["content-type"] = "application/x-www-form-urlencoded"
        else:
            body = noise(int(rng.integers(0, 300)))
        if rng.random() < 0.2:
            headers["host"] = noise(int(rng.integers(1, 20))).translate(None, b"\r\n\x00") or b"x"
        if rng.random() < 0.1:  # a tampered or foreign session cookie
            headers["cookie"] = "satcal_session=" + pick([noise(40).hex(), session[:-6] + "AAAAAA"])
        r = _sound(client.request(method, path + ("?" + query if query else ""), headers=headers,
                                  content=body if method in ("POST", "PUT") else None))
        location = r.headers.get("location", "/")
        assert (location.startswith("/") and not location.startswith("//")) or \
            location.startswith("https://app.prolific.com/"), location
        http.cookies.set("satcal_session", session)  # a switch confirmed by noise: back to the fuzzer
        seen[(method, r.status_code)] += 1
    assert sum(seen.values()) > 50
    # the noise met the study's logic, not only the doors: stored pages and refused forms both
    assert seen[("POST", 303)] > 0 and seen[("POST", 403)] > 0 and seen[("POST", 422)] > 0
    stored = _stored(served_ws)
    assert len(stored) > 0 and stored["answer"].isin(["a_better", "b_better", "both_good", "both_bad"]).all()
    assert not stored.duplicated(["worker_id", "item_id"]).any()


def test_a_running_server_keeps_its_key(served_ws):
    """While satcal serve runs on a study, nothing may replace the key its participants answer
    (their answers would be orphaned): export --force with a changed presentation, generate
    --force and init --force are refused, naming the process; once the server has stopped (or
    was killed), the marker no longer counts."""
    import re
    from click.testing import CliRunner
    from satcal.cli import main
    from satcal.serve.client import ServerProcess
    from satcal.workspace import running_server
    toml = served_ws.path / "study.toml"
    key = (served_ws.path / "key.csv").read_bytes()
    per_page = int(served_ws.table("key.csv").groupby("page").size().max())
    toml.write_text(re.sub(r"(?m)^items_per_page = .*$", f"items_per_page = {per_page + 2}", toml.read_text()))
    runner = CliRunner()
    server = ServerProcess(served_ws.path).start()
    try:
        live = running_server(served_ws.path)
        assert live is not None and live["pid"] == server.process.pid
        for args in (["export", str(served_ws.path), "--force"], ["generate", str(served_ws.path), "--force"],
                     ["init", str(served_ws.path), "--judgments", str(served_ws.path / served_ws["study.judgments"]),
                      "--force"]):
            res = runner.invoke(main, args)
            assert res.exit_code == 2, res.output
            assert f"satcal serve is running on {served_ws.path} (process {server.process.pid}" in res.output
        assert (served_ws.path / "key.csv").read_bytes() == key
    finally:
        server.kill()   # as a crash would: the marker stays but its process is gone
    assert running_server(served_ws.path) is None
    res = runner.invoke(main, ["export", str(served_ws.path), "--force"])
    assert res.exit_code == 0, res.output
    # the old (empty) database stays bound to the replaced key: the new key gets a database of its own
    with ServerProcess(served_ws.path, db_url=f"sqlite:///{served_ws.path / 'second.db'}"):
        assert running_server(served_ws.path) is not None
    # stopped (SIGTERM: uvicorn shuts down, then ends by the signal): no server counts as running
    assert running_server(served_ws.path) is None


def test_answer_controls_rendered_at_start_equal_the_templates_rendering(served_ws):
    """The answer controls the server rendered once at start (nothing chosen), and those it
    renders for a page sent back with answers chosen, equal Jinja2's rendering of the item
    template's ``options`` macro for the same item, byte for byte."""
    from markupsafe import Markup
    from satcal.platforms import ANSWER_LABELS, template_environment
    from satcal.serve.routes import StudyRoutes
    study = _study(served_ws)
    routes = StudyRoutes(study)
    macro = template_environment().get_template("_item.html").module.options
    items = [it for page in study.pages.values() for it in page]
    for it in items:
        assert routes.options_html(it) == Markup(macro(it, ANSWER_LABELS, required=True, chosen={}))
        chosen = {f"answer-{it['item_id']}": "b_better"}
        got = routes.options_html(it, chosen)
        assert got == Markup(macro(it, ANSWER_LABELS, required=True, chosen=chosen)) and got.count(" checked") == 1
    study.engine.dispose()


def test_a_claim_that_fails_never_fails_the_submission_it_rides_on(served_ws, monkeypatch):
    """The next page's claim rides on a page's submission; when its insert fails (forced here:
    the new assignment's token collides with an existing one) the submission is stored all
    the same, every answer of it counted in the database, nothing is claimed, and showing the
    next page claims it as before."""
    from sqlalchemy import func, select
    from satcal.serve import db
    from satcal.serve import study as study_module
    study = _study(served_ws)
    pid = study.enter("lab", "collide")
    study.consent(pid)
    view = study.next_page(pid)
    real = study_module.secrets.token_hex
    monkeypatch.setattr(study_module.secrets, "token_hex", lambda n=None: view.token if n == 16 else real(n))
    answers = {f"answer-{it['item_id']}": it.get("expected", "both_bad") for it in view.items}
    assert study.submit(pid, view.token, answers, claim_next=True) == "stored"
    monkeypatch.undo()
    t = db.tables()
    r, a = t["responses"], t["assignments"]
    with study.engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(r.join(a, r.c.assignment_id == a.c.id))
                              .where(a.c.token == view.token)).scalar_one()
        claimed = conn.execute(select(func.count()).select_from(a).where(a.c.participant_id == pid)).scalar_one()
    assert stored == len(view.items) and claimed == 1
    second = study.next_page(pid)
    assert second is not None and second.position == 2 and second.token != view.token
    study.engine.dispose()


def _one_read_equals_two(study):
    """participant_and_assignments (one statement) against the participant's row and their
    assignments read by SQLAlchemy's own queries: a newcomer, one with a page stored and the
    next claimed, and an id no one has; returns (one read, SQLAlchemy's) per participant."""
    from sqlalchemy import select

    from satcal.serve import db
    t = db.tables()
    p, a = t["participants"], t["assignments"]

    def by_sqlalchemy(pid):
        with study.engine.connect() as conn:
            person = conn.execute(select(p).where(p.c.id == pid)).mappings().first()
            mine = conn.execute(select(a).where(a.c.participant_id == pid).order_by(a.c.position)).mappings().all()
        person = None if person is None else {k: (bool(v) if k == "simulated" else v) for k, v in person.items()}
        return person, [dict(r) for r in mine]

    newcomer = study.enter("prolific", "ONEREAD1", "S1", "X1", simulated=True)
    assert study.participant_and_assignments(newcomer) == by_sqlalchemy(newcomer)
    assert study.participant_and_assignments(newcomer)[1] == []
    busy = study.enter("prolific", "ONEREAD2", "S1", "X2")
    study.consent(busy, claim_first=True)
    view = study.next_page(busy)
    from satcal.serve.study import SHOWN_CODES
    form = {f"answer-{it['item_id']}": it.get("expected", SHOWN_CODES[0]) for it in view.items}
    assert study.submit(busy, view.token, form, claim_next=True,
                        mine=study.participant_and_assignments(busy)[1]) == "stored"
    person, mine = study.participant_and_assignments(busy)
    assert (person, mine) == by_sqlalchemy(busy)
    assert [r["position"] for r in mine] == [0, 1] and mine[0]["submitted_at"] is not None
    assert mine[1]["submitted_at"] is None and person["simulated"] is False
    assert study.next_page(busy, mine) == study.next_page(busy)  # the open page, from the rows given or read
    assert study.participant_and_assignments(10 ** 9) == (None, []) == (by_sqlalchemy(10 ** 9)[0], [])
    # what the caller states again: each participant's one read beside SQLAlchemy's two
    return [(study.participant_and_assignments(pid), by_sqlalchemy(pid)) for pid in (newcomer, busy, 10 ** 9)]


def test_a_page_requests_one_read_equals_the_two_it_replaces(served_ws):
    study = _study(served_ws)
    try:
        reads = _one_read_equals_two(study)
    finally:
        study.engine.dispose()
    assert len(reads) == 3 and all(one == two for one, two in reads)


def test_a_page_requests_one_read_equals_the_two_it_replaces_on_postgresql(served_ws, postgres_url):
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    # a database of its own on the module's server: earlier tests filled the shared one's slots
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("CREATE DATABASE satcal_oneread"))
    admin.dispose()
    study = _study(served_ws, make_url(postgres_url).set(database="satcal_oneread").render_as_string(False))
    try:
        reads = _one_read_equals_two(study)
    finally:
        study.engine.dispose()
    assert len(reads) == 3 and all(one == two for one, two in reads)
