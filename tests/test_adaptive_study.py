"""Adaptive studies in the workspace: study.toml's keys, the waves of export --next-batch, the
hosted study's page order and stop, and the stopping rule's record in calibration.json.

The plumbing takes the criterion and the stopping rule as arguments; these tests pass small
real ones of their own (a priority that prefers named examples, a rule that settles at a
number of answers), and check what the plumbing does with them against the workspace's own
files (keys, answers, the database)."""
import re
import shutil
import tomllib
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import pytest

from satcal.errors import SatcalError


# --------------------------------------------------------------------------------------------
# A small, real stopping rule and criteria the tests drive the plumbing with
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """The shape of the stopping rule's result: what the plumbing reads of it."""
    settled: bool
    leaders: list = field(default_factory=list)
    confidence: float = 0.95
    looks: int = 1
    alpha_spent: float = 0.0
    n_answers: int = 0
    reason: str = ""

    def summary(self) -> str:
        return f"{'settled' if self.settled else 'not settled'}: {', '.join(self.leaders)} ({self.n_answers} answers)"

    def to_dict(self) -> dict:
        return asdict(self)


def settle_at(n: int, calls: list | None = None):
    """A rule that settles once the fitted result holds ``n`` answers, naming the formulation
    ranked first; it records the look and the planned looks it was asked at (and in
    ``settle.asked`` the margin and whether it got the answers)."""
    def settle(result, *, confidence=0.95, top_m=1, look=1, max_looks=10, information=None, margin=None,
               study=None):
        settle.asked.append((margin, None if study is None else len(study.examples)))
        answers = int(result.meta["n_examples"])
        if calls is not None:
            calls.append((answers, look, max_looks, confidence, top_m))
        leaders = list(result.ranking["formulation"].head(top_m))
        return Verdict(answers >= n, leaders, confidence, look, 0.05 * look / max_looks, answers,
                       "enough answers" if answers >= n else "too few answers")
    settle.asked = []
    return settle


def prefer(ids):
    """A wave planner that asks the examples of ``ids`` first (in that order), then the rest by
    example id; it never asks one of ``exclude``."""
    def plan_wave(pool, study, formulations, n, *, seed, min_depth=0, exclude=()):
        rest = pool[~pool["example_id"].isin(set(exclude))]
        rank = {e: i for i, e in enumerate(ids)}
        order = rest.assign(priority=[-rank.get(e, len(ids)) for e in rest["example_id"]]).sort_values(
            ["priority", "example_id"], ascending=[False, True], kind="stable")
        return order.head(n).reset_index(drop=True)
    return plan_wave


@pytest.fixture(autouse=True)
def quick_fit(request, monkeypatch):
    """The rules these tests pass read no bootstrap replicates: the fit between waves skips the
    bootstrap (the end-to-end test with the real rule keeps it)."""
    if "end_to_end" not in request.node.name:
        import satcal.adaptive_study as adaptive_study
        monkeypatch.setattr(adaptive_study, "SETTLE_FIT", {**adaptive_study.SETTLE_FIT, "bootstrap": 0})


def _simulate(ws):
    """The simulated crowd's result file for the current batch (the study's own method where it
    has one)."""
    if hasattr(ws, "simulate"):
        return ws.simulate("csv", force=True)
    from satcal.simulate import simulate_workspace
    with ws.locked():
        return simulate_workspace(ws, "csv", force=True)


def _ingest(ws, path):
    if hasattr(ws, "ingest"):
        return ws.ingest([path], "csv")
    from satcal.ingest import ingest
    return ingest(ws, [path], "csv")


def _hosted(ws):
    """The hosted study of the workspace's current batch, in this process."""
    if hasattr(ws, "hosted_study"):
        return ws.hosted_study()
    from satcal.serve import HostedStudy
    return HostedStudy.from_workspace(ws)


def _answered(ws):
    """The study's analysable answers (StudyData), as analyze reads them."""
    if hasattr(ws, "study_data"):
        return ws.study_data()
    from satcal.ingest import study_from_workspace
    return study_from_workspace(ws)


def _set(ws, **values):
    """Rewrite keys of study.toml (each once in the file) and reopen the workspace."""
    from satcal.workspace import Workspace
    text = (ws.path / "study.toml").read_text()
    for name, value in values.items():
        rendered = (f'"{value}"' if isinstance(value, str) else str(value).lower() if isinstance(value, bool)
                    else str(value))
        text, n = re.subn(rf"(?m)^{name} = .*$", f"{name} = {rendered}", text)
        assert n == 1, name
    (ws.path / "study.toml").write_text(text)
    return Workspace.open(ws.path)


@pytest.fixture(scope="module")
def generated(tmp_path_factory, ecir_study):
    """A small generated study (not exported) on the embedded judgments."""
    from satcal.workspace import Workspace
    d = tmp_path_factory.mktemp("adaptive")
    ecir_study.judgments.table.to_csv(d / "qrels.tsv", sep="\t", index=False)
    ws = Workspace.init(d / "study", d / "qrels.tsv", min_per_cell=3, platform="csv")
    ws.generate()
    return ws


@pytest.fixture
def adaptive_ws(generated, tmp_path):
    """A copy made adaptive, whose pool is the generated examples (pool.csv as generate writes
    it for an adaptive study: the rows of examples.csv)."""
    from satcal.workspace import Workspace
    shutil.copytree(generated.path, tmp_path / "study")
    ws = Workspace.open(tmp_path / "study")
    shutil.copyfile(ws.file("examples.csv"), ws.file("pool.csv"))
    return _set(ws, adaptive=True, wave_pages=4, items_per_page=5)


def _keys_of(ws):
    return {int(p.stem.split("-")[1]): pd.read_csv(p, dtype=str, keep_default_na=False)
            for p in sorted((ws.path / "batches" / "keys").glob("batch-*.csv"))}


# --------------------------------------------------------------------------------------------
# study.toml
# --------------------------------------------------------------------------------------------
def test_template_carries_the_adaptive_keys_off_by_default(generated):
    config = tomllib.loads((generated.path / "study.toml").read_text())
    assert config["design"]["adaptive"] is False
    assert config["design"]["wave_pages"] == 10
    assert {"confidence", "top_m", "min_depth", "budget", "budget_unit", "pool_size"} <= set(config["design"])
    assert config["design"]["cell_cap"] == 0.25
    assert config["serve"]["refit_seconds"] == 5


def test_a_study_toml_from_before_the_keys_gets_their_defaults(generated, tmp_path):
    from satcal.workspace import validate_config
    config = tomllib.loads((generated.path / "study.toml").read_text())
    for name in ("adaptive", "wave_pages", "confidence", "top_m", "min_depth", "cell_cap", "budget", "budget_unit",
                 "pool_size"):
        del config["design"][name]
    del config["serve"]["refit_seconds"]
    out = validate_config(config, tmp_path / "study.toml")
    assert (out["design"]["adaptive"], out["design"]["wave_pages"], out["design"]["budget_unit"]) == (False, 10, "answers")
    assert out["design"]["cell_cap"] == 0.25


@pytest.mark.parametrize("name, value, expected", [
    ("adaptive", '"yes"', "design.adaptive = 'yes': expected true or false"),
    ("wave_pages", "0", "design.wave_pages = 0: expected an integer from 1 to 100,000"),
    ("confidence", "1.0", "design.confidence = 1.0: expected a probability in [0.5, 1)"),
    ("top_m", "0", "design.top_m = 0: expected an integer from 1 to 1,000"),
    ("budget", "-5", "design.budget = -5: expected an integer >= 0 (0: no budget)"),
    ("cell_cap", "0", "design.cell_cap = 0: expected a number in (0, 1] (1: no cap)"),
    ("cell_cap", "1.5", "design.cell_cap = 1.5: expected a number in (0, 1] (1: no cap)"),
    ("budget_unit", '"euros"', "design.budget_unit = 'euros': expected \"answers\" or \"pages\""),
    ("refit_seconds", "0", "serve.refit_seconds = 0: expected seconds from 0.1 to 3600"),
])
def test_bad_adaptive_values_get_one_line(generated, tmp_path, name, value, expected):
    from satcal.workspace import Workspace
    shutil.copytree(generated.path, tmp_path / "study")
    path = tmp_path / "study" / "study.toml"
    text, n = re.subn(rf"(?m)^{name} = .*$", f"{name} = {value}", path.read_text())
    assert n == 1
    path.write_text(text)
    with pytest.raises(SatcalError) as err:
        Workspace.open(tmp_path / "study")
    assert str(err.value) == f"{path}: {expected}"


# --------------------------------------------------------------------------------------------
# export --next-batch
# --------------------------------------------------------------------------------------------
def test_next_batch_refuses_a_fixed_study(generated):
    from click.testing import CliRunner
    from satcal.cli import main
    r = CliRunner().invoke(main, ["export", str(generated.path), "--next-batch"])
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [f"satcal: error: {generated.path}/study.toml: design.adaptive = false; export "
                                             "--next-batch needs an adaptive study (set [design] adaptive = true, "
                                             "then satcal generate DIR --force)"]


def test_next_batch_without_a_pool_says_to_generate(adaptive_ws):
    from satcal.adaptive_study import export_next
    ws = adaptive_ws
    ws.file("pool.csv").unlink()
    with pytest.raises(SatcalError) as err:
        export_next(ws, "csv", plan_wave=prefer([]))
    assert str(err.value) == (f"{ws.path}/pool.csv is missing: an adaptive study draws its waves from the pool "
                              f"that satcal generate writes; run satcal generate {ws.path} --force")
    pool = ws.table("examples.csv").head(3).assign(example_id=["zz1", "zz2", "zz3"])
    pool.to_csv(ws.file("pool.csv"), index=False)  # a pool of another generate
    with pytest.raises(SatcalError, match="example 'zz1' is not in examples.csv"):
        export_next(ws, "csv", plan_wave=prefer([]))


def test_waves_ask_the_planners_choice_never_twice_and_every_answer_resolves(adaptive_ws):
    from satcal.adaptive_study import export_next
    ws = adaptive_ws
    examples = ws.table("examples.csv")
    n_traps = len(ws.table("traps.csv"))
    wanted = list(examples["example_id"].iloc[::-1])  # the planner's order: last examples first
    from satcal.errors import SatcalWarning
    from satcal.quality import _chance, trap_exclusion, traps_needed
    # 4 pages of 5 items; traps: the trap rule's count (as the hosted study's "auto" and the
    # platforms' test questions), at most half the wave, at least quality.min_traps
    chance, threshold, power = _chance(ws.table("traps.csv")), ws["quality.trust_threshold"], ws["quality.trap_power"]
    needed = traps_needed(chance, threshold, power)
    traps = min(n_traps, 19, max(ws["quality.min_traps"], min(needed, 10)))
    assert needed > traps == 10  # the embedded judgments' 20 traps of chance 1/4 ask 19: the wave is short
    calls, rows = [], 0
    for wave in (1, 2, 3):
        with pytest.warns(SatcalWarning) as caught:
            export_next(ws, "csv", plan_wave=prefer(wanted), settle=settle_at(10 ** 6, calls))
        short = [str(w.message) for w in caught if "trap rule's" in str(w.message) and "wave" in str(w.message)]
        assert short == [f"{ws.path}: the wave holds 10 traps, not the trap rule's {needed}: a wave of 20 items "
                         "keeps at least half for examples, so a worker answering at random is excluded by the "
                         f"traps alone with probability {trap_exclusion(chance, threshold, 10):.3f}, not "
                         f"quality.trap_power = {power:g}; raise [design] wave_pages to {-(-2 * needed // 5)}"]
        path, _ = _simulate(ws)
        rows += len(pd.read_csv(path, dtype=str))
        _ingest(ws, path)
    keys = _keys_of(ws)
    assert sorted(keys) == [1, 2, 3]
    asked = []
    for batch, key in keys.items():
        assert len(key) == 20 and key["page"].astype(int).max() == 4
        real = key.loc[key["is_trap"] == "False", "source_id"].tolist()
        assert len(real) == 20 - traps
        asked += real
    # the planner's order, wave after wave, and no example asked twice
    for batch, key in keys.items():
        real = set(key.loc[key["is_trap"] == "False", "source_id"])
        assert real == set(wanted[(batch - 1) * (20 - traps): batch * (20 - traps)])
    assert len(set(asked)) == len(asked)
    # every simulated row of every wave is kept or rejected for what the worker did, never for
    # an item id no key knows, and each kept answer resolves to its wave key's example
    answers, rejects = ws.table("answers.csv"), ws.table("rejects.csv")
    assert len(answers) + len(rejects) == rows
    assert not rejects["reason"].str.startswith("unknown").any()
    assert set(rejects["reason"].str.split(":").str[0].str.split(" of ").str[0]) <= {
        "duplicate", "excluded worker", "conflicting duplicate"}
    every = pd.concat(keys.values()).set_index("item_id")
    assert (answers["example_id"] == answers["item_id"].map(every["source_id"])).all()
    assert set(answers.loc[answers["is_trap"] == "False", "example_id"]) <= set(asked)
    # the stopping rule was asked after each answered wave, at looks counted by answers
    wave_answers = 20 - traps
    assert [(a, look) for a, look, *_ in calls] == [(a, int(np.ceil(a / wave_answers))) for a, *_ in calls]
    assert len(calls) == 2 and calls[1][0] > calls[0][0]


def test_a_toloka_wave_short_of_the_trap_count_names_the_wave_pages_that_hold_it(adaptive_ws):
    """export --next-batch to Toloka with a wave too short for the trap rule's count: the
    settings line names the exact key and value ([design] wave_pages = P), and a wave of P pages
    does hold the count (counted in its key)."""
    import warnings
    from satcal.adaptive_study import export_next
    from satcal.pipeline import export_text
    from satcal.quality import _chance, traps_needed
    ws = adaptive_ws
    wanted = list(ws.table("examples.csv")["example_id"])
    def wave_traps(ws):
        key = ws.table("key.csv")
        return key[key["is_trap"].astype(str) == "True"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        paths = export_next(ws, "toloka", plan_wave=prefer(wanted))
    traps = wave_traps(ws)
    needed = max(traps_needed(_chance(traps), ws["quality.trust_threshold"], ws["quality.trap_power"]),
                 ws["quality.min_traps"])
    assert len(traps) < needed <= len(ws.table("traps.csv"))
    pages = -(-2 * needed // 5)   # 5 items a page; a wave keeps half of its items for examples
    said, _ = export_text(ws, paths, "toloka", True)
    assert (f"the batch holds {len(traps)} traps, fewer than the trap rule's {needed}: a worker meets at most "
            f"{len(traps)}; set [design] wave_pages = {pages} (a wave keeps at least half of its items for "
            "examples) for the next waves") in said
    ws = _set(ws, wave_pages=pages)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_next(ws, "toloka", plan_wave=prefer(wanted))
    assert len(wave_traps(ws)) >= needed


def test_a_served_waves_pages_leave_room_for_the_traps_shown_on_top(adaptive_ws):
    """export --next-batch for satcal serve under items_per_page = "auto" with traps_on_top: a
    page's own items and the traps shown on top of it fit the page's reading-load budget,
    worked out by hand from the participant's trap count (serve.study.participant_traps) and
    the page heights; the reading load alone (the old size) would not leave that room."""
    import warnings
    from satcal.adaptive_study import _visible_sample, export_next
    from satcal.platforms.serve import ITEM_FRAME_PX, PAGE_BUDGET_PX, auto_items_per_page
    from satcal.quality import _chance
    from satcal.serve.study import participant_traps
    ws = _set(adaptive_ws, items_per_page="auto", platform="serve", pages_per_participant=1)
    assert ws["serve.traps_on_top"] and ws["serve.attention_checks"] == 2
    wanted = list(ws.table("examples.csv")["example_id"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_next(ws, "serve", plan_wave=prefer(wanted))
    key = ws.table("key.csv")
    per_page = int(key.groupby("page").size().max())
    trap = key["is_trap"].astype(str) == "True"
    visible = _visible_sample(ws, ws.table("pool.csv"))
    fit = auto_items_per_page(visible, ws.k, budget_px=PAGE_BUDGET_PX - ITEM_FRAME_PX, reserve=0)  # a check's room
    pages = ws["serve.pages_per_participant"]
    def on_top(n):
        met = participant_traps(_chance(key[trap]), n * pages, pages, "auto", ws["quality.trust_threshold"],
                                ws["quality.trap_power"], ws["quality.min_traps"])[0]
        return -(-max(0.0, met - n * pages * trap.sum() / len(key)) // pages)
    assert per_page + on_top(per_page) <= fit
    old = auto_items_per_page(visible, ws.k)
    assert old > per_page and old + on_top(old) > fit


def test_next_batch_refuses_once_settled_or_at_the_budget(adaptive_ws):
    from satcal.adaptive_study import export_next
    ws = adaptive_ws
    plan = prefer([])
    export_next(ws, "csv", plan_wave=plan)
    path, _ = _simulate(ws)
    _ingest(ws, path)
    n = int((ws.table("answers.csv")["is_trap"] == "False").sum())
    with pytest.raises(SatcalError) as err:
        export_next(ws, "csv", plan_wave=plan, settle=settle_at(n))
    assert f"{ws.path}: the study is settled: " in str(err.value) and "\n" not in str(err.value)
    assert sorted(_keys_of(ws)) == [1]  # nothing written
    ws = _set(ws, budget=n)
    with pytest.raises(SatcalError) as err:
        export_next(ws, "csv", plan_wave=plan, settle=settle_at(10 ** 6))
    assert str(err.value) == (f"{ws.path}: the study has {n} answers, its budget is {n} (design.budget): no "
                              f"further wave. Analyse it: satcal analyze {ws.path}")


def test_the_last_wave_asks_only_what_the_budget_leaves(adaptive_ws):
    from satcal.adaptive_study import export_next
    ws = _set(adaptive_ws, budget=20)
    export_next(ws, "csv", plan_wave=prefer([]))
    first = _keys_of(ws)[1]
    asked = int((first["is_trap"] == "False").sum())
    assert asked < 20
    export_next(ws, "csv", plan_wave=prefer([]))
    second = _keys_of(ws)[2]
    assert int((second["is_trap"] == "False").sum()) == 20 - asked
    with pytest.raises(SatcalError, match="the waves exported already ask for 20 answers, the budget is 20"):
        export_next(ws, "csv", plan_wave=prefer([]))


# --------------------------------------------------------------------------------------------
# serve
# --------------------------------------------------------------------------------------------
@pytest.fixture
def served_adaptive(adaptive_ws):
    ws = _set(adaptive_ws, platform="serve", pages_per_participant=1, attention_checks=0,
              traps_on_top=False)
    ws.export("serve")
    return ws


def _participant(http, code):
    from satcal.serve.client import parse_form
    r = http.get(f"/?participant={code}")
    assert r.status_code == 303
    if r.headers["location"] == "/consent":
        form = parse_form(http.get("/consent").text)
        http.post("/consent", data={**form.hidden, "consent": "yes"})
    return http.get("/page")


def _client(study):
    from starlette.testclient import TestClient
    from satcal.serve import create_app
    return TestClient(create_app(study), raise_server_exceptions=False, follow_redirects=False)


def _page_of(ws, response):
    """The batch page a participant's page shows (by its items' ids in the key)."""
    key = ws.table("key.csv").set_index("item_id")
    shown = set(re.findall(r'name="answer-([0-9A-Za-z_-]+)"', response.text))
    pages = set(key.loc[sorted(shown & set(key.index)), "page"].astype(int))
    assert len(pages) == 1, pages
    return pages.pop()


def varied(form) -> dict:
    """A participant who answers the i-th item of a page with the (i mod 4)-th option, so the
    answers hold every code (a fit needs both-good and both-bad answers)."""
    return {name: values[i % len(values)] for i, (name, values) in enumerate(sorted(form.radios.items()))}


def _take_part(http, code, study, ws):
    """A participant's way through every page they get (a refit after each, as the background
    thread would make); the batch pages they were shown, in order."""
    from satcal.serve.client import parse_form
    r = _participant(http, code)
    shown = []
    while r.status_code == 200 and "name=\"assignment\"" in r.text:
        shown.append(_page_of(ws, r))
        form = parse_form(r.text)
        assert http.post("/page", data={**form.hidden, **varied(form)}).status_code == 303
        study.order.refresh()
        r = http.get("/page")
    return shown


def settle_at_look(first: int, calls: list):
    """A rule that settles from look ``first`` on, naming the formulation ranked first."""
    def settle(result, *, confidence=0.95, top_m=1, look=1, max_looks=10, information=None, margin=None,
               study=None):
        calls.append((int(result.meta["n_examples"]), look))
        return Verdict(look >= first, list(result.ranking["formulation"].head(top_m)), confidence, look, 0.01,
                       int(result.meta["n_examples"]), f"look {look}")
    return settle


def test_serve_hands_out_pages_in_the_criterions_order_and_stops_when_settled(served_adaptive):
    from satcal.adaptive_study import attach, budget
    from satcal.serve import db
    ws = _set(served_adaptive, pages_per_participant=2, trust_threshold=0)
    key = ws.table("key.csv")
    real = key[key["is_trap"] == "False"].assign(p=lambda d: d["page"].astype(int))
    # the criterion: the examples of the highest-numbered pages first
    order = real.sort_values("p", ascending=False, kind="stable")["source_id"].tolist()
    def priorities(pool, study, formulations, *, seed, min_depth=0):
        return pd.Series({e: -float(order.index(e)) for e in pool["example_id"]})
    pages = sorted(real["p"].unique(), reverse=True)
    # the mean priority of a page's examples ranks the pages: here, highest page number first
    means = real.assign(pr=[-float(order.index(e)) for e in real["source_id"]]).groupby("p")["pr"].mean()
    assert list(means.sort_values(ascending=False).index) == pages
    # a wave's worth of answers: wave_pages (4) pages of the batch's examples per page
    wave = budget(ws).wave_answers
    assert wave == pytest.approx(4 * len(real) / len(pages))
    calls = []
    study = _hosted(ws)
    assert attach(ws, study, priorities=priorities, settle=settle_at_look(1, calls))
    study.order.refresh()  # the first refit, as the server's start makes it
    assert not study.closed()
    seen = []
    for i in range(len(pages)):
        seen.append(_take_part(_client(study), f"p{i}", study, ws))
        if study.closed():
            break
    shown = [p for pages_of in seen for p in pages_of]
    assert shown == pages[:len(shown)]  # the criterion's order, across participants
    # the rule was asked once, when the first wave's worth of answers was in, and it settled
    answered = int(real["p"].isin(shown).sum())
    before = int(real["p"].isin(shown[:-1]).sum())
    assert len(calls) == 1 and calls[0][1] == 1 and before < wave <= answered
    assert study.closed() and study.order.plan.reason.startswith("settled")
    # a newcomer gets the polite end and no page
    http = _client(study)
    r = _participant(http, "late")
    assert r.status_code == 303 and r.headers["location"] == "/done"
    assert "this study is complete" in http.get("/done").text
    stored = db.snapshot(study.engine)
    assert stored["worker_id"].nunique() == len(seen)  # the newcomer stored nothing


def _cells_by_hand(ws, formulations) -> dict:
    """Each example's phi cells (lists A and B, once if both fall in it) and |dphi| cell under
    each of ``formulations``, binned by hand from the generator's scores.csv."""
    scores = ws.table("scores.csv")
    scores = scores[scores["formulation"].isin(formulations)]
    n_bins = ws["generator.n_bins"]
    def bin_of(x):
        return np.minimum(np.floor((x.astype(float) + 1e-5) * n_bins), n_bins - 1).astype(int)
    out: dict = {}
    for e, f, a, b, d in zip(scores["example_id"], scores["formulation"], bin_of(scores["phi_a"]),
                             bin_of(scores["phi_b"]), bin_of((scores["phi_a"].astype(float)
                                                               - scores["phi_b"].astype(float)).abs())):
        out.setdefault(e, set()).update({("phi", f, a), ("phi", f, b), ("dphi", f, d)})
    return out


def _top_cell_first(ws):
    """A criterion that puts first the examples whose bin1-zipf list A or B is in the top phi
    cell, reading the cells of bin1-zipf and lin-const; with each example's page, its cells by
    hand (:func:`_cells_by_hand`) and the top cell's examples."""
    key = ws.table("key.csv")
    page_of = key[key["is_trap"] == "False"].set_index("source_id")["page"].astype(int)
    capped = ["bin1-zipf", "lin-const"]
    cells = _cells_by_hand(ws, capped)
    top = {e for e, c in cells.items() if ("phi", "bin1-zipf", 9) in c}

    def priorities(pool, study, formulations, *, seed, min_depth=0):
        out = pd.Series({e: float(e in top) for e in pool["example_id"]})
        out.attrs["capped"] = capped
        return out

    return page_of, cells, top, priorities


def _most_in_a_cell(ws, order, page_of, cells) -> list:
    """For each run of wave_pages pages of ``order``: the most examples one cell holds."""
    runs = [order[i:i + ws["design.wave_pages"]] for i in range(0, len(order), ws["design.wave_pages"])]
    most = []
    for run in runs:
        counts: dict = {}
        for e in page_of.index[page_of.isin(run)]:
            for c in cells[e]:
                counts[c] = counts.get(c, 0) + 1
        most.append(max(counts.values()))
    return most


@pytest.mark.parametrize("seed, cap_share, exempt, taken", [(1, 0.25, (), ()), (2, 0.1, (3, 17), ()), (3, 0.5, (), ()),
                                                            (4, 0.25, (), (7, 8, 9)), (5, 0.1, (3,), (5,)),
                                                            (6, 0.25, tuple(range(1, 31)), (2,))])
def test_capped_page_order_is_the_plain_capped_greedy(seed, cap_share, exempt, taken):
    """capped_page_order against a plain greedy written out by hand on random pages: each run
    of wave_pages pages takes the best page whose examples keep every cell (an example once in
    a cell) within ceil(cap x examples of a run), else the best of the rest; pages ``taken``
    (handed out in the run under way) fill the first run's cells and shorten it."""
    import math
    from satcal.adaptive_study import capped_page_order
    rng = np.random.default_rng(seed)
    n_pages, wave = 40, 5
    pages = rng.integers(1, n_pages + 1, 160)
    pages[:n_pages] = np.arange(1, n_pages + 1)   # every page holds an example
    cells = rng.choice([0, 0, 0, 1, 2, 3, 4, 5], size=(160, 3))   # cell 0 crowded
    priority = {p: float(rng.random()) for p in range(1, n_pages + 1)}
    later = {5, 6}
    order = sorted(priority, key=lambda p: (p in later, -priority[p], p))
    cap = math.ceil(cap_share * wave * 160 / n_pages)
    by_page = {p: [set(cells[i]) for i in np.flatnonzero(pages == p)] for p in order}
    want, left, first = [], list(order), True
    while left:
        run, counts = [], {}
        for p in taken if first else ():
            for example in by_page[p]:
                for c in example:
                    counts[c] = counts.get(c, 0) + 1
        for _ in range(min(wave - (len(taken) if first else 0), len(left))):
            def fits(p):
                add = {}
                for example in by_page[p]:
                    for c in example:
                        add[c] = add.get(c, 0) + 1
                return p in exempt or all(counts.get(c, 0) + n <= cap for c, n in add.items())
            p = next((q for q in left if fits(q)), left[0])
            left.remove(p)
            run.append(p)
            for example in by_page[p]:
                for c in example:
                    counts[c] = counts.get(c, 0) + 1
        want += run
        first = False
    got = capped_page_order(priority, pages, cells, wave, cap_share, set(exempt), later, taken)
    assert got == want
    assert got != order   # the cap moved pages
    assert capped_page_order(priority, pages, cells, wave, 1.0, set(exempt), later, taken) == order
    if taken:   # the run under way counts: the order differs from the one without it
        assert capped_page_order(priority, pages, cells, wave, cap_share, set(exempt), later) != got


def test_serve_orders_its_pages_within_study_tomls_cell_cap(served_adaptive):
    """[design] cell_cap (the template's 0.25) holds on the first run of wave_pages pages of the
    served order, counted by hand from scores.csv (later runs of this small pool have no page
    left that fits, and take the best of the rest: here 12 in one cell, as that fallback allows);
    without it (cell_cap = 1) the criterion's order piles the first run into one cell; a
    participant gets the capped order's first page."""
    import math
    from satcal.adaptive_study import attach, serve_refit
    ws = served_adaptive
    assert ws["design.cell_cap"] == 0.25 and ws["design.wave_pages"] == 4
    page_of, cells, top, priorities = _top_cell_first(ws)

    def order_of(ws):
        plan = serve_refit(ws, _hosted(ws).engine, priorities=priorities)()
        return sorted(plan.priorities, key=plan.ranks().get)

    cap = math.ceil(0.25 * 4 * len(page_of) / page_of.nunique())
    capped_order = order_of(ws)
    assert sorted(capped_order) == sorted(page_of.unique())
    most = _most_in_a_cell(ws, capped_order, page_of, cells)
    assert most[0] <= cap
    uncapped = order_of(_set(ws, cell_cap=1))
    # cell_cap = 1: the pages by the mean priority of their examples, ties by page number
    means = page_of.groupby(page_of).apply(lambda s: np.mean([float(e in top) for e in s.index]))
    assert uncapped == sorted(means.index, key=lambda p: (-means[p], p))
    assert _most_in_a_cell(ws, uncapped, page_of, cells)[0] > cap
    ws = _set(ws, cell_cap=0.25)
    study = _hosted(ws)
    assert attach(ws, study, priorities=priorities)
    study.order.refresh()
    assert _page_of(ws, _participant(_client(study), "c1")) == capped_order[0]


def test_serve_refit_publishes_the_order_while_a_looks_rule_runs(served_adaptive):
    """With ``settle_wait`` (the server's refit process), a look whose rule has not answered
    does not hold the order back: refits go on publishing the order on the new answers, not
    closed; the rule is asked once, at look 1; the first refit after it answers closes the
    study with its verdict, as the waiting refit of the test above does at once."""
    import threading
    import time
    from satcal.adaptive_study import budget, serve_refit
    from satcal.serve.priority import PageOrder
    ws = _set(served_adaptive, pages_per_participant=2, trust_threshold=0)
    key = ws.table("key.csv")
    real = key[key["is_trap"] == "False"].assign(p=lambda d: d["page"].astype(int))
    def priorities(pool, study, formulations, *, seed, min_depth=0):
        return pd.Series(0.0, index=pool["example_id"])
    gate, calls = threading.Event(), []
    rule = settle_at_look(1, calls)
    def held(result, **kw):
        gate.wait(120)
        return rule(result, **kw)
    study = _hosted(ws)
    study.order = PageOrder(serve_refit(ws, study.engine, priorities=priorities, settle=held, settle_wait=0), 5.0)
    study.order.refresh()
    wave, shown, looked = budget(ws).wave_answers, [], None
    for i in range(len(real["p"].unique())):   # to look 1, then one participant more
        shown += _take_part(_client(study), f"q{i}", study, ws)
        if looked is not None:
            break
        if int(real["p"].isin(shown).sum()) >= wave:
            looked = int(real["p"].isin(shown).sum())
    answered = int(real["p"].isin(shown).sum())
    assert looked is not None and answered > looked and not study.closed() and calls == []
    assert study.order.plan.reason == f"{answered} answers, not settled"   # the newest answers' order
    gate.set()
    for _ in range(600):
        study.order.refresh()
        if study.closed():
            break
        time.sleep(0.2)
    assert study.closed() and study.order.plan.reason.startswith("settled")
    assert len(calls) == 1 and calls[0][1] == 1 and wave <= calls[0][0] <= looked


def test_serve_refit_runs_its_criterion_on_one_blas_thread(served_adaptive):
    """The refit limits BLAS to one thread while the criterion runs (threadpoolctl's own report,
    read inside the criterion) and gives the caller its own limit back afterwards."""
    from threadpoolctl import threadpool_info, threadpool_limits
    from satcal.adaptive_study import serve_refit
    ws = served_adaptive
    priorities = _top_cell_first(ws)[3]
    seen = []

    def blas_threads():
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    def recording(*args, **kwargs):
        seen.append(blas_threads())
        return priorities(*args, **kwargs)

    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        serve_refit(ws, _hosted(ws).engine, priorities=recording)()
        after = blas_threads()
    assert before and seen and seen[0] == [1] * len(before)
    assert after == before


def test_serves_runs_of_wave_pages_claims_keep_the_cap_across_a_refit(served_adaptive):
    """The claims, in the order the database took them (assignment ids), in runs of
    wave_pages: a run that a refit falls inside (two of its pages claimed before, one answered
    and one held, two after) keeps every capped cell within the cap, counted by hand from
    scores.csv. Before, the refit ordered the held page among the fresh ones and the answered
    one last, and started a new run of its own: the run under way was not counted."""
    import math

    from sqlalchemy import select

    from satcal.adaptive_study import attach
    from satcal.serve import db
    from satcal.serve.client import parse_form
    ws = _set(served_adaptive, cell_cap=0.25, trust_threshold=0)
    page_of, cells, _, priorities = _top_cell_first(ws)
    study = _hosted(ws)
    assert attach(ws, study, priorities=priorities)
    study.order.refresh()
    http = _client(study)   # one client a participant: each its own session
    form = parse_form(_participant(http, "c1").text)
    _participant(_client(study), "c2")   # holds its page across the refit
    assert http.post("/page", data={**form.hidden, **varied(form)}).status_code == 303
    study.order.refresh()   # a new answer: a new fit and order, two claims into a run of four
    for n in range(3, 7):
        _participant(_client(study), f"c{n}")
    a = db.tables()["assignments"]
    with study.engine.connect() as conn:
        claimed = list(conn.execute(select(a.c.page).order_by(a.c.id)).scalars())
    assert len(claimed) == 6 and len(set(claimed)) == 6
    cap = math.ceil(0.25 * 4 * len(page_of) / page_of.nunique())
    run = claimed[:4]
    counts: dict = {}
    for e in page_of.index[page_of.isin(run)]:
        for c in cells[e]:
            counts[c] = counts.get(c, 0) + 1
    assert max(counts.values()) <= cap, (max(counts.values()), cap)


def test_the_refit_reads_which_pages_the_next_claims_can_take_and_the_run_under_way(tmp_path):
    """_hand_outs on a database set by hand (5 pages x 2 replicates, 7 claims, runs of 3):
    replicate 1 of pages 1-3 answered, of page 4 held, of page 5 held by a holder who timed
    out, so the next claims can take page 5 only, at replicate 1; the run under way is the
    last 7 mod 3 = 1 claim. With every replicate-1 slot answered, the lowest free level is 2."""
    from sqlalchemy import insert

    from satcal.adaptive_study import _hand_outs
    from satcal.serve import db
    engine = db.connect(f"sqlite:///{tmp_path / 'serve.db'}")
    db.prepare(engine, "0" * 64, [1, 2, 3, 4, 5], 2)
    t = db.tables()
    now = 1000.0
    # claims in id order: pages 1, 2, 3, 4, 5, then 2 and 1 again at replicate 2 (held)
    claims = [(1, 1, 1, True), (2, 2, 1, True), (3, 3, 1, True), (4, 4, 1, False), (5, 5, 1, False),
              (6, 2, 2, False), (7, 1, 2, False)]
    with db.writer(engine).begin() as conn:
        conn.execute(insert(t["participants"]), [{"kind": "lab", "external_id": f"p{i}", "study_id": "",
                                                   "session_id": "", "created_at": now, "outcome": ""}
                                                  for i in range(1, 8)])
        slot = {(r.page, r.replicate): r.id for r in conn.execute(t["slots"].select())}
        for aid, page, rep, done in claims:
            sid = slot[(page, rep)]
            conn.execute(insert(t["assignments"]).values(
                id=aid, token=f"{aid:032d}", participant_id=aid, position=0, page=page, slot_id=sid,
                created_at=now, expires_at=now + 60))
            until = now - 1 if page == 5 else now + 60   # page 5's holder timed out
            conn.execute(t["slots"].update().where(t["slots"].c.id == sid).values(
                assignment_id=aid, held_until=until, done=done))
    later, taken = _hand_outs(engine, 3, 2, now=now)
    assert later == {1, 2, 3, 4} and taken == (1,)
    assert _hand_outs(engine, 7, 2, now=now) == ({1, 2, 3, 4}, ())   # 7 claims: runs of 7 complete
    assert _hand_outs(engine, 4, 2, now=now)[1] == (5, 2, 1)   # 7 mod 4 = 3: claims 5-7, in claim order
    with db.writer(engine).begin() as conn:   # every replicate-1 slot answered
        conn.execute(t["slots"].update().where(t["slots"].c.replicate == 1).values(done=True))
    # level 2: pages 1 and 2 held there (until now + 60), pages 3-5 free
    assert _hand_outs(engine, 3, 2, now=now)[0] == {1, 2}
    assert _hand_outs(engine, 3, 1, now=now)[0] == {1, 2, 3, 4, 5}   # one answer an example: none left
    engine.dispose()


def test_serve_stops_at_the_budget_and_keeps_its_plan_when_a_refit_fails(served_adaptive):
    from satcal.adaptive_study import attach
    from satcal.serve.client import attentive, parse_form
    ws = _set(served_adaptive, budget=1)
    def priorities(pool, study, formulations, *, seed, min_depth=0):
        if study is not None and len(study.examples) > 10 ** 6:
            raise AssertionError("unreachable")
        return pd.Series(0.0, index=pool["example_id"])
    study = _hosted(ws)
    attach(ws, study, priorities=priorities, settle=settle_at(10 ** 6))
    study.order.refresh()
    assert not study.closed()
    http = _client(study)
    r = _participant(http, "p0")
    form = parse_form(r.text)
    http.post("/page", data={**form.hidden, **attentive(form)})
    study.order.refresh()
    assert study.closed() and study.order.plan.reason.startswith("budget reached: ")
    plan = study.order.plan
    def broken():
        raise RuntimeError("database gone")
    study.order.refit = broken
    assert study.order.refresh() is False
    assert study.order.plan is plan and study.order.failures == 1


def test_the_servers_refit_runs_in_a_process_of_its_own_with_the_packages_criterion(served_adaptive):
    """satcal serve's default: the refit in a spawned process (no interpreter lock shared with
    the server's threads), giving the plan the same refit gives in this process."""
    from satcal.adaptive_study import ProcessRefit, attach, serve_refit
    ws = served_adaptive
    study = _hosted(ws)
    assert attach(ws, study) and isinstance(study.order.refit, ProcessRefit)
    try:
        assert study.order.refresh() is True
    finally:
        study.order.refit.pool.shutdown()
    here = serve_refit(ws, study.engine)()
    key = ws.table("key.csv")
    pages = set(key.loc[key["is_trap"] == "False", "page"].astype(int))
    assert set(study.order.plan.priorities) == pages
    assert study.order.plan == here and not here.closed and here.reason == "0 answers, not settled"
    assert study.progress()["adaptive"]["refits"] == 1


def _stat(tid, pid="self") -> tuple[int, int]:
    """A thread's scheduling policy and nice as /proc/<pid>/task/<tid>/stat lists them (fields
    41 and 19): read apart from the calls that set them."""
    from pathlib import Path
    fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[38]), int(fields[16])


def _a_rule_threads_scheduling():
    """Run in the refit process: the policy and nice of the thread ``adaptive_study._ask``
    starts there (the stopping rule's), read inside that thread."""
    import threading
    from satcal.adaptive_study import _ask
    thread, box = _ask(lambda: _stat(threading.get_native_id()), None)
    return box["verdict"]


def _idle_allowed() -> bool:
    """Whether this machine lets an unprivileged process into SCHED_IDLE (a throwaway process tries)."""
    import subprocess
    import sys
    code = "import os; os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


@pytest.mark.skipif(not (hasattr(__import__("os"), "SCHED_IDLE") and __import__("os").path.isdir("/proc/self/task")),
                    reason="Linux's scheduling classes, a thread's each")
def test_the_refit_process_and_its_rules_thread_run_only_on_idle_cores(served_adaptive):
    """The server's refit process yields the cores: every thread it has after a refit (the
    refit's, OpenBLAS's, the orphan watch) and the thread the stopping rule runs in are in
    SCHED_IDLE at nice 19 (nice alone where this machine refuses SCHED_IDLE), as /proc lists
    them; the server's own threads keep their class and nice."""
    import os
    from satcal.adaptive_study import REFIT_NICENESS, attach
    ws = served_adaptive
    study = _hosted(ws)
    server = {t: _stat(t) for t in os.listdir("/proc/self/task")}
    assert attach(ws, study)
    try:
        assert study.order.refresh() is True
        (child,) = study.order.refit.pool._processes
        threads = [_stat(t, child) for t in os.listdir(f"/proc/{child}/task")]
        rule = study.order.refit.pool.submit(_a_rule_threads_scheduling).result()
    finally:
        study.order.refit.pool.shutdown()
    expected = (os.SCHED_IDLE if _idle_allowed() else os.sched_getscheduler(0), REFIT_NICENESS)
    assert len(threads) >= 2 and set(threads) == {expected}, threads
    assert rule == expected
    still = [t for t in server if os.path.exists(f"/proc/self/task/{t}")]
    assert still and all(_stat(t) == server[t] for t in still)


@pytest.mark.parametrize("platform", ["refused", "missing"])
def test_the_refit_process_falls_back_to_nice_where_sched_idle_is_refused_or_missing(tmp_path, platform):
    """Where SCHED_IDLE is refused (EPERM: a seccomp filter, say) or missing (no such call), the
    refit process gets nice 19 alone, with no error: a throwaway process, as /proc/self/stat says."""
    import os
    import subprocess
    import sys
    script = tmp_path / "yield.py"
    script.write_text(
        "import os\n"
        "from pathlib import Path\n"
        "from satcal import adaptive_study\n"
        + ("def refused(*args):\n    raise PermissionError(1, 'Operation not permitted')\n"
           "os.sched_setscheduler = refused\n" if platform == "refused" else "del os.SCHED_IDLE\n")
        + "got = adaptive_study._yield_the_cores()\n"
        "fields = Path('/proc/self/stat').read_text().rsplit(')', 1)[1].split()\n"
        "print(got, fields[38], fields[16])\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("no /proc")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["nice", str(os.sched_getscheduler(0)), "19"]


def test_the_refit_process_ends_when_its_server_is_killed(tmp_path):
    """A server killed (SIGKILL, or SIGTERM re-raised by uvicorn: no atexit runs) must not
    leave its refit process behind: the process spawned as ProcessRefit's is, with its
    initializer, started by a parent that then kills itself, is gone within a few of its checks."""
    import os
    import subprocess
    import sys
    import time
    script = tmp_path / "server.py"
    script.write_text(
        "import os, signal, multiprocessing\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from satcal.adaptive_study import _exit_with_the_server\n"
        "if __name__ == '__main__':\n"
        "    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn'),\n"
        "                               initializer=_exit_with_the_server)\n"
        "    print(pool.submit(os.getpid).result(), flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    child = int(run.stdout.split()[0])
    def alive() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return False
        return True

    deadline = time.monotonic() + 30
    while alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    outlived = alive()
    if outlived:
        os.kill(child, 9)
    assert not outlived, f"the refit process {child} outlived its killed server by 30 s"


def test_the_page_order_follows_the_published_plan_without_a_refit(tmp_path):
    """Plan.ranks: highest priority first, ties by page; the database orders its slots so
    (pages the plan does not name last), as a sort in Python does."""
    from sqlalchemy import select
    from satcal.serve import db
    from satcal.serve.priority import PageOrder, Plan
    plan = Plan({3: 0.5, 1: 2.0, 7: 0.5, 2: -1.0})
    assert plan.ranks() == {1: 0, 3: 1, 7: 2, 2: 3}
    engine = db.connect(f"sqlite:///{tmp_path}/order.db")
    pages = list(range(1, 41))
    db.prepare(engine, "k" * 64, pages, 2)
    s = db.tables()["slots"]
    order = PageOrder(lambda: Plan({p: float((p * 17) % 41) for p in pages if p not in (5, 11)}))
    assert order.refresh()
    with engine.connect() as conn:
        got = [(r.replicate, r.page) for r in conn.execute(
            select(s.c.replicate, s.c.page).order_by(s.c.replicate, order.rank_expression(s.c.page), s.c.page))]
    ranks = order.plan.ranks()
    assert got == sorted(((r, p) for r in (1, 2) for p in pages), key=lambda x: (x[0], ranks.get(x[1], 99), x[1]))
    assert [p for r, p in got[-2:]] == [5, 11]
    engine.dispose()


def test_the_sqlite_claim_hands_out_slots_in_the_plans_order(tmp_path):
    """The claim's compiled statement on SQLite (the plan's ranks bound as a BLOB) hands out
    the slots, claimed one after the other, in the order a sort in Python gives: the emptiest
    replicate first, then the plan's rank, pages the plan does not name (among them pages
    past its highest, 39 and 40) last by page number."""
    import time as _time
    from sqlalchemy import update
    from satcal.serve import db
    from satcal.serve.priority import PageOrder, Plan
    from satcal.serve.study import _choose_ranked
    engine = db.connect(f"sqlite:///{tmp_path}/claim.db")
    pages = list(range(1, 41))
    db.prepare(engine, "k" * 64, pages, 2)
    s = db.tables()["slots"]
    order = PageOrder(lambda: Plan({p: float((p * 13) % 37) for p in pages if p not in (6, 20, 39, 40)}))
    assert order.refresh()
    ranks = order.plan.ranks()
    got = []
    with engine.begin() as conn:
        for _ in range(2 * len(pages)):
            row = _choose_ranked(0).run(conn, ape=2, now=_time.time(), pid=-1, ranks=order.rank_blob())[0]
            got.append(row["page"])
            conn.execute(update(s).where(s.c.id == row["id"]).values(done=True))
        assert _choose_ranked(0).run(conn, ape=2, now=_time.time(), pid=-1, ranks=order.rank_blob()) == []
    want = sorted(((r, p) for r in (1, 2) for p in pages), key=lambda x: (x[0], ranks.get(x[1], 99), x[1]))
    assert got == [p for _, p in want]
    assert got[36:40] == [6, 20, 39, 40]
    engine.dispose()


# --------------------------------------------------------------------------------------------
# calibration.json and the report
# --------------------------------------------------------------------------------------------
def test_calibration_record_and_report_say_what_is_settled(adaptive_ws):
    from satcal.adaptive_study import calibration_record, export_next
    from satcal.analysis import calibrate
    from satcal.report import adaptive_paragraph
    ws = _set(adaptive_ws, budget=40)
    export_next(ws, "csv", plan_wave=prefer([]))
    path, _ = _simulate(ws)
    _ingest(ws, path)
    study = _answered(ws)
    result = calibrate(study, formulations=ws.formulations(), seed=1, bootstrap=20)   # the record reads the leader, not its intervals
    n = len(study.examples)
    result.meta["crowd"] = {"answers": n}
    calls = []
    rule = settle_at(n + 1, calls)
    record = calibration_record(ws, result, settle=rule)
    # the declared margin (design.margin, default 0.005) and the answers the analysis fitted
    # (the study's own, read again from its directory) reach the rule
    assert rule.asked == [(0.005, n)] and ws["design.margin"] == 0.005
    leader = result.ranking["formulation"].iloc[0]
    assert (record["settled"], record["leaders"], record["n_answers"]) == (False, [leader], n)
    assert record["budget_answers"] == 40 and record["budget_reached"] is False
    # looks by information: one wave's answers is look 1 of the budget's waves
    (answers, look, planned, conf, top_m), = calls
    wave = 2 * (len(ws.table("key.csv").query("is_trap == 'False'")) / 2)
    assert (look, planned, conf, top_m) == (1, int(np.ceil(40 / wave)), 0.95, 1)
    text = str(adaptive_paragraph(record))
    assert text.startswith("<b>Adaptive study: not settled</b> at 95% confidence after look 1")
    assert leader in text and "too few answers" in text
    settled = calibration_record(ws, result, settle=settle_at(n))
    assert str(adaptive_paragraph(settled)).startswith("<b>Adaptive study: settled</b> at 95% confidence")


# --------------------------------------------------------------------------------------------
# End to end, with the package's own pool, criterion and stopping rule
# --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_end_to_end_waves_from_the_cli_and_the_verdict_in_calibration_json(generated, tmp_path):
    """generate writes the pool, the first wave is space-filling, the second chosen from the
    answers; analyze records the stopping rule's verdict, checked against the analysis' own
    tables (looks: the waves answered; the leader: the least b1_std of bias.csv)."""
    import json
    from click.testing import CliRunner
    from satcal.cli import main
    from satcal.workspace import Workspace
    shutil.copytree(generated.path, tmp_path / "study")
    ws = _set(Workspace.open(tmp_path / "study"), adaptive=True, wave_pages=3)
    run = lambda *args: CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert run("generate", ws.path, "--force", "-q").exit_code == 0
    pool = ws.table("pool.csv")
    assert pool.equals(ws.table("examples.csv")) and pool["example_id"].str.startswith("px").all()
    assert len(pool) >= 10 * 39  # ten times the coverage design's 39 examples
    for wave in (1, 2):
        r = run("export", ws.path, "--next-batch")
        assert r.exit_code == 0 and f"(batch {wave})" in r.output
        assert run("simulate", ws.path, "--platform", "csv", "--force").exit_code == 0
        assert run("ingest", ws.path, ws.path / "simulated" / "csv-results.csv", "--platform", "csv").exit_code == 0
    keys = _keys_of(ws)
    first, second = (set(keys[b].query("is_trap == 'False'")["source_id"]) for b in (1, 2))
    assert first and second and not first & second
    assert run("analyze", ws.path, "--bootstrap", "20", "-q").exit_code == 0
    record = json.loads((ws.path / "analysis" / "calibration.json").read_text())["adaptive"]
    bias = pd.read_csv(ws.path / "analysis" / "bias.csv")
    assert record["looks"] == 2 and record["confidence"] == 0.95
    assert record["indicator"] == "b1_std"  # the design-free estimand decides when it can
    assert record["leaders"] == [bias.loc[bias[record["indicator"]].idxmin(), "formulation"]]
    assert record["n_answers"] == len(_answered(ws).examples)
    assert isinstance(record["settled"], bool) and 0 < record["alpha_spent"] < 0.05
    report = (ws.path / "analysis" / "report.html").read_text()
    assert ("Adaptive study: settled" if record["settled"] else "Adaptive study: not settled") in report


def test_serve_after_file_waves_asks_the_rule_from_the_next_look_on(adaptive_ws):
    """One wave answered through files (look 1, asked by export --next-batch); the served
    batch's refit counts those answers but does not ask the rule at look 1 again."""
    from satcal.adaptive_study import attach, export_next
    ws = adaptive_ws
    export_next(ws, "csv", plan_wave=prefer([]))
    path, _ = _simulate(ws)
    _ingest(ws, path)
    n = int((ws.table("answers.csv")["is_trap"] == "False").sum())
    ws = _set(ws, platform="serve", attention_checks=0)
    ws.export("serve", new_batch=True)
    calls, scored = [], []
    def priorities(pool, study, forms, *, seed, min_depth=0):
        scored.append(len(study.examples))
        return pd.Series(0.0, index=pool["example_id"])
    study = _hosted(ws)
    attach(ws, study, priorities=priorities, settle=settle_at_look(1, calls))
    assert study.order.refresh()
    assert calls == [] and not study.closed()
    assert study.order.plan.reason == f"{n} answers, not settled"
    # no new answer since: the refit keeps its plan without asking the criterion again
    plan = study.order.plan
    assert study.order.refresh() and study.order.plan is plan and scored == [n]
