"""Figures (PNG and PDF), CSV tables and the HTML report of a calibration analysis."""
from __future__ import annotations

import base64
import html
from pathlib import Path

import numpy as np
import pandas as pd

from .measures import STUDY_DISCOUNTS, STUDY_GAINS
from .fileio import atomic_write_text, new_figure, save_figure as _save_figure

__all__ = ["write_analysis", "figure_sat", "figure_pref", "figure_bias", "figure_intervals",
           "render_report", "reading_guide"]

FIGURES = ("fig1_sat", "fig2_pref", "fig3_bias")
_GAIN_COLOURS = {"bin2": "#8c564b", "bin1": "#e377c2", "exp5": "#d62728", "exp3": "#ff7f0e",
                 "exp2": "#2ca02c", "lin": "#1f77b4"}


def _ordered(values, preferred) -> list[str]:
    values = list(dict.fromkeys(values))
    return [v for v in preferred if v in values] + [v for v in values if v not in preferred]




def _colour(gain: str, i: int) -> str:
    return _GAIN_COLOURS.get(gain, f"C{i % 10}")


def _published(curves: pd.DataFrame) -> pd.DataFrame:
    """The paper's curves (the joint model's per-list curves have ``sat_model = joint``)."""
    return curves[curves["sat_model"] != "joint"] if "sat_model" in curves.columns else curves


def _curve_figure(result, curve: str, title: str, xlabel: str, ylabel: str, diagonal: bool,
                  sat_model: str = "published"):
    curves = result.curves[result.curves["curve"] == curve]
    if "sat_model" in curves.columns:
        curves = curves[curves["sat_model"] == sat_model]
    points = result.points[result.points["curve"] == curve]
    discounts = _ordered(curves["discount"], STUDY_DISCOUNTS)
    gains = _ordered(curves["gain"], STUDY_GAINS)
    ncol = min(3, len(discounts))
    nrow = int(np.ceil(len(discounts) / ncol))
    fig, axes = new_figure(nrow, ncol, figsize=(4.2 * ncol, 3.8 * nrow), sharex=True, sharey=True,
                             squeeze=False)
    for ax, disc in zip(axes.flat, discounts):
        if diagonal:
            ax.plot([0, 1], [0, 1], color="0.6", ls="--", lw=1, label="P = x (ideal)")
        else:
            ax.axhline(1.0, color="0.6", ls="--", lw=1, label="P = 1 (ideal)")
        for i, gain in enumerate(gains):
            c = curves[(curves["discount"] == disc) & (curves["gain"] == gain)]
            p = points[(points["discount"] == disc) & (points["gain"] == gain) & (points["n"] > 0)]
            if c.empty:
                continue
            col = _colour(gain, i)
            ax.plot(c["x"], c["p"], color=col, lw=1.8, label=gain)
            ax.scatter(p["x_mid"], p["proportion"], color=col, s=14, alpha=0.8, zorder=3)
        ax.set_title(f"discount: {disc}" if disc else "other measures", fontsize=11)
        if not disc:  # measures beyond DCG: one line each, named in the panel
            ax.legend(fontsize=8, loc="upper left", frameon=False)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.25)
    for ax in axes.flat[len(discounts):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False,
               title="gain (lines: quadratic logit fit; points: bin proportions)")
    fig.suptitle(title, fontsize=13)
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    return fig


def figure_sat(result):
    """Figure 1: P(Sat|phi), one panel per discount, a line and points per gain."""
    return _curve_figure(result, "sat", "P(Sat | phi): probability that users are satisfied",
                         "phi", "P(Sat | phi)", diagonal=True)


def figure_sat_joint(result):
    """Figure 1b: the joint model's per-list s(phi), laid out as Figure 1 (the points are the
    published estimator's bins, for reference)."""
    return _curve_figure(result, "sat", "s(phi): probability that a list with score phi satisfies a user "
                         "(joint model, all four answers)", "phi", "s(phi)", diagonal=True, sat_model="joint")


def figure_pref(result):
    """Figure 2: P(Pref|dphi), one panel per discount, a line and points per gain."""
    return _curve_figure(result, "pref", "P(Pref | dphi): probability that users agree with the "
                         "sign of dphi", "|dphi|", "P(Pref | dphi)", diagonal=False)


def figure_bias(result):
    """Figure 3: boxplots of b1, b2, b3 over formulations, grouped by gain and by discount."""
    bias = result.bias
    if "family" in bias.columns:  # gain and discount exist in the DCG family only
        bias = bias[bias["family"] == "dcg"]
    fig, axes = new_figure(2, 3, figsize=(13, 7))
    for row, factor, order in ((0, "gain", STUDY_GAINS), (1, "discount", STUDY_DISCOUNTS)):
        levels = _ordered(bias[factor], order)
        for col, ind in enumerate(("b1", "b2", "b3")):
            ax = axes[row, col]
            data = [bias.loc[bias[factor] == lv, ind].to_numpy() for lv in levels]
            ax.boxplot(data, tick_labels=levels, widths=0.6)
            ax.set_title(f"{ind} by {factor}")
            ax.grid(axis="y", alpha=0.25)
    fig.suptitle("Bias of each formulation (lower is better)", fontsize=13)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def figure_intervals(result):
    """Per-formulation bootstrap intervals of b1, b2, b3 (needs a bootstrap)."""
    bias = result.bias.sort_values("b1")
    fig, axes = new_figure(1, 3, figsize=(14, max(5, 0.22 * len(bias) + 1.5)), sharey=True)
    y = np.arange(len(bias))
    for ax, ind in zip(axes, ("b1", "b2", "b3")):
        err = np.vstack([bias[ind] - bias[f"{ind}_lo"], bias[f"{ind}_hi"] - bias[ind]])
        ax.errorbar(bias[ind], y, xerr=err, fmt="o", ms=3, color="k", ecolor="0.5", capsize=2)
        ax.set_title(f"{ind} (95% bootstrap interval)")
        ax.grid(axis="x", alpha=0.25)
    axes[0].set_yticks(y, bias["formulation"])
    axes[0].invert_yaxis()
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------
# Reading guide and HTML
# --------------------------------------------------------------------------------------------
def _first_crossing(x: np.ndarray, p: np.ndarray, level: float):
    above = np.flatnonzero(p >= level)
    return float(x[above[0]]) if above.size else None


def reading_guide(result) -> list[str]:
    """Plain-language findings drawn from the tables (a few sentences, as HTML fragments)."""
    rank = result.ranking
    best = rank.iloc[0]
    worst = rank.iloc[-1]
    out = [f"The least biased formulation overall is <b>{html.escape(best.formulation)}</b> "
           f"(b1 = {best.b1:.3f}, b2 = {best.b2:.3f}, b3 = {best.b3:.3f}); the most biased is "
           f"<b>{html.escape(worst.formulation)}</b> (b1 = {worst.b1:.3f}, b2 = {worst.b2:.3f}, "
           f"b3 = {worst.b3:.3f}). Next best: "
           + ", ".join(html.escape(f) for f in rank.formulation.iloc[1:4]) + "."]
    for ind, meaning in (("b1", "distance from P(Sat|phi) = phi"), ("b2", "gaps at phi = 0 and 1"),
                         ("b3", "users' disagreement with dphi")):
        row = result.bias.loc[result.bias[ind].idxmin()]
        out.append(f"Lowest {ind} ({meaning}): {html.escape(row.formulation)} ({row[ind]:.3f}).")
    if not result.anova.empty:
        parts = []
        for ind, g in result.anova.groupby("indicator"):
            g = g[g.term != "Residual"].set_index("term")
            top = g["eta_sq"].idxmax()
            parts.append(f"{ind}: {top} explains {100 * g.loc[top, 'eta_sq']:.0f}% of the variance "
                         f"(p = {g.loc[top, 'p']:.2g})")
        out.append("ANOVA over the formulations: " + "; ".join(parts) + ".")
    c = _published(result.curves)
    sat = c[(c.formulation == best.formulation) & (c.curve == "sat")]
    pref = c[(c.formulation == best.formulation) & (c.curve == "pref")]
    if not sat.empty:
        x, p = sat.x.to_numpy(), sat.p.to_numpy()
        share_above = np.mean(p > x)
        out.append(f"Under {html.escape(best.formulation)}, users are satisfied with probability "
                   f"{p[0]:.2f} at phi = 0 and {p[-1]:.2f} at phi = 1; the curve lies above the "
                   f"diagonal (the score underestimates satisfaction) over {100 * share_above:.0f}% "
                   f"of [0, 1].")
    if not pref.empty:
        half = _first_crossing(pref.x.to_numpy(), pref.p.to_numpy(), 0.5)
        out.append("A majority of users agree with the sign of dphi only once |dphi| reaches "
                   f"{half:.2f}." if half is not None else
                   "P(Pref|dphi) never reaches 0.5: most users do not side with the measure's "
                   "preference at any difference.")
    if "monotone" in result.fits.columns:
        bent = result.fits[~result.fits["monotone"].astype(bool)]
        if len(bent):
            names = ", ".join(f"{html.escape(r.formulation)} ({r.curve})" for r in bent.head(8).itertuples())
            out.append(f"{len(bent)} fitted curve(s) decrease somewhere on [0, 1], which a "
                       f"probability of satisfaction should not: {names}{' ...' if len(bent) > 8 else ''}. "
                       "Read them with care; satcal evaluate maps scores through their monotone "
                       "(isotonic) fit instead.")
    other = _beyond_dcg_paragraph(result)
    if other:
        out.append(other)
    mc = result.model_check
    if not mc.empty:
        means = mc.groupby("model")["log_loss"].mean()
        verdict = ("adequate" if means["quadratic_logit"] <= means["isotonic"] + 0.005 else
                   "possibly too rigid")
        out.append(f"Model check (cross-validated log loss, mean over curves): quadratic logit "
                   f"{means['quadratic_logit']:.4f}, linear logit {means['linear_logit']:.4f}, "
                   f"isotonic {means['isotonic']:.4f}: the quadratic form looks {verdict}.")
    return out


def _beyond_dcg_paragraph(result) -> str | None:
    """What the joint ranking says about the measures beyond DCG, and how sure it is."""
    bias = result.bias
    if "family" not in bias.columns or (bias["family"] == "dcg").all():
        return None
    rank = result.ranking.reset_index(drop=True)
    family = bias.set_index("formulation")["family"]
    is_dcg = rank["formulation"].map(family).eq("dcg")
    n = len(rank)
    placed = ", ".join(f"{html.escape(f)} #{i + 1}" for i, f in rank.loc[~is_dcg, "formulation"].items())
    text = (f"Measures beyond DCG (RBP as a geometric discount, ERR, RR, AP, P), ranked with the DCG "
            f"formulations on the same scale (mean rank "
            f"over b1-b3, 1 to {n}): {placed}.")
    if not is_dcg.any():
        return text
    best_dcg = rank.loc[is_dcg, "formulation"].iloc[0]
    best_other = rank.loc[~is_dcg, "formulation"].iloc[0]
    if result.bootstrap is None:
        return text + (" How sure this is needs the bootstrap (run the analysis with --bootstrap "
                       "1000): without intervals, nearby ranks may be noise.")
    pairs = result.bootstrap.pairwise
    pair = pairs[(pairs.indicator == "b1") & (((pairs.formulation_1 == best_dcg) & (pairs.formulation_2 == best_other))
                                             | ((pairs.formulation_1 == best_other) & (pairs.formulation_2 == best_dcg)))]
    if pair.empty:
        return text
    r = pair.iloc[0]
    sign = 1 if r.formulation_1 == best_other else -1
    d, lo, hi = sign * r["diff"], *sorted((sign * r["lo"], sign * r["hi"]))
    p_text = f"p < {1 / result.bootstrap.replicates:.2g}" if r["p"] == 0 else f"p = {r['p']:.2g}"
    verdict = ("the answers cannot tell the two apart" if lo <= 0 <= hi else
               f"{html.escape(best_other if d < 0 else best_dcg)} is less biased, beyond the "
               "bootstrap's doubt")
    return text + (f" The best of them, {html.escape(best_other)}, against the best DCG formulation, "
                   f"{html.escape(best_dcg)}: b1 differs by {d:+.3f} (95% interval {lo:+.3f} to "
                   f"{hi:+.3f}, {p_text}), so {verdict}. A measure's rank says how closely its "
                   "score tracks the probability that users are satisfied, not how well it ranks "
                   "systems (see satcal reliability).")


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.5}
h1{font-size:1.7em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;font-size:.85em;margin:1em 0}th,td{border:1px solid #ddd;padding:.25em .6em;
text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
img{max-width:100%;border:1px solid #eee}.note{background:#f8f8f2;border-left:4px solid #bbb;padding:.5em 1em}
details{margin:1em 0}summary{cursor:pointer;font-weight:600}.guide li{margin:.3em 0}
.banner{background:#fff3cd;border:1px solid #e0b000;padding:.6em 1em;border-radius:4px}
.params th{text-align:left}
"""


def _table_html(df: pd.DataFrame, digits: int = 4, max_rows: int | None = None) -> str:
    shown = df if max_rows is None else df.head(max_rows)
    return shown.to_html(index=False, float_format=lambda v: f"{v:.{digits}g}", border=0, escape=True)


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def _parameters_html(prov: dict) -> str:
    """The study's parameters, first thing in the report (from calibration.json)."""
    norms = sorted(set(prov.get("normalization", {}).values()))
    negs = sorted(set(prov.get("negatives", {}).values()))
    rows = [("documents per list (k)", prov.get("k")), ("relevance levels (L)", prov.get("levels")),
            ("normalisation", ", ".join(norms)), ("negative levels", ", ".join(negs)),
            ("formulations and measures", len(prov.get("formulations", []))),
            ("preference population", prov.get("population")),
            ("satisfaction model", ", ".join(prov.get("sat_model", []))),
            ("answers", prov.get("answers")), ("examples", prov.get("examples")),
            ("workers", prov.get("workers")), ("bootstrap replicates", prov.get("bootstrap")),
            ("seed", prov.get("seed")), ("answers simulated", "yes" if prov.get("simulated") else "no")]
    cells = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
                    for k, v in rows if v not in (None, ""))
    return ("<h2>Study</h2><table class='params'>" + cells + "</table><p><small>All of it, with "
            "the hashes of the judgments and answers and the package versions, is in "
            "<code>calibration.json</code>.</small></p>")


def render_report(result, figure_paths: dict[str, Path]) -> str:
    """The HTML report: findings, figures and every table (self-contained)."""
    meta = result.meta
    counts = meta.get("answer_counts", {})
    title = f"satcal calibration report: {html.escape(str(meta.get('name') or 'study'))}"
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>",
             f"<style>{_CSS}</style></head><body><h1>{title}</h1>"]
    parts.append(f"<p>{meta.get('n_examples', 0)} answered examples "
                 f"({', '.join(f'{k}: {v}' for k, v in counts.items())}); "
                 f"{meta.get('n_sat_lists', 0)} lists judged both good or both bad; "
                 f"{meta.get('n_formulations', 0)} formulations; preference population "
                 f"<code>{html.escape(str(meta.get('population')))}</code>.</p>")
    prov = meta.get("provenance", {})
    if prov.get("simulated"):
        parts.append("<p class='banner'><b>Simulated answers.</b> The answers analysed here were "
                     "written by satcal's simulated crowd from a known user model, not given by "
                     "people: the figures show what the method recovers, not what users think.</p>")
    if prov:
        parts.append(_parameters_html(prov))
    if meta.get("notice"):
        parts.append(f"<p class='note'>{html.escape(meta['notice'])}</p>")
    parts.append("<h2>Reading guide</h2><ul class='guide'>"
                 + "".join(f"<li>{s}</li>" for s in reading_guide(result)) + "</ul>")
    parts.append("<p>How to read the figures: in Figure 1 a curve above the diagonal means users "
                 "are more satisfied than phi says (the measure underestimates satisfaction), below "
                 "it that they are less. In Figure 2 the ideal is P = 1: the lower the curve, the "
                 "larger a difference must be before users agree with it. Points are the observed "
                 "proportions per bin (see the points table for their Wilson intervals).</p>")
    if "b1_joint" in result.bias.columns:
        parts.append(_joint_paragraph(result))
    captions = {"fig1_sat": "Figure 1. P(Sat | phi)", "fig2_pref": "Figure 2. P(Pref | dphi)",
                "fig1b_sat_joint": "Figure 1b. s(phi), the per-list satisfaction of the joint model",
                "fig3_bias": "Figure 3. Bias indicators by gain and by discount",
                "fig4_intervals": "Figure 4. Bootstrap intervals of each formulation's bias"}
    parts.append("<h2>Figures</h2>")
    for name, path in figure_paths.items():
        parts.append(f"<h3>{captions.get(name, name)}</h3>{_img(path)}")
    parts.append("<h2>Bias of each formulation</h2><p>b1 = mean |phi - P(Sat|phi)|, "
                 "b2 = (P(Sat|0) + 1 - P(Sat|1))/2, b3 = mean (1 - P(Pref|dphi)), over a 1001-point "
                 "grid; ordered by mean rank (1 = least biased).</p>")
    ranking = result.ranking
    if result.bootstrap is not None:
        ranking = ranking.merge(result.bias.drop(columns=["b1", "b2", "b3", "gain", "discount"]),
                                on="formulation")
    parts.append(_table_html(ranking))
    if result.bootstrap is not None:
        pairs = result.bootstrap.pairwise
        parts.append("<h3>Pairwise differences (bootstrap)</h3><p>Difference in each indicator "
                     "between formulations, with 95% interval, two-sided bootstrap p-value and its "
                     "Holm adjustment over all the pairs of that indicator (<code>p_holm</code>; "
                     f"a bootstrap p-value cannot go below 1/B = {1 / result.bootstrap.replicates:.2g}, "
                     "and p = 0 means below it); the 30 smallest p-values for b1 are shown, all are "
                     "in <code>bias_pairs.csv</code>.</p>")
        parts.append(_table_html(pairs[pairs.indicator == "b1"].sort_values("p").head(30)))
    parts.append("<h2>ANOVA</h2><p>Additive model value ~ gain + discount over the formulations' "
                 "point estimates; sequential sums of squares; eta squared = SS / total SS.</p>")
    parts.append(_table_html(result.anova))
    parts.append("<h2>Model check</h2><p>Cross-validated log loss and Brier score of the "
                 "quadratic logit against a linear logit and an isotonic (monotone) fit.</p>")
    if not result.model_check.empty:
        summary = result.model_check.groupby(["curve", "model"], as_index=False)[["log_loss", "brier"]].mean()
        parts.append(_table_html(summary))
        parts.append("<details><summary>Per formulation</summary>"
                     + _table_html(result.model_check) + "</details>")
    crowd = result.meta.get("crowd")
    if crowd:
        parts.append(_crowd_paragraph(crowd, getattr(result, "workers", None)))
    if getattr(result, "workers", None) is not None and len(result.workers):
        w = result.workers
        excluded = w[w["excluded"].astype(str) == "True"]
        parts.append(f"<h2>Workers</h2><p>{len(w)} workers answered; {len(excluded)} were excluded "
                     f"because their trust (share of traps answered correctly) fell below the "
                     f"threshold, and their answers left out of every table above"
                     f"{'; ' + str(result.meta['rejected_rows']) + ' rows were rejected in all (see rejects.csv)' if 'rejected_rows' in result.meta else ''}.</p>")
        parts.append(_table_html(w.sort_values(["excluded", "trust"], ascending=[False, True])))
    parts.append("<h2>Fits</h2><details><summary>Coefficients of every curve</summary>"
                 + _table_html(result.fits) + "</details>")
    parts.append("<h2>Binned points</h2><details><summary>Per formulation, curve and bin</summary>"
                 + _table_html(result.points) + "</details>")
    parts.append("<p>Full curves (1001 points each, with 95% bands) are in <code>curves.csv</code>."
                 "</p><footer><p><small>Made by satcal "
                 f"{html.escape(_version())}.</small></p></footer></body></html>")
    return "\n".join(parts)


def _joint_paragraph(result) -> str:
    """What each satisfaction curve estimates, in words, and how far apart they are."""
    c = result.curves[result.curves["curve"] == "sat"]
    pub = c[c["sat_model"] == "published"].groupby("x")["p"].mean()
    joint = c[c["sat_model"] == "joint"].groupby("x")["p"].mean()
    gap = float(np.mean(np.abs(pub.to_numpy() - joint.to_numpy())))
    return ("<h2>Two satisfaction curves</h2><p>Figure 1 is the paper's P(Sat | phi): it is fitted "
            "on the answers that called both lists good or both bad, so it estimates how often a "
            "list with score phi is called good <i>among answers where its partner list got the same "
            "verdict</i>. Figure 1b is s(phi) of the joint model, fitted on all four answers: the "
            "probability that a list with score phi satisfies a user, whatever its partner, under a "
            "model where each list satisfies independently, a user who likes both or neither may "
            "still state a preference (pi, for the higher-scored list with probability delta), and "
            "a user who likes one list prefers it except for a lapse (lambda). s(phi) is the curve "
            "to read as 'the probability that users are satisfied'; b1_joint and b2_joint in the bias "
            f"table are its indicators. Averaged over formulations, the two curves differ by "
            f"{gap:.3f} in probability on [0, 1]. The joint bands come from the observed information, "
            "not the bootstrap.</p>")


def _crowd_paragraph(crowd: dict, workers) -> str:
    """How many answers each example got, whether workers agreed, and what screening flagged."""
    text = (f"<h2>Crowd</h2><p>{crowd['answers']} answers to {crowd['examples']} examples from kept "
            f"workers: {crowd['answers_per_example_mean']:.2f} per example on average (the design asked "
            f"for {crowd['answers_per_example_design']}). Repeated answers to an example are separate "
            "observations in every fit, as in the published model.")
    agreed = crowd.get("agreement")
    if agreed:
        text += (f" Agreement between workers on the {agreed['examples']} examples answered more than "
                 f"once: Krippendorff's alpha = {agreed['krippendorff_alpha']:.3f} (nominal, over the four "
                 f"answers; 1 is perfect agreement, 0 what chance gives), and {100 * agreed['pairwise_agreement']:.1f}% "
                 "of pairs of answers to the same example agree.")
    else:
        text += (" No example was answered more than once, so agreement between workers cannot be "
                 "measured (set [design] answers_per_example to 2 or more).")
    if workers is not None and len(workers) and "too_fast" in workers.columns:
        fast = int(workers["too_fast"].astype(str).eq("True").sum())
        side = int(workers["same_side"].astype(str).eq("True").sum())
        text += (f" Screening flagged {fast} workers as answering too fast (faster than "
                 "quality.screen_seconds_per_answer seconds an item) and "
                 f"{side} as nearly always choosing the same side as shown (flags, not exclusions: "
                 "see the workers table).")
    return text + "</p>"


def _version() -> str:
    from . import __version__
    return __version__


def write_analysis(result, out_dir, figures: bool = True, report: bool = True) -> dict[str, str]:
    """Write the tables (CSV), figures (PNG, PDF) and report.html into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    for name, table in result.tables().items():
        path = out / f"{name}.csv"
        atomic_write_text(path, table.to_csv(index=False, lineterminator="\n", float_format="%.10g"))
        written[name] = str(path)
    if "provenance" in result.meta:
        import json
        path = out / "calibration.json"
        atomic_write_text(path, json.dumps(result.meta["provenance"], indent=2, sort_keys=True) + "\n")
        written["calibration"] = str(path)
    pngs: dict[str, Path] = {}
    if figures or report:
        fig_dir = out / "figures"
        fig_dir.mkdir(exist_ok=True)
        makers = {"fig1_sat": figure_sat, "fig2_pref": figure_pref, "fig3_bias": figure_bias}
        if "sat_model" in result.curves.columns and (result.curves["sat_model"] == "joint").any():
            makers["fig1b_sat_joint"] = figure_sat_joint
        if result.bootstrap is not None:
            makers["fig4_intervals"] = figure_intervals
        for name, make in makers.items():
            png, pdf = _save_figure(make(result), fig_dir / name)
            pngs[name] = png
            written[f"{name}.png"], written[f"{name}.pdf"] = str(png), str(pdf)
    if report:
        path = out / "report.html"
        atomic_write_text(path, render_report(result, pngs))
        written["report"] = str(path)
    return written
