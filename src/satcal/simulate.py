"""A simulated crowd: seeded worker answers from a known user model.

The user model, per worker w (honest) and list with score phi under the truth formulation:

    P(list satisfies w) = expit(intercept + u_w + slope * phi),   u_w ~ N(0, heterogeneity^2)

A worker judges both lists independently and answers ``both_good`` if both satisfy,
``both_bad`` if neither does, else prefers the one that does (the preference behaviour). With
probability ``position_bias`` an undecided answer (both good or both bad) becomes "A is
better" in the order shown. Spammers answer by ``spammer_kind``: uniformly at random
(``random``), "both bad" to everything (``both_bad``: a straight-liner who passes every trap
that accepts "both bad"), always the list shown first (``first``), or ``mixed``, the three in
turn over the spammers in id order. Each example is answered by
``answers_per_example`` different workers (one in the ECIR 2015 study); every worker answers
every trap, as platforms show their test questions to each worker.

The truth saved beside the result file holds the parameters, the spammers, the per-list curve
(``p_sat_list``) and ``p_sat_true``: the P(Sat|phi) that the calibration analysis converges to
under this model and design, which an analysis should recover (see ``_sat_estimand``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy.special import expit

from .errors import SatcalError
from .measures import formulation as parse_formulation
from .measures import score_lists
from .platforms._common import UNFINISHED, unfinished

__all__ = ["UserModel", "simulate_answers", "honest_answers", "simulate_results", "simulate_served", "study_lists", "GRID_TRUTH",
           "SPAMMER_KINDS", "spammer_kinds"]

GRID_TRUTH = np.round(np.linspace(0, 1, 101), 2)
#: Spammers' answering: at random, or one code always, as shown (``first``: the side shown first).
SPAMMER_KINDS = ("random", "both_bad", "first")
_SPAMMER_CODE = {"both_bad": "both_bad", "first": "a_better"}


def spammer_kinds(spammers, kind: str) -> dict:
    """Each spammer's way of answering: ``kind`` for all, or for ``mixed`` the kinds of
    ``SPAMMER_KINDS`` in turn over the spammers sorted by id.

    Parameters
    ----------
    spammers : iterable of str
        The spammers' ids.
    kind : str
        One of ``SPAMMER_KINDS`` or ``"mixed"``.

    Returns
    -------
    dict
        Kind by spammer id.
    """
    ordered = sorted(spammers)
    if kind == "mixed":
        return {w: SPAMMER_KINDS[i % len(SPAMMER_KINDS)] for i, w in enumerate(ordered)}
    return {w: kind for w in ordered}


@dataclass
class UserModel:
    """Parameters of the simulated crowd (see module docstring).

    Attributes
    ----------
    formulation : str
        The truth formulation (a measure id, e.g. ``"lin-const"``) whose phi drives the curve.
    intercept, slope : float
        The true curve P(list satisfies w) = expit(intercept + u_w + slope * phi).
    heterogeneity : float
        The standard deviation of each worker's shift u_w of the intercept (>= 0).
    workers : int
        Workers in the crowd (>= 1).
    spammers : float
        Share of the workers, in [0, 1), who do not read the lists (rounded to a count).
    spammer_kind : str
        How spammers answer: ``"random"`` (uniformly over the four answers), ``"both_bad"``
        (always both bad), ``"first"`` (always the side shown first) or ``"mixed"`` (the kinds in
        turn over the spammers sorted by id).
    position_bias : float
        Probability, in [0, 0.5], that an honest undecided answer (both good or both bad)
        becomes "A is better" in the order shown.
    seed : int
        Seed of every draw of the crowd.
    undecided_preference : float
        The joint model's answer process (:mod:`satcal.analysis.joint`): probability that a
        user who likes both lists or neither still states a preference (0: the paper's case).
    preference_accuracy : float
        Probability that such a preference goes to the higher-phi list (1: the paper's case).
    lapse : float
        Probability, in [0, 0.5), that a user who likes exactly one list prefers the other
        (0: the paper's case).
    abandoned : float
        Share, in [0, 1), of example answers whose page a worker took first and left
        unfinished (the page then went to the worker who answered it); written by the platforms
        that report such assignments (Toloka: expired or skipped; Label Studio: cancelled).
    """

    formulation: str = "lin-const"
    intercept: float = -3.0
    slope: float = 6.0
    heterogeneity: float = 0.5
    workers: int = 60
    spammers: float = 0.15
    position_bias: float = 0.05
    seed: int = 0
    spammer_kind: str = "random"
    #: The joint model's answer process (:mod:`satcal.analysis.joint`): a user who likes both lists or neither
    #: still states a preference with probability ``undecided_preference`` (for the
    #: higher-phi list with probability ``preference_accuracy``), and one who likes exactly
    #: one list prefers the other with probability ``lapse``. The defaults give the paper's
    #: special case (no such preferences, no lapses).
    undecided_preference: float = 0.0
    preference_accuracy: float = 1.0
    lapse: float = 0.0
    #: Share of example answers whose page a worker took first and left unfinished (the page
    #: then went to the worker who answered it). Platforms that report such assignments write
    #: them (Toloka: expired or skipped; Label Studio: cancelled), so ingest's handling of
    #: every status is dry-run too.
    abandoned: float = 0.0

    @classmethod
    def from_settings(cls, simulation, seed: int) -> "UserModel":
        """The crowd of study.toml's ``[simulation]`` section (every key), with the seed of its
        random stream; ``satcal simulate`` and ``satcal power`` both draw from it.

        Parameters
        ----------
        simulation : satcal.settings.SimulationSection
            The ``[simulation]`` section (:attr:`satcal.settings.Settings.simulation`).
        seed : int
            The crowd's seed.

        Returns
        -------
        UserModel
        """
        from dataclasses import fields
        names = {f.name for f in fields(cls)} - {"seed"}
        return cls(seed=seed, **{n: getattr(simulation, n) for n in names})

    def __post_init__(self):
        problems = []
        if self.workers < 1:
            problems.append(f"workers must be >= 1, got {self.workers}")
        if not 0 <= self.spammers < 1:
            problems.append(f"spammers must be a share in [0, 1), got {self.spammers}")
        if self.spammer_kind not in SPAMMER_KINDS + ("mixed",):
            problems.append(f"spammer_kind must be one of {', '.join(SPAMMER_KINDS)} or mixed, got {self.spammer_kind!r}")
        if not 0 <= self.position_bias <= 0.5:
            problems.append(f"position_bias must be in [0, 0.5], got {self.position_bias}")
        for name in ("undecided_preference", "preference_accuracy"):
            if not 0 <= getattr(self, name) <= 1:
                problems.append(f"{name} must be a probability, got {getattr(self, name)}")
        if not 0 <= self.abandoned < 1:
            problems.append(f"abandoned must be a share in [0, 1), got {self.abandoned}")
        if not 0 <= self.lapse < 0.5:
            problems.append(f"lapse must be in [0, 0.5), got {self.lapse}")
        if self.heterogeneity < 0:
            problems.append(f"heterogeneity must be >= 0, got {self.heterogeneity}")
        try:
            parse_formulation(self.formulation)
        except ValueError as exc:
            problems.append(str(exc))
        if problems:
            raise SatcalError("simulation: " + "; ".join(problems))


def _canonical_answers(sat_a: np.ndarray, sat_b: np.ndarray) -> np.ndarray:
    return np.select([sat_a & sat_b, ~sat_a & ~sat_b, sat_a], ["both_good", "both_bad", "a_better"], "b_better")


def simulate_answers(items: pd.DataFrame, key: pd.DataFrame, lists: pd.DataFrame, k: int,
                     top_level: int, model: UserModel, answers_per_example: int = 1) -> tuple[pd.DataFrame, dict]:
    """Answers in the shown orientation for every item, and the truth.

    Parameters
    ----------
    items, key : pandas.DataFrame
        The worker-visible items and the hidden key (``satcal export``).
    lists : pandas.DataFrame
        Examples and traps with ``source_id`` and levels ``ra1..``, ``rb1..``.
    k : int
        Documents per list: the level columns read are ``ra1..ra<k>`` and ``rb1..rb<k>``.
    top_level : int
        The top relevance level, L - 1 of the ``max`` normalisation the truth is scored with.
    model : UserModel
        The simulated crowd: its workers, spammers, satisfaction curve (the truth), joint-model
        behaviour, position bias, abandoned share and seed (every draw comes from ``model.seed``).
    answers_per_example : int, default 1
        How many different workers answer each example (each a separate row, as in the
        study's design), capped at ``model.workers``. Every worker answers every trap.

    Returns
    -------
    answers : pandas.DataFrame
        ``item_id, worker_id, answer, submitted_at, started_at, assignment_id, status``: the
        answers interleaved as results arrive, then the abandoned assignments (no answer).
    truth : dict
        The model, the spammers, each worker's offset, the true satisfaction curves on
        :data:`GRID_TRUTH` and the answer counts.
    """
    from .platforms import SHOWN_CODES

    rng = np.random.default_rng(model.seed)
    f = parse_formulation(model.formulation)
    workers = np.array([f"w{i + 1:03d}" for i in range(model.workers)])
    n_spam = int(round(model.spammers * model.workers))
    spammers = set(rng.choice(workers, size=n_spam, replace=False).tolist()) if n_spam else set()
    offsets = dict(zip(workers, rng.normal(0, model.heterogeneity, size=len(workers))))

    k_ = key.set_index("item_id").loc[items["item_id"]]
    is_trap = k_["is_trap"].astype(str).to_numpy() == "True"
    swapped = k_["swapped"].astype(str).to_numpy() == "True"
    by_source = lists.set_index("source_id")
    src = by_source.loc[k_["source_id"].to_numpy()]
    phi_a = score_lists(src[[f"ra{i}" for i in range(1, k + 1)]].to_numpy(float), [f], top_level=top_level)[:, 0]
    phi_b = score_lists(src[[f"rb{i}" for i in range(1, k + 1)]].to_numpy(float), [f], top_level=top_level)[:, 0]

    # Who answers what: each page of examples goes to answers_per_example different random
    # workers; traps go to everyone.
    pages = items["page"].astype(int).to_numpy()
    per = min(answers_per_example, len(workers))
    page_workers = {p: ([rng.choice(workers)] if per == 1 else list(rng.choice(workers, size=per, replace=False)))
                    for p in np.unique(pages)}
    rows_item, rows_worker, rows_page = [], [], []
    for i in np.flatnonzero(~is_trap):
        for w in page_workers[pages[i]]:
            rows_item.append(i), rows_worker.append(w), rows_page.append(pages[i])
    for w in workers:
        for i in np.flatnonzero(is_trap):
            rows_item.append(i), rows_worker.append(w), rows_page.append(pages[i])
    idx = np.array(rows_item, dtype=np.int64)
    who = np.array(rows_worker)
    u = np.array([offsets[w] for w in who])
    shown, p_a, p_b = honest_answers(phi_a[idx], phi_b[idx], u, swapped[idx], model, rng)
    spam = np.isin(who, list(spammers))
    shown[spam] = rng.choice(list(SHOWN_CODES), size=int(spam.sum()))
    kinds = spammer_kinds(spammers, model.spammer_kind)
    for w, kind in kinds.items():  # drawn as random first, so "random" draws what it always did
        if kind in _SPAMMER_CODE:
            shown[who == w] = _SPAMMER_CODE[kind]
    order = rng.permutation(idx.size)  # results arrive interleaved
    started, submitted = _page_times(who, np.array(rows_page), spam, model.seed)
    answers = pd.DataFrame({
        "item_id": items["item_id"].to_numpy()[idx][order], "worker_id": who[order],
        "answer": shown[order], "submitted_at": submitted[order], "started_at": started[order],
        "assignment_id": [f"{w}-p{p}" for w, p in zip(who[order], np.array(rows_page)[order])],
    })
    answers = _with_abandoned(answers, is_trap[idx][order], workers, model.abandoned, rng)
    honest_real = ~spam & ~is_trap[idx]
    u_real = u[honest_real]
    list_curve = (expit(model.intercept + u_real[:, None] + model.slope * GRID_TRUTH[None, :]).mean(axis=0)
                  if u_real.size else expit(model.intercept + model.slope * GRID_TRUTH))
    estimand = _sat_estimand(p_a[honest_real], p_b[honest_real], phi_a[idx][honest_real],
                             phi_b[idx][honest_real])
    truth = {"model": asdict(model), "spammers": sorted(spammers), "spammer_kinds": kinds,
             "worker_offsets": {w: round(float(v), 6) for w, v in offsets.items()},
             "p_sat_grid": GRID_TRUTH.tolist(),
             "p_sat_list": [round(float(v), 8) for v in list_curve],
             "p_sat_true": [round(float(v), 8) for v in estimand],
             "answers": int(idx.size), "answers_to_examples": int((~is_trap[idx]).sum()),
             "abandoned_assignments": int(unfinished(answers).sum())}
    return answers, truth


def honest_answers(phi_a: np.ndarray, phi_b: np.ndarray, u: np.ndarray, swapped: np.ndarray,
                   model: UserModel, rng: np.random.Generator, joint_rng=None):
    """Honest workers' answers, in the shown orientation (the answer process of the module
    docstring); ``satcal simulate`` and the power analysis both answer through it.

    Parameters
    ----------
    phi_a, phi_b : (n,) scores under the truth formulation of the canonical lists A and B.
    u : (n,) the answering worker's offset u_w.
    swapped : (n,) whether B was shown first (the export's swap); position bias pushes an
        undecided answer to the list *shown* first.
    model : UserModel
        The satisfaction curve P(Sat | phi, u) = expit(intercept + u + slope * phi), the joint
        model's ``undecided_preference``, ``preference_accuracy`` and ``lapse``, and the
        ``position_bias`` (probabilities in [0, 1]).
    rng : numpy.random.Generator
        Draws satisfaction (A then B) and position bias.
    joint_rng : numpy.random.Generator, optional
        Draws the joint model's preferences and lapses (default: a stream of their own seeded
        from ``model.seed``, see ``_joint_behaviour``).

    Returns
    -------
    shown : (n,) answer codes as shown; p_a, p_b : (n,) the satisfaction probabilities.
    """
    from .platforms import swap_answer
    p_a = expit(model.intercept + u + model.slope * phi_a)
    p_b = expit(model.intercept + u + model.slope * phi_b)
    n = np.size(p_a)
    sat_a, sat_b = rng.random(n) < p_a, rng.random(n) < p_b
    canonical = _canonical_answers(sat_a, sat_b)
    canonical = _joint_behaviour(canonical, sat_a, sat_b, phi_a - phi_b, model, joint_rng)
    shown = np.array([swap_answer(a) if s else a for a, s in zip(canonical, swapped)], dtype=object)
    undecided = np.isin(shown, ("both_good", "both_bad")) & (rng.random(n) < model.position_bias)
    shown[undecided] = "a_better"
    return shown, p_a, p_b


def _with_abandoned(answers: pd.DataFrame, is_trap: np.ndarray, workers: np.ndarray, share: float,
                    rng) -> pd.DataFrame:
    """Add a ``status`` column ("" = submitted) and, for a share of the example answers, an
    earlier assignment of the same item by another worker who left it unfinished (no answer).
    Drawn after every answer, so the answers themselves do not depend on ``share``."""
    answers = answers.assign(status="")
    if share <= 0:
        return answers
    taken = np.flatnonzero(~is_trap & (rng.random(len(answers)) < share))
    left = answers.iloc[taken].copy()
    pick = rng.integers(0, len(workers), taken.size)
    clash = workers[pick] == left["worker_id"].to_numpy()
    left["worker_id"] = workers[(pick + clash) % len(workers)]  # someone else took it first
    left["answer"], left["status"] = "", UNFINISHED
    left["submitted_at"] = ""
    left["assignment_id"] = left["assignment_id"] + "-left"
    return pd.concat([answers, left], ignore_index=True)


def _joint_behaviour(canonical, sat_a, sat_b, dphi, model: UserModel, rng=None) -> np.ndarray:
    """Apply the joint model's preferences and lapses, drawn from ``rng`` (by default a stream
    of their own, so the paper's special case, the default, gives the same answers as before:
    it draws nothing)."""
    if model.undecided_preference == 0 and model.lapse == 0:
        return canonical
    rng = rng if rng is not None else np.random.default_rng([model.seed, 11])
    out = canonical.copy()
    n = out.size
    same = sat_a == sat_b
    states = same & (rng.random(n) < model.undecided_preference)
    to_higher = rng.random(n) < model.preference_accuracy
    higher_a = np.where(dphi > 0, True, np.where(dphi < 0, False, rng.random(n) < 0.5))
    pick_a = np.where(dphi == 0, higher_a, to_higher == higher_a)
    out[states] = np.where(pick_a[states], "a_better", "b_better")
    lapses = ~same & (rng.random(n) < model.lapse)
    out[lapses] = np.where(sat_a[lapses], "b_better", "a_better")
    return out


def _page_times(who: np.ndarray, page: np.ndarray, spam: np.ndarray, seed: int):
    """When each worker started and submitted each page (all of a page's answers share them):
    honest workers spend 4 to 12 seconds an item, spammers under 2. Drawn from a stream of
    their own, so the answers do not depend on them."""
    rng = np.random.default_rng([seed, 7])
    groups, inverse = np.unique(np.char.add(who.astype(str), np.char.add("|", page.astype(str))),
                                return_inverse=True)
    size = np.bincount(inverse)
    spam_group = np.zeros(len(groups), dtype=bool)
    spam_group[inverse[spam]] = True
    per_item = np.where(spam_group, rng.uniform(0.5, 1.5, len(groups)), rng.uniform(4, 12, len(groups)))
    end = rng.integers(3600, 24 * 3600, size=len(groups))
    begin = end - np.round(per_item * size).astype(int)
    start = np.datetime64("2026-11-01T08:00:00")
    stamp = lambda s: np.array([str(start + np.timedelta64(int(v), "s")) for v in s], dtype=object)
    return stamp(begin)[inverse], stamp(end)[inverse]


def _sat_estimand(p_a, p_b, phi_a, phi_b) -> np.ndarray:
    """The curve the calibration analysis converges to under this model and design.

    A ``both_*`` answer means the two lists agreed, so among those answers a list with score
    phi is labelled satisfactory with P(s_A s_B = 1 | s_A = s_B), not with p(phi) itself: the
    published method measures satisfaction *among undecided answers*. This is the quadratic
    logit fitted to the expected data (each example weighted by its chance of a both_* answer,
    with its expected share of both_good), i.e. the probability limit of the estimator.
    ``p_sat_list`` keeps the per-list model curve for comparison.
    """
    import statsmodels.api as sm
    if p_a.size == 0:
        return np.full(GRID_TRUTH.size, np.nan)
    agree = p_a * p_b + (1 - p_a) * (1 - p_b)
    share_good = p_a * p_b / np.maximum(agree, 1e-300)
    x = np.concatenate([phi_a, phi_b])
    quadratic = lambda v: np.stack([np.ones_like(v), v, v ** 2], axis=-1)
    # a weighted binomial GLM on expected proportions: the analysis's fit on expected data
    fit = sm.GLM(np.concatenate([share_good, share_good]), quadratic(x), family=sm.families.Binomial(),
                 var_weights=np.concatenate([agree, agree])).fit(tol=1e-12)
    return expit(quadratic(GRID_TRUTH) @ np.asarray(fit.params))


def simulate_results(items: pd.DataFrame, key: pd.DataFrame, lists: pd.DataFrame, k: int, top_level: int,
                     model: UserModel, answers_per_example: int, plat) -> tuple[pd.DataFrame, dict]:
    """The simulated crowd's answers to a batch, as the platform ``plat`` reports them (pages
    left unfinished dropped where the platform does not report them), and the truth.

    Parameters
    ----------
    items : pandas.DataFrame
        items.csv (what workers see).
    key : pandas.DataFrame
        key.csv (source of each item, swap, traps).
    lists : pandas.DataFrame
        Examples and traps by ``source_id`` (:func:`study_lists`).
    k : int
        List length.
    top_level : int
        Highest relevance level.
    model : UserModel
        The simulated crowd.
    answers_per_example : int
        Workers answering each page.
    plat : satcal.platforms.base.Platform
        The platform whose result file is simulated.

    Returns
    -------
    tuple of (pandas.DataFrame, dict)

    Raises
    ------
    SatcalError
        The platform has no result format.
    """
    if plat.write_results is None:
        raise SatcalError(f"platform {plat.name} has no result format to simulate")
    answers, truth = simulate_answers(items, key, lists, k, top_level, model, answers_per_example)
    if not plat.reports_unfinished:
        answers = answers[~unfinished(answers)]
        truth["abandoned_assignments"] = 0
    return answers, truth


def _shown_scores(items: pd.DataFrame, key: pd.DataFrame, lists: pd.DataFrame, k: int, top_level: int,
                  f) -> pd.DataFrame:
    """phi of the list shown as A and as B for every item (the key's swap applied), and whether
    the item is a trap: what a simulated participant needs to answer a served page."""
    k_ = key.set_index("item_id").loc[items["item_id"]]
    src = lists.set_index("source_id").loc[k_["source_id"].to_numpy()]
    phi_a = score_lists(src[[f"ra{i}" for i in range(1, k + 1)]].to_numpy(float), [f], top_level=top_level)[:, 0]
    phi_b = score_lists(src[[f"rb{i}" for i in range(1, k + 1)]].to_numpy(float), [f], top_level=top_level)[:, 0]
    swapped = k_["swapped"].astype(str).to_numpy() == "True"
    return pd.DataFrame({"phi_shown_a": np.where(swapped, phi_b, phi_a),
                         "phi_shown_b": np.where(swapped, phi_a, phi_b),
                         "is_trap": k_["is_trap"].astype(str).to_numpy() == "True"},
                        index=items["item_id"].to_numpy())


def simulate_served(url: str, items: pd.DataFrame, key: pd.DataFrame, lists: pd.DataFrame, k: int,
                    top_level: int, model: UserModel, key_digest: str, concurrency: int = 8,
                    progress: bool = False) -> tuple[list, dict]:
    """Drive a running ``satcal serve`` with the simulated crowd: each simulated worker enters as
    a Prolific participant (``PROLIFIC_PID=SIM-<n>``), reads every page as a browser without
    JavaScript would, and answers from the user model (honest workers follow the attention
    checks' instruction; spammers answer by ``spammer_kind``). ``key_digest`` is the SHA-256 of the
    batch's key.csv, whose token marks the participants simulated. Returns the visits and the
    truth.

    Parameters
    ----------
    url : str
        Address of the running hosted study.
    items : pandas.DataFrame
        items.csv (what workers see).
    key : pandas.DataFrame
        key.csv (source of each item, swap, traps).
    lists : pandas.DataFrame
        Examples and traps by ``source_id`` (:func:`study_lists`).
    k : int
        List length.
    top_level : int
        Highest relevance level.
    model : UserModel
        The simulated crowd.
    key_digest : str
        SHA-256 of key.csv.
    concurrency : int, optional
        Participants at once (default 8).
    progress : bool, optional
        Show progress (default False).

    Returns
    -------
    tuple of (list, dict)
    """
    from .platforms import SHOWN_CODES
    from .serve.client import asked_option, drive

    f = parse_formulation(model.formulation)
    scores = _shown_scores(items, key, lists, k, top_level, f)
    root = np.random.default_rng(model.seed)
    workers = [f"SIM-{i + 1:04d}" for i in range(model.workers)]
    n_spam = int(round(model.spammers * model.workers))
    spammers = set(root.choice(workers, size=n_spam, replace=False).tolist()) if n_spam else set()
    offsets = dict(zip(workers, root.normal(0, model.heterogeneity, size=len(workers))))
    streams = dict(zip(workers, np.random.SeedSequence(model.seed).spawn(len(workers))))
    kinds = spammer_kinds(spammers, model.spammer_kind)

    def choose_for(worker):
        """The answering function of simulated ``worker``, drawing from its own random stream.

        Parameters
        ----------
        worker : str
            The worker's id (``SIM-<n>``).
        """
        rng = np.random.default_rng(streams[worker])

        def choose(form):
            """An answer for every question of the page ``form``, by radio name.

            Parameters
            ----------
            form : satcal.serve.client.Form
                The parsed page form.
            """
            out = {}
            for name, values in form.radios.items():
                item = name.removeprefix("answer-")
                if worker in spammers:
                    drawn = str(rng.choice(values))  # drawn whatever the kind: the stream stays the same
                    code = _SPAMMER_CODE.get(kinds[worker])
                    out[name] = code if code in values else drawn
                elif item not in scores.index:
                    out[name] = asked_option(form, name) or str(rng.choice(values))
                else:
                    pa = expit(model.intercept + offsets[worker] + model.slope * scores.at[item, "phi_shown_a"])
                    pb = expit(model.intercept + offsets[worker] + model.slope * scores.at[item, "phi_shown_b"])
                    sat_a, sat_b = np.array([rng.random() < pa]), np.array([rng.random() < pb])
                    dphi = np.array([scores.at[item, "phi_shown_a"] - scores.at[item, "phi_shown_b"]])
                    answer = str(_joint_behaviour(_canonical_answers(sat_a, sat_b), sat_a, sat_b, dphi, model, rng)[0])
                    if answer in ("both_good", "both_bad") and rng.random() < model.position_bias:
                        answer = "a_better"
                    out[name] = answer if answer in SHOWN_CODES else str(values[0])
            return out

        return choose

    # the entry carries the batch's simulation token: the server marks these participants
    # simulated, and ingest, calibration.json and the report say so
    from .serve.study import simulation_token
    visits = drive(url, workers, concurrency, choose_for=choose_for, study_id="simulated", progress=progress,
                   simulated=simulation_token(key_digest))
    honest_u = np.array([offsets[w] for w in workers if w not in spammers])
    list_curve = (expit(model.intercept + honest_u[:, None] + model.slope * GRID_TRUTH[None, :]).mean(axis=0)
                  if honest_u.size else expit(model.intercept + model.slope * GRID_TRUTH))
    truth = {"model": asdict(model), "spammers": sorted(spammers), "spammer_kinds": kinds, "served_at": url,
             "worker_offsets": {w: round(float(v), 6) for w, v in offsets.items()},
             "p_sat_grid": GRID_TRUTH.tolist(), "p_sat_list": [round(float(v), 8) for v in list_curve],
             "pages": int(sum(v.pages for v in visits)),
             "errors": [e for v in visits for e in v.errors]}
    return visits, truth


def study_lists(examples: pd.DataFrame, traps: pd.DataFrame | None) -> pd.DataFrame:
    """Examples and traps in one table of lists, each under its ``source_id`` (as the key names
    them).

    Parameters
    ----------
    examples : pandas.DataFrame
        examples.csv.
    traps : pandas.DataFrame or None
        traps.csv, or None.

    Returns
    -------
    pandas.DataFrame
    """
    examples = examples.assign(source_id=lambda d: d["example_id"])
    return pd.concat([examples, traps.assign(source_id=traps["trap_id"])] if traps is not None and len(traps)
                     else [examples], ignore_index=True)
