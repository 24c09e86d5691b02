"""Figures (PNG and PDF), CSV tables and the HTML report of a calibration analysis."""
from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pandas as pd
from markupsafe import Markup

from .measures import STUDY_DISCOUNTS, STUDY_GAINS
from ._results import write_table
from .fileio import atomic_write_text, gain_colour, panel_axes, save_figure as _save_figure

__all__ = ["write_analysis", "write_figures", "figure_standardised", "figure_sat", "figure_sat_joint", "figure_pref",
           "figure_bias", "figure_intervals", "render_report", "reading_guide"]

FIGURES = ("fig1_sat", "fig2_pref", "fig3_bias")


def _ordered(values, preferred) -> list[str]:
    values = list(dict.fromkeys(values))
    return [v for v in preferred if v in values] + [v for v in values if v not in preferred]


def _published(curves: pd.DataFrame) -> pd.DataFrame:
    """The paper's curves (the joint model's per-list curves have ``sat_model = joint``, the
    standardised ones ``standardised``)."""
    return curves[curves["sat_model"] == "published"] if "sat_model" in curves.columns else curves


#: Above this share of tied reference pairs (ties_std), the reading guide says that the leading
#: formulation's P* and b3_std describe only the pairs it orders.
TIES_NOTE = 0.10

#: Band columns of curves.csv, preferred first, and what they are.
_BANDS = (("boot_lo", "boot_hi", "bootstrap"), ("lo", "hi", "Wald"))


def _curve_figure(result, curve: str, title: str, xlabel: str, ylabel: str, diagonal: bool,
                  sat_model: str = "published", ax=None, discounts=None, show_points: bool = True):
    curves = result.curves[result.curves["curve"] == curve]
    extrapolated = False
    if "sat_model" in curves.columns:
        curves = curves[curves["sat_model"] == sat_model]
    points = result.points[result.points["curve"] == curve]
    shown = _ordered(curves["discount"], STUDY_DISCOUNTS)
    if discounts is not None:
        unknown = sorted(set(discounts) - set(shown))
        if unknown:
            raise ValueError(f"discounts: {unknown} not in this result (it has {shown})")
        shown = list(discounts)
    gains = _ordered(curves["gain"], STUDY_GAINS)
    # 95% bands: the bootstrap's when there was one, else the fit's own (Wald) interval
    band = next(((lo, hi) for lo, hi, _ in _BANDS if lo in curves.columns and curves[lo].notna().any()), None)
    ncol = min(3, len(shown))
    nrow = int(np.ceil(len(shown) / ncol))
    fig, axes, new = panel_axes(ax, len(shown), nrow, ncol, figsize=(4.2 * ncol, 3.8 * nrow),
                                sharex=True, sharey=True)
    for i_panel, (panel, disc) in enumerate(zip(axes, shown)):
        if diagonal:
            panel.plot([0, 1], [0, 1], color="0.6", ls="--", lw=1, label="P = x (ideal)")
        else:
            panel.axhline(1.0, color="0.6", ls="--", lw=1, label="P = 1 (ideal)")
        for i, gain in enumerate(gains):
            c = curves[(curves["discount"] == disc) & (curves["gain"] == gain)]
            p = points[(points["discount"] == disc) & (points["gain"] == gain) & (points["n"] > 0)]
            if c.empty:
                continue
            col = gain_colour(gain, i)
            # solid where the answers hold data, dotted where the curve only extrapolates
            sup = c["supported"].astype(bool).to_numpy() if "supported" in c.columns else np.ones(len(c), bool)
            extrapolated = extrapolated or not sup.all()
            if band is not None:
                panel.fill_between(c["x"], c[band[0]], c[band[1]], where=sup, color=col, alpha=0.12, lw=0)
            panel.plot(c["x"].where(sup), c["p"].where(sup), color=col, lw=1.8, label=gain)
            if not sup.all():
                panel.plot(c["x"].where(~sup), c["p"].where(~sup), color=col, lw=1.0, ls=":")
            if show_points:
                panel.scatter(p["x_mid"], p["proportion"], color=col, s=14, alpha=0.8, zorder=3)
        panel.set_title(f"discount: {disc}" if disc else "other measures", fontsize=11)
        if not disc or not new:  # measures beyond DCG, or a caller's axes: name the lines here
            panel.legend(fontsize=8, loc="upper left", frameon=False)
        panel.set_xlim(0, 1)
        panel.set_ylim(0, 1.02)
        panel.grid(alpha=0.25)
        if not new or i_panel >= len(shown) - ncol:
            panel.set_xlabel(xlabel)
        if not new or i_panel % ncol == 0:
            panel.set_ylabel(ylabel)
    if not new:
        return fig
    for panel in axes[len(shown):]:
        panel.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    what = next((name for lo, _, name in _BANDS if band and band[0] == lo), None)
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False,
               title="gain (lines: quadratic logit fit" + (f"; bands: 95% {what} interval" if what else "")
               + ("; points: bin proportions" if show_points else "")
               + ("; dotted: no data there, extrapolated" if extrapolated else "") + ")")
    fig.suptitle(title, fontsize=13)
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    return fig


def figure_sat(result, ax=None, discounts=None):
    """Figure 1: P(Sat|phi), one panel per discount, a line and points per gain.

    Parameters
    ----------
    result : CalibrationResult
    ax : matplotlib Axes or array of Axes, optional
        Draw into these (one per panel) instead of a new figure, e.g. ``plt.subplots()``'s.
    discounts : list of str, optional
        The discounts to draw (default all), one panel each.

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _curve_figure(result, "sat", "P(Sat | phi): probability that users are satisfied",
                         "phi", "P(Sat | phi)", diagonal=True, ax=ax, discounts=discounts)


def figure_sat_joint(result, ax=None, discounts=None):
    """Figure 1b: the joint model's per-list s(phi), laid out as Figure 1 (no points: no answer
    observes one list's satisfaction alone).

    Parameters
    ----------
    result : CalibrationResult
    ax : matplotlib Axes or array of Axes, optional
        As in :func:`figure_sat`.
    discounts : list of str, optional
        As in :func:`figure_sat`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _curve_figure(result, "sat", "s(phi): probability that a list with score phi satisfies a user "
                         "(joint model, all four answers)", "phi", "s(phi)", diagonal=True, sat_model="joint",
                         ax=ax, discounts=discounts, show_points=False)


def _standardised_choice(result, top: int = 3) -> list[str]:
    """The formulations Figure 0 draws by default: the ``top`` first of the standardised
    ranking, lin-const (the paper's least-biased) and the last, in rank order."""
    order = result.ranking_by("standardised")["formulation"].tolist()
    chosen = order[:top] + [f for f in ("lin-const", order[-1]) if f in order]
    return sorted(dict.fromkeys(chosen), key=order.index)


def _support_mask(result, rows: pd.DataFrame, formulation: str, curve: str) -> np.ndarray:
    """Where a standardised curve has data under it: the range ``calibration.json`` records
    for the formulation's per-list curve (every answered list's phi) or its preference curve
    (the answers' |dphi|), whatever range the indicators were computed over; else the
    ``supported`` column."""
    from .analysis.indicators import supported_mask
    ranges = result.meta.get("provenance", {}).get("support", {}).get("ranges", {})
    bounds = ranges.get(formulation, {}).get({"sat": "sat_joint", "pref": "pref"}[curve])
    if bounds is not None:
        lo, hi = (np.nan if v is None else float(v) for v in bounds)
        return supported_mask(np.array([lo, hi]), rows["x"].to_numpy(float))
    if "supported" in rows.columns:
        return rows["supported"].astype(bool).to_numpy()
    return np.ones(len(rows), bool)


def _reference_points(result, n_bins: int = 10) -> dict | None:
    """Per formulation and curve, the reference population's binned targets of the standardised
    fits (:func:`satcal.analysis.standardise.standardised_targets`): bins holding at least
    ``SUPPORT_MIN_COUNT`` lists (pairs), each at its lists' mean score, with their mean S
    (agreement). None when the result does not carry its reference population."""
    std = result.meta.get("standardisation")
    if not std:
        return None
    from .analysis.indicators import SUPPORT_MIN_COUNT
    from .measures import bin_index
    from .analysis.standardise import standardised_targets
    targets = standardised_targets(std["thetas"], std["reference_phi"], std["weights"])
    forms = list(result.bias["formulation"])
    out = {}
    for curve, rows in targets.items():
        for f, (x, n, y) in zip(forms, rows):
            b = bin_index(x, n_bins)
            count = np.bincount(b, weights=n, minlength=n_bins)
            with np.errstate(invalid="ignore", divide="ignore"):
                mx = np.bincount(b, weights=n * x, minlength=n_bins) / count
                my = np.bincount(b, weights=n * y, minlength=n_bins) / count
            keep = count >= SUPPORT_MIN_COUNT
            out[(f, curve)] = (mx[keep], my[keep])
    return out


def figure_standardised(result, ax=None, formulations=None):
    """Figure 0: the standardised curves the ranking leads with, for a few formulations.

    Left, s*_f(phi) (``curves.csv`` rows ``sat_model = standardised``, ``curve = sat``) with the
    diagonal s* = phi: b1_std is the curve's mean vertical distance from it over the solid part
    (the indicators' range), b2_std the gaps at its ends. Right, the preference curve the model
    implies, P*_f(|dphi|), against the ideal P = 1 (b3_std is the mean gap), fitted over the
    reference pairs f orders; its legend gives the share f ties (``ties_std``). Bands are the 95%
    bootstrap percentile bands when the analysis was bootstrapped. A curve is solid where the
    study's answers hold data (the supported range recorded in ``calibration.json``: every
    answered list's phi_f, every answer's |dphi_f|) and dotted, without a band, beyond it.

    Parameters
    ----------
    result : CalibrationResult
        A calibration with the standardised estimator (the joint model on a study with
        judgments or a given reference population).
    ax : array of two matplotlib Axes, optional
        Draw into these instead of a new figure.
    formulations : list of str, optional
        The formulations to draw; default the first three of the standardised ranking,
        lin-const (the paper's least-biased) and the last-ranked.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        The result has no standardised curves, or ``formulations`` names one it lacks.
    """
    c = result.curves
    if "sat_model" not in c.columns or not (c["sat_model"] == "standardised").any():
        raise ValueError("no standardised curves in this result: run the joint model "
                         "(sat_model='both') on a study with judgments")
    c = c[c["sat_model"] == "standardised"]
    known = list(dict.fromkeys(c["formulation"]))
    shown = _standardised_choice(result) if formulations is None else list(formulations)
    unknown = [f for f in shown if f not in known]
    if unknown:
        raise ValueError(f"formulations: {unknown} not in this result (it has {', '.join(known)})")
    ranking = result.ranking_by("standardised").set_index("formulation")
    ties = (result.bias.set_index("formulation")["ties_std"] if "ties_std" in result.bias.columns
            else pd.Series(dtype=float))
    banded = "boot_lo" in c.columns and c["boot_lo"].notna().any()
    points = _reference_points(result)
    fig, axes, new = panel_axes(ax, 2, 1, 2, figsize=(11, 6.6))
    extrapolated = False
    panels = (("sat", "phi", "s*(phi)", ("b1_std", "b2_std"), "s* = phi (ideal)"),
              ("pref", "|dphi|", "P*(|dphi|)", ("b3_std",), "P = 1 (ideal)"))
    for panel, (curve, xlabel, ylabel, inds, ideal) in zip(axes, panels):
        if curve == "sat":
            panel.plot([0, 1], [0, 1], color="0.45", ls="--", lw=1, label=ideal)
        else:
            panel.axhline(1.0, color="0.45", ls="--", lw=1, label=ideal)
        for i, f in enumerate(shown):
            rows = c[(c["formulation"] == f) & (c["curve"] == curve)].sort_values("x")
            x, p = rows["x"].to_numpy(float), rows["p"].to_numpy(float)
            sup = _support_mask(result, rows, f, curve)
            extrapolated = extrapolated or not sup.all()
            col = f"C{i % 10}"
            label = f
            if f in ranking.index:
                r = ranking.loc[f]
                label += f" (mean rank {r['mean_rank']:.2f}; " + ", ".join(f"{k} {r[k]:.3f}" for k in inds)
                # P* describes the pairs f orders: say how many it does not
                label += (f"; ties {100 * ties[f]:.0f}%" if curve == "pref" and f in ties.index else "") + ")"
            if banded:
                panel.fill_between(x, rows["boot_lo"], rows["boot_hi"], where=sup, color=col, alpha=0.15,
                                   lw=0)
            panel.plot(np.where(sup, x, np.nan), np.where(sup, p, np.nan), color=col, lw=2.0, label=label)
            if not sup.all():
                panel.plot(np.where(sup, np.nan, x), np.where(sup, np.nan, p), color=col, lw=1.0, ls=":")
            if points is not None:
                px, py = points[(f, curve)]
                inside = np.interp(px, x, sup.astype(float)) > 0.5   # beyond: S extrapolated too
                for keep, alpha in ((inside, 1.0), (~inside, 0.35)):
                    panel.scatter(px[keep], py[keep], color=col, s=16, marker="o", facecolors="none", lw=1.0,
                                  alpha=alpha, zorder=3)
        panel.set_xlim(0, 1)
        panel.set_ylim(0, 1.02)
        panel.grid(alpha=0.25)
        panel.set_xlabel(xlabel, fontsize=11)
        panel.set_ylabel(ylabel, fontsize=11)
        panel.set_title("s*(phi): probability that a list\nwith score phi satisfies a user" if curve == "sat"
                        else "P*(|dphi|): probability that an answer sides with\nthe higher-scored list (pairs it orders)",
                        fontsize=11)
        panel.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False,
                     title="formulation (mean rank over b1_std-b3_std; 1 = least biased)" if curve == "sat"
                     else "formulation", title_fontsize=9)
    if new:
        note = ("lines: standardised fits over the reference population of lists"
                + ("; bands: 95% bootstrap interval" if banded else ""))
        if points is not None or extrapolated:
            note += "\n" + "; ".join(
                ([("circles: the reference population's mean per bin, what the line is fitted to")]
                 if points is not None else [])
                + (["dotted: beyond the range the answers cover"] if extrapolated else []))
        fig.suptitle("The standardised curves the ranking leads with", fontsize=13, y=0.99, va="top")
        fig.text(0.5, 0.945, note, ha="center", va="top", fontsize=9.5, linespacing=1.4)
        fig.tight_layout(rect=(0, 0, 1, 0.89))
    return fig


def figure_pref(result, ax=None, discounts=None):
    """Figure 2: P(Pref|dphi), one panel per discount, a line and points per gain.

    Parameters
    ----------
    result : CalibrationResult
    ax : matplotlib Axes or array of Axes, optional
        As in :func:`figure_sat`.
    discounts : list of str, optional
        As in :func:`figure_sat`.

    Returns
    -------
    matplotlib.figure.Figure

    References
    ----------
    Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the
    correlation between DCG and user satisfaction? ECIR 2015 (Figures 1 to 3).
    """
    return _curve_figure(result, "pref", "P(Pref | dphi): probability that users agree with the "
                         "sign of dphi", "|dphi|", "P(Pref | dphi)", diagonal=False, ax=ax, discounts=discounts)


def figure_bias(result, ax=None):
    """Figure 3: boxplots of b1, b2, b3 over formulations, by gain (first three panels) and by
    discount (last three).

    Parameters
    ----------
    result : CalibrationResult
    ax : array of six matplotlib Axes, optional
        Draw into these instead of a new figure.

    Returns
    -------
    matplotlib.figure.Figure
    """
    bias = result.bias
    if "family" in bias.columns:  # gain and discount exist in the DCG family only
        bias = bias[bias["family"] == "dcg"]
    fig, axes, new = panel_axes(ax, 6, 2, 3, figsize=(13, 7))
    panels = iter(axes)
    for factor, order in (("gain", STUDY_GAINS), ("discount", STUDY_DISCOUNTS)):
        levels = _ordered(bias[factor], order)
        for ind in ("b1", "b2", "b3"):
            panel = next(panels)
            data = [bias.loc[bias[factor] == lv, ind].to_numpy() for lv in levels]
            panel.boxplot(data, tick_labels=levels, widths=0.6)
            panel.set_title(f"{ind} by {factor}")
            panel.set_xlabel(factor)
            panel.set_ylabel(f"{ind} (lower is better)")
            panel.grid(axis="y", alpha=0.25)
    if new:
        fig.suptitle("Bias of each formulation (lower is better)", fontsize=13)
        fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def _interval_estimator(bias: pd.DataFrame) -> tuple[str, list[str]]:
    """The estimator whose intervals Figure 4 draws, and its three indicators: the one the
    ranking leads with (:func:`satcal.analysis.ranking.lead_estimator`), or the paper's when the
    bootstrap gave the lead estimator no intervals.

    Parameters
    ----------
    bias : pandas.DataFrame
        A bootstrapped calibration's bias table (``CalibrationResult.bias`` or its ``bias.csv``).

    Returns
    -------
    (str, list of str)
        The estimator's name (a key of :data:`satcal.analysis.ranking.ESTIMATORS`) and its
        b1, b2, b3 columns.
    """
    from .analysis.ranking import estimator_columns, lead_estimator
    has = lambda c: c in bias.columns and bias[c].notna().any()
    for estimator in (lead_estimator(bias), "paper"):
        cols = estimator_columns(bias, estimator)
        if all(has(f"{c}_lo") and has(f"{c}_hi") for c in cols):
            return estimator, cols
    return "paper", list(estimator_columns(bias, "paper"))


def figure_intervals(result, ax=None):
    """Per-formulation bootstrap intervals of b1, b2, b3 of the estimator the ranking leads with
    (:func:`_interval_estimator`: the paper's only when the lead one has no intervals), needs a
    bootstrap.

    Parameters
    ----------
    result : CalibrationResult
    ax : array of three matplotlib Axes, optional
        Draw into these instead of a new figure.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    SatcalError
        The calibration was not bootstrapped (its bias has no ``b1_lo``).
    """
    from .analysis.ranking import ESTIMATOR_NAMES
    if "b1_lo" not in result.bias.columns:
        from .errors import SatcalError
        raise SatcalError("figure_intervals needs a bootstrapped calibration: calibrate(..., bootstrap=1000)")
    estimator, cols = _interval_estimator(result.bias)
    bias = result.bias.sort_values(cols[0])
    fig, axes, new = panel_axes(ax, 3, 1, 3, figsize=(14, max(5, 0.22 * len(bias) + 1.5)), sharey=True)
    y = np.arange(len(bias))
    for panel, ind in zip(axes, cols):
        err = np.vstack([bias[ind] - bias[f"{ind}_lo"], bias[f"{ind}_hi"] - bias[ind]])
        # a percentile interval of a small study can lie wholly on one side of its point
        # estimate: that side's bar is drawn at length 0 and the point marked, not refused
        misses = (err < 0).any(axis=0)
        panel.errorbar(bias[ind], y, xerr=np.clip(err, 0, None), fmt="o", ms=3, color="k", ecolor="0.5",
                       capsize=2)
        if misses.any():
            panel.plot(bias[ind][misses], y[misses], "x", ms=8, color="C3",
                       label="interval misses the estimate (bar clipped at it)")
            panel.legend(loc="lower right", fontsize="small")
        panel.set_title(f"{ind} (95% bootstrap interval)")
        panel.set_xlabel(f"{ind} (lower is better)")
        panel.grid(axis="x", alpha=0.25)
        if not new or panel is axes[0]:  # a new figure shares its y axis
            panel.set_yticks(y, bias["formulation"])
            panel.invert_yaxis()
    if new:
        fig.suptitle(f"Bias by the {ESTIMATOR_NAMES[estimator]} ({cols[0]}-{cols[2]}; lower is better)",
                     fontsize=13)
        fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


# --------------------------------------------------------------------------------------------
# Reading guide and HTML
# --------------------------------------------------------------------------------------------
def _first_crossing(x: np.ndarray, p: np.ndarray, level: float):
    above = np.flatnonzero(p >= level)
    return float(x[above[0]]) if above.size else None


def adaptive_paragraph(record: dict) -> Markup:
    """What an adaptive study's stopping rule settled and what it did not (calibration.json's
    ``adaptive`` block), as one escaped HTML sentence or two.

    Parameters
    ----------
    record : dict
        The ``adaptive`` block (``leaders``, ``confidence``, ``looks``, ``n_answers``,
        ``alpha_spent``, ``settled``, ...).

    Returns
    -------
    markupsafe.Markup
    """
    leaders = [str(x) for x in record.get("leaders") or []]
    names = ", ".join(leaders) or "none"
    conf = float(record.get("confidence") or 0)
    where = Markup("after look {} ({} answers; error rate spent so far {:.3g})").format(
        record.get("looks"), record.get("n_answers"), float(record.get("alpha_spent") or 0))
    if record.get("settled"):
        text = Markup("<b>Adaptive study: settled</b> at {:.0%} confidence {}: the least-biased {} {}. "
                      "The ranking of the other formulations is not what the study was stopped on: "
                      "read it with its intervals.").format(
            conf, where, "formulation is" if len(leaders) == 1 else "set is", names)
    else:
        text = Markup("<b>Adaptive study: not settled</b> at {:.0%} confidence {}: the answers do not yet "
                      "set the least-biased apart from {} (still contending: {}).").format(
            conf, where, "the others", names)
    reason = record.get("reason")
    if reason:
        text += Markup(" {}").format(str(reason).rstrip(".") + ".")
    if record.get("budget_reached"):
        text += Markup(" The budget ({} answers) is reached: no further wave is asked.").format(
            record.get("budget_answers"))
    return text


def reading_guide(result) -> list[Markup]:
    """Plain-language findings drawn from the tables.

    A few sentences, as HTML fragments whose every value is escaped. Each claim about which
    formulation is least biased is the bootstrap's verdict (:attr:`CalibrationResult.verdict`),
    never the point estimates alone.

    Parameters
    ----------
    result : CalibrationResult

    Returns
    -------
    list of markupsafe.Markup
    """
    from .analysis.ranking import estimator_columns
    rank = result.ranking
    verdict = result.verdict
    cols = estimator_columns(result.bias, verdict.estimator)
    best = rank.iloc[0]
    out = [Markup("<b>{}</b>").format(verdict.sentence())]
    adaptive = result.meta.get("provenance", {}).get("adaptive")
    if adaptive:
        out.append(adaptive_paragraph(adaptive))
    out.append(Markup("Ranked first on the full sample: {} ({} = {:.3f}, {} = {:.3f}, {} = {:.3f}); "
                      "last: {}.").format(best.formulation, cols[0], best[cols[0]], cols[1], best[cols[1]],
                                          cols[2], best[cols[2]], rank.formulation.iloc[-1]))
    if verdict.estimator == "standardised" and "mean_rank_per_list" in rank.columns:
        joint_best = rank.sort_values(["mean_rank_per_list", "b1_joint"]).formulation.iloc[0]
        out.append(Markup("The per-list estimator (each formulation's own s(phi), b1_joint-b3_joint) "
                          "ranks {} first; for a formulation users do not follow it still depends on "
                          "which lists the design holds at each phi, the standardised one does not.")
                   .format(joint_best))
    if verdict.estimator != "paper":
        paper_best = rank.sort_values(["mean_rank_paper", "b1"]).formulation.iloc[0]
        out.append(Markup("The paper's estimator ranks {} first; it depends on which partners the design "
                          "pairs lists with (see 'Two satisfaction curves'), the {} one does not.")
                   .format(paper_best, "standardised" if verdict.estimator == "standardised" else "per-list"))
    meanings = ({"per_list": "distance from the ideal curve s(phi) = phi",
                 "standardised": "distance from the ideal curve s*(phi) = phi"}.get(
                     verdict.estimator, "distance from P(Sat|phi) = phi"),
                "gaps at the ends of the score range",
                "share of answers not siding with the higher-scored list, both-good and both-bad "
                "answers included")
    for ind, meaning in zip(cols, meanings):
        if result.bias[ind].isna().all():  # no curve had data enough for it
            continue
        row = result.bias.loc[result.bias[ind].idxmin()]
        out.append(Markup("Lowest {} ({}): {} ({:.3f}).").format(ind, meaning, row.formulation, row[ind]))
    if not result.anova.empty:
        parts, untested = [], False
        for ind, g in result.anova.groupby("indicator"):
            g = g[g.term != "Residual"].set_index("term")
            if g["eta_sq"].isna().all():  # an indicator some formulation could not score
                continue
            top = g["eta_sq"].idxmax()
            r = g.loc[top]
            interval = (f", 95% interval {100 * r.eta_sq_lo:.0f}-{100 * r.eta_sq_hi:.0f}%"
                        if "eta_sq_lo" in g and pd.notna(r.get("eta_sq_lo")) else "")
            # the chi2 tail far beyond the bootstrap's resolution says only "very small"
            untested |= pd.isna(r.p)
            test = ("" if pd.isna(r.p)  # said once below the list, not on every line
                    else " (bootstrap Wald test p < 1e-16)" if r.p < 1e-16
                    else f" (bootstrap Wald test p = {r.p:.2g})")
            parts.append(f"{ind}: {top} explains {100 * r.eta_sq:.0f}% of the variance between "
                         f"formulations{interval}{test}")
        if parts:
            # one line per indicator: nine of them run together were unreadable
            out.append(Markup("Gain and discount effects:<ul>{}</ul>{}").format(
                Markup("").join(Markup("<li>{}</li>").format(part) for part in parts),
                # why is said once, in the ANOVA section
                Markup('No test: {} (see <a href="#anova">ANOVA</a>).').format(
                    "the analysis was not bootstrapped" if result.bootstrap is None
                    else "too few complete replicates for some indicators") if untested else ""))
    c = result.curves
    model = {"per_list": "joint", "standardised": "standardised"}.get(verdict.estimator, "published")
    if "sat_model" in c.columns:
        sat = c[(c.formulation == best.formulation) & (c.curve == "sat") & (c.sat_model == model)]
    else:
        sat = c[(c.formulation == best.formulation) & (c.curve == "sat")]
    # the standardised estimator has its own preference curve P*_f; the others read the paper's
    pref = c[c.sat_model == "standardised"] if model == "standardised" else _published(c)
    pref = pref[(pref.formulation == best.formulation) & (pref.curve == "pref")]
    if not sat.empty:
        if "supported" in sat.columns:
            sat = sat[sat.supported.astype(bool)]
        x, p = sat.x.to_numpy(), sat.p.to_numpy()
        what = "users are satisfied" if model == "published" else "a list satisfies a user"
        out.append(Markup("Under {}, {} with probability {:.2f} at phi = {:.1f} and {:.2f} at phi = {:.1f}; "
                          "the curve lies above the diagonal (the score underestimates satisfaction) over "
                          "{:.0f}% of that range.").format(best.formulation, what, p[0], x[0], p[-1], x[-1],
                                                          100 * np.mean(p > x)))
    if not pref.empty:
        half = _first_crossing(pref.x.to_numpy(), pref.p.to_numpy(), 0.5)
        out.append(Markup("A majority of users agree with the sign of dphi only once |dphi| reaches "
                          "{:.2f}.").format(half) if half is not None else
                   Markup("P(Pref|dphi) never reaches 0.5: most users do not side with the measure's "
                          "preference at any difference."))
    if "monotone" in result.fits.columns:
        bent = result.fits[~result.fits["monotone"].astype(bool)]
        if len(bent):
            # name the estimator: the standardised P* curves bend where the paper's do not
            model = (bent["sat_model"].fillna("published") if "sat_model" in bent.columns
                     else pd.Series("published", index=bent.index))
            label = {"published": "paper's", "joint": "per-list", "standardised": "standardised"}
            names = ", ".join(f"{r.formulation} ({r.curve}, {label.get(m, m)})"
                              for r, m in zip(bent.head(8).itertuples(), model.head(8)))
            std_pref = int(((model == "standardised") & (bent["curve"] == "pref")).sum())
            out.append(Markup("{} fitted curve(s) decrease somewhere on [0, 1], which a probability of "
                              "satisfaction or agreement should not: {}{}. Read them with care; satcal "
                              "evaluate maps scores through a monotone version instead (the isotonic fit "
                              "of the paper's curves, the running maximum of the others).{}")
                       .format(len(bent), names, " ..." if len(bent) > 8 else "",
                               Markup(" {} of them are standardised preference curves P*(|dphi|): "
                                      "where such a curve falls while the mean agreement it is fitted to "
                                      "rises (Figure 0's circles), its b3_std measures that misfit as well "
                                      "as the formulation's bias.").format(std_pref)
                               if std_pref else ""))
    if verdict.estimator == "standardised" and "ties_std" in result.bias.columns:
        tie = float(result.bias.set_index("formulation").at[best.formulation, "ties_std"])
        if tie > TIES_NOTE:
            out.append(Markup("{} ties {:.0f}% of the reference pairs (|dphi| = 0, column ties_std): "
                              "P* and b3_std describe only the pairs it orders, and on the others it "
                              "tells a user nothing about which list to prefer.")
                       .format(best.formulation, 100 * tie))
    other = _beyond_dcg_paragraph(result)
    if other:
        out.append(other)
    mc = result.model_check
    if not mc.empty:
        means = mc.groupby("model")["log_loss"].mean()
        verdict = ("adequate" if means["quadratic_logit"] <= means["isotonic"] + 0.005 else
                   "possibly too rigid")
        out.append(Markup("Model check (cross-validated log loss, mean over curves): quadratic logit "
                          "{:.4f}, linear logit {:.4f}, isotonic {:.4f}: the quadratic form looks {}.")
                   .format(means["quadratic_logit"], means["linear_logit"], means["isotonic"], verdict))
    return out


def _beyond_dcg_paragraph(result) -> Markup | None:
    """What the joint ranking says about the measures beyond DCG, and how sure it is."""
    bias = result.bias
    if "family" not in bias.columns or (bias["family"] == "dcg").all():
        return None
    rank = result.ranking.reset_index(drop=True)
    family = bias.set_index("formulation")["family"]
    is_dcg = rank["formulation"].map(family).eq("dcg")
    n = len(rank)
    placed = ", ".join(f"{f} #{i + 1}" for i, f in rank.loc[~is_dcg, "formulation"].items())
    text = Markup("Measures beyond DCG (RBP as a geometric discount, ERR, RR, AP, P), ranked with the "
                  "DCG formulations on the same scale (mean rank over b1-b3, 1 to {}): {}.").format(n, placed)
    if not is_dcg.any():
        return text
    best_dcg = rank.loc[is_dcg, "formulation"].iloc[0]
    best_other = rank.loc[~is_dcg, "formulation"].iloc[0]
    if result.bootstrap is None:
        return text + Markup(" How sure this is needs the bootstrap (run the analysis with --bootstrap "
                             "1000): without intervals, nearby ranks may be noise.")
    pairs = result.bootstrap.pairwise
    pair = pairs[(pairs.indicator == "b1") & (((pairs.formulation_1 == best_dcg) & (pairs.formulation_2 == best_other))
                                             | ((pairs.formulation_1 == best_other) & (pairs.formulation_2 == best_dcg)))]
    if pair.empty:
        return text
    r = pair.iloc[0]
    sign = 1 if r.formulation_1 == best_other else -1
    d, lo, hi = sign * r["diff"], *sorted((sign * r["lo"], sign * r["hi"]))
    p_text = f"Holm-adjusted p = {r['p_holm']:.2g} over all pairs"
    verdict = ("the answers cannot tell the two apart" if r["p_holm"] >= 0.05 or lo <= 0 <= hi else
               f"{best_other if d < 0 else best_dcg} is less biased by b1 (the difference holds after "
               "Holm's adjustment over all pairs)")
    return text + Markup(" The best of them, {}, against the best DCG formulation, {}: b1 differs by "
                         "{:+.3f} (95% interval {:+.3f} to {:+.3f}, {}), so {}. A measure's rank says how "
                         "closely its score tracks the probability that users are satisfied, not how "
                         "well it ranks systems (see satcal reliability).").format(
        best_other, best_dcg, d, lo, hi, p_text, verdict)


def _anova_untested_text(result) -> str:
    """Why the ANOVA has no p, said once above its table (after "No test"): the analysis was
    not bootstrapped, or its replicates could not give one."""
    from .analysis.effects import NO_BOOTSTRAP_NOTE
    if result.bootstrap is None:
        return NO_BOOTSTRAP_NOTE.removeprefix("no test") + "."
    return " for some indicators: their note in anova.csv says why."


def _anova_html(anova: pd.DataFrame) -> Markup:
    """The ANOVA table as HTML, without the test's columns where no row has a test (not
    bootstrapped: the CSV keeps them, empty, and the report says why once)."""
    return _sparse_table_html(anova.replace("", np.nan))


def _table_html(df: pd.DataFrame, digits: int = 4, max_rows: int | None = None,
                na_rep: str = "NaN") -> Markup:
    """A table as HTML; pandas escapes every cell."""
    shown = df if max_rows is None else df.head(max_rows)
    return Markup(shown.to_html(index=False, float_format=lambda v: f"{v:.{digits}g}", border=0, escape=True,
                                na_rep=na_rep))


def _sparse_table_html(df: pd.DataFrame) -> Markup:
    """A per-worker or per-trap table as HTML: a cell with no value (a kept worker's exclusion
    reason, a platform that reports no trust) is blank, and a column with no value in any row
    is left out (the CSV keeps it), so the report draws nothing where there is no data."""
    return _table_html(df.dropna(axis=1, how="all"), na_rep="")


def _parameters(prov: dict) -> list[tuple[str, object]]:
    """The study's parameters, first thing in the report (from calibration.json)."""
    norms = sorted(set(prov.get("normalization", {}).values()))
    negs = sorted(set(prov.get("negatives", {}).values()))
    rows = [("documents per list (k)", prov.get("k")), ("relevance levels (L)", prov.get("levels")),
            ("normalisation", ", ".join(norms)), ("negative levels", ", ".join(negs)),
            ("formulations and measures", len(prov.get("formulations", []))),
            ("preference population", prov.get("population")),
            ("satisfaction models", _sat_model_text(prov)),
            ("answers", prov.get("answers")), ("examples", prov.get("examples")),
            ("workers", prov.get("workers")), ("bootstrap replicates", prov.get("bootstrap")),
            ("bootstrap resamples", prov.get("resampling")),
            ("seed", prov.get("seed")), ("answers simulated", _simulated_text(prov))]
    return [(k, v) for k, v in rows if v not in (None, "")]


def _sat_model_text(prov: dict) -> str:
    """The satisfaction models the analysis fitted, named as the docs name them: the paper's
    P(Sat|phi), and the joint (per-list) model with the answer effect both lists share, or
    without it (``calibrate(shared_effect=False)``), as ``calibration.json``'s ``joint_model``
    records."""
    names = {"published": "the paper's P(Sat|phi) (both_good/both_bad answers)"}
    shared = str(prov.get("joint_model", ""))
    names["joint"] = ("shared-effect joint model (per-list s(phi) from all four answers; both lists "
                      "of an answer share an effect v ~ N(0, tau^2))" if shared.startswith("shared") else
                      "joint model without a shared effect (per-list s(phi) from all four answers; "
                      "lists independent given phi, tau = 0)" if shared.startswith("independent") else
                      "joint model (per-list s(phi) from all four answers)")
    return "; ".join(names.get(m, m) for m in prov.get("sat_model", []))


def _simulated_text(prov: dict) -> str:
    """"no", "yes", or "yes, N% of the answers" when simulated and real answers are mixed."""
    from .analysis.calibration import simulated_share_text
    share = simulated_share_text(prov)
    return "no" if share is None else "yes" if share == "all" else f"yes, {share} of the answers"


#: What a figure's caption cannot say in a line, shown under its heading.
_DESCRIPTIONS = {
    "fig0_standardised": (
        "Drawn for the ranking's first three formulations, lin-const (the paper's least-biased, when "
        "calibrated) and its last. Left, s*(phi) against the diagonal s* = phi: b1_std is the mean "
        "vertical distance between them over the solid part, b2_std the gaps at its ends. Right, the "
        "preference curve the model implies, P*(|dphi|), against the ideal P = 1, fitted over the "
        "reference pairs the formulation orders (its ties, share ties_std in the bias table, are no "
        "verdict to agree with and are left out): b3_std is the mean gap. The circles are what each line is fitted to, the reference population's mean "
        "satisfaction (agreement) per bin: where a line leaves its circles the quadratic does not "
        "fit, and the indicator measures that misfit as much as the formulation's bias."),
}

_ESTIMATOR_TEXT = {
    "standardised": Markup("the standardised per-list estimator (<code>b1_std</code>, <code>b2_std</code>, "
                           "<code>b3_std</code>): the joint models' per-list curves, mixed by how well "
                           "each fits the answers, averaged over one reference population of lists "
                           "drawn from the judgments (recorded in <code>calibration.json</code>) and "
                           "summarised per formulation by s*(phi) and P*(dphi) (<code>sat_model = "
                           "standardised</code> in <code>curves.csv</code>; P* over the reference pairs "
                           "the formulation orders, the share it ties being <code>ties_std</code>), so that two designs on the "
                           "same users estimate the same numbers; each formulation's own per-list "
                           "indicators (<code>b1_joint</code>-<code>b3_joint</code>, "
                           "<code>mean_rank_per_list</code>) and the paper's <code>b1</code>-<code>b3</code> "
                           "(<code>mean_rank_paper</code>) stay beside it"),
    "per_list": Markup("the per-list s(phi) of the joint model (<code>b1_joint</code>, <code>b2_joint</code>, "
                       "<code>b3_joint</code>), which does not depend on the design's pairs (the "
                       "standardised estimator needs a reference population, drawn from the "
                       "judgments, which this analysis did not have); the paper's "
                       "<code>b1</code>-<code>b3</code> and their ranking (<code>mean_rank_paper</code>) "
                       "stay beside it for reproduction"),
    "paper": Markup("the paper's P(Sat|phi) and P(Pref|dphi) (<code>b1</code>-<code>b3</code>); run the "
                    "analysis with the joint model (<code>--sat-model both</code>) for the per-list "
                    "estimator, which does not depend on the design's pairs")}

_CAPTIONS = {"fig0_standardised": ("Figure 0. The standardised curves s*(phi) and P*(|dphi|), what the "
                                   "ranking leads with"),
             "fig1_sat": "Figure 1. P(Sat | phi), the paper's estimator",
             "fig2_pref": "Figure 2. P(Pref | dphi), the paper's estimator",
             "fig1b_sat_joint": "Figure 1b. s(phi), the per-list satisfaction of the joint model",
             "fig3_bias": "Figure 3. The paper's bias indicators b1-b3 by gain and by discount",
             "fig4_intervals": ("Figure 4. Bootstrap intervals of each formulation's bias by the {name} "
                                "({first}-{last}) (a red cross marks an interval that lies wholly on one "
                                "side of its estimate; its bar is clipped at the estimate)")}


def _caption(name: str, result) -> str:
    """A figure's caption; Figure 4's names the estimator it draws (:func:`_interval_estimator`)."""
    caption = _CAPTIONS.get(name, name)
    if name == "fig4_intervals":
        from .analysis.ranking import ESTIMATOR_NAMES
        estimator, cols = _interval_estimator(result.bias)
        caption = caption.format(name=ESTIMATOR_NAMES[estimator], first=cols[0], last=cols[2])
    return caption


def render_report(result, figure_paths: dict[str, Path], pairs: pd.DataFrame | None = None) -> str:
    """The HTML report: findings, figures and every table, self-contained (figures inline),
    from the autoescaping template ``templates/report.html``.

    Parameters
    ----------
    result : CalibrationResult
    figure_paths : dict of str to pathlib.Path
        The PNG of each figure, inlined.
    pairs : pandas.DataFrame or None, optional
        ``result.bootstrap.pairwise`` when the caller has it already (it takes a second to
        compute); None computes it.

    Returns
    -------
    str
    """
    import jinja2
    meta = result.meta
    prov = meta.get("provenance", {})
    ranking = result.ranking
    if result.bootstrap is not None:
        extra = [c for c in result.bias.columns if c == "formulation" or c not in ranking.columns]
        ranking = ranking.merge(result.bias[extra].drop(columns=["family"], errors="ignore"), on="formulation")
    figure = lambda name, path: {"caption": _caption(name, result), "alt": path.stem,
                                 "description": _DESCRIPTIONS.get(name),
                                 "data": base64.b64encode(path.read_bytes()).decode("ascii")}
    context = {
        "name": str(meta.get("name") or "study"), "n_examples": meta.get("n_examples", 0),
        "answer_counts": ", ".join(f"{k}: {v}" for k, v in meta.get("answer_counts", {}).items()),
        "n_sat_lists": meta.get("n_sat_lists", 0), "n_formulations": meta.get("n_formulations", 0),
        "population": str(meta.get("population")), "simulated": bool(prov.get("simulated")),
        "simulated_text": _simulated_text(prov),
        "parameters": _parameters(prov) if prov else [], "notice": meta.get("notice"),
        "guide": reading_guide(result), "warnings": list(meta.get("warnings", [])),
        "design_warnings": list(meta.get("design_warnings", [])),
        "estimator": _ESTIMATOR_TEXT[result.estimator],
        "joint_gap": _joint_gap(result) if "b1_joint" in result.bias.columns else None,
        "joint_bootstrapped": "b1_joint_lo" in result.bias.columns,
        "figures": [figure(name, path) for name, path in figure_paths.items() if name != "fig0_standardised"],
        "lead_figure": (figure("fig0_standardised", figure_paths["fig0_standardised"])
                        if "fig0_standardised" in figure_paths else None),
        "ranking": _table_html(_ranking_view(result, ranking)), "pairs": None, "p_floor": None,
        "anova": _anova_html(result.anova),
        "anova_untested": (Markup("No test") + _anova_untested_text(result)
                           if not result.anova.empty and result.anova["p"].isna().all() else None), "model_check": None,
        "crowd": meta.get("crowd"), "screening": None, "workers": None,
        "fits": _table_html(result.fits), "points": _table_html(result.points), "version": _version(),
    }
    if result.bootstrap is not None:
        pairs = result.bootstrap.pairwise if pairs is None else pairs
        context["pairs"] = _table_html(_close_pairs(result, pairs))
        context["p_floor"] = 1 / result.bootstrap.replicates
    if not result.model_check.empty:
        summary = result.model_check.groupby(["curve", "model"], as_index=False)[["log_loss", "brier"]].mean()
        context["model_check"] = {"summary": _table_html(summary), "table": _table_html(result.model_check)}
    workers = getattr(result, "workers", None)
    if workers is not None and len(workers):
        from .quality import typed_workers
        workers = typed_workers(workers)  # numbers as floats, so the float format reaches each
        if "too_fast" in workers.columns:
            context["screening"] = {"fast": int(workers["too_fast"].astype(str).eq("True").sum()),
                                    "side": int(workers["same_side"].astype(str).eq("True").sum())}
        out = workers["excluded"].astype(str) == "True"
        reason = workers["reason"].astype(str) if "reason" in workers.columns else pd.Series("", index=workers.index)
        lined, failed = int((out & reason.str.startswith("straight")).sum()), int((out & reason.str.startswith("failed")).sum())
        dominated = int((out & reason.str.startswith("prefers the dominated")).sum())
        at_random = int((out & reason.str.startswith("answers likelier at random")).sum())
        context["workers"] = {
            "count": len(workers), "excluded": int(out.sum()), "straight_lining": lined, "attention": failed,
            "dominated": dominated, "at_random": at_random,
            "by_trust": int(out.sum()) - lined - failed - dominated - at_random,
            "rejected_rows": meta.get("rejected_rows"),
            "table": _sparse_table_html(workers.sort_values(["excluded", "trust"], ascending=[False, True])),
            "ds": _dawid_skene_summary(workers)}
    context["traps"] = _trap_section(getattr(result, "trap_report", None))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    return env.get_template("report.html").render(**context)


def _ranking_view(result, ranking: pd.DataFrame) -> pd.DataFrame:
    """The ranking as the report shows it: what a reader reads first (formulation, mean rank,
    p_best and the rank interval, the lead estimator's indicators) on the left, where a wide
    table does not hide it behind its scroll bar; every column of ranking.csv follows."""
    from .analysis.ranking import estimator_columns
    lead = ["formulation", "mean_rank", "p_best", "rank_lo", "rank_hi"] + list(
        estimator_columns(result.bias, result.estimator))
    first = [c for c in dict.fromkeys(lead) if c in ranking.columns]
    return ranking[first + [c for c in ranking.columns if c not in first]]


def _trap_section(traps: pd.DataFrame | None) -> dict | None:
    """The per-trap table of ingest (traps_report.csv): how many traps, which are suspect
    (most otherwise trusted workers miss them) and which were dropped from trust."""
    if traps is None or not len(traps):
        return None
    flag = lambda col: traps[col].astype(str) == "True"
    return {"count": len(traps), "suspect": traps.loc[flag("suspect") & ~flag("dropped"), "trap_id"].tolist(),
            "dropped": traps.loc[flag("dropped"), "trap_id"].tolist(), "table": _sparse_table_html(traps)}


def _close_pairs(result, pairs: pd.DataFrame, n: int = 15) -> pd.DataFrame:
    """The pairs a reader asks about: the top-ranked formulation against the ``n`` closest to it
    in the lead indicator (not the most obviously different pairs)."""
    from .analysis.ranking import estimator_columns
    lead = estimator_columns(result.bias, result.estimator)[0]
    indicator = lead if (pairs.indicator == lead).any() else "b1"
    top = result.ranking.formulation.iloc[0]
    mine = pairs[(pairs.indicator == indicator) & ((pairs.formulation_1 == top) | (pairs.formulation_2 == top))]
    return mine.assign(_gap=mine["diff"].abs()).sort_values("_gap").drop(columns="_gap").head(n)


def _dawid_skene_summary(workers: pd.DataFrame) -> dict | None:
    """How far the Dawid-Skene accuracies agree with the trap trust (Spearman's rho)."""
    if "ds_accuracy" not in workers.columns:
        return None
    both = workers[["ds_accuracy", "trust"]].apply(pd.to_numeric, errors="coerce").dropna()
    if len(both) < 3:
        return None
    from scipy.stats import spearmanr
    return {"rho": float(spearmanr(both["ds_accuracy"], both["trust"]).statistic), "n": len(both)}


def _joint_gap(result) -> float:
    """Mean absolute gap, over formulations and [0, 1], between the paper's P(Sat|phi) and the
    joint model's s(phi)."""
    c = result.curves[result.curves["curve"] == "sat"]
    pub = c[c["sat_model"] == "published"].groupby("x")["p"].mean()
    joint = c[c["sat_model"] == "joint"].groupby("x")["p"].mean()
    return float(np.mean(np.abs(pub.to_numpy() - joint.to_numpy())))


def _version() -> str:
    from ._version import __version__
    return __version__


def write_figures(result, fig_dir) -> dict[str, tuple[str, str]]:
    """Draw the analysis's figures and save each as PNG and PDF into ``fig_dir``.

    Parameters
    ----------
    result : CalibrationResult
    fig_dir : path-like
        Created if missing.

    Returns
    -------
    dict of str to (str, str)
        The PNG and PDF of each figure, by name, in the report's order.
    """
    fig_dir = Path(fig_dir)
    fig_dir.mkdir(parents=True, exist_ok=True)
    makers = {}
    if "sat_model" in result.curves.columns and (result.curves["sat_model"] == "standardised").any():
        makers["fig0_standardised"] = figure_standardised   # what the ranking leads with
    makers["fig1_sat"] = figure_sat
    if "sat_model" in result.curves.columns and (result.curves["sat_model"] == "joint").any():
        makers["fig1b_sat_joint"] = figure_sat_joint
    makers.update(fig2_pref=figure_pref, fig3_bias=figure_bias)
    if result.bootstrap is not None:
        makers["fig4_intervals"] = figure_intervals
    return {name: tuple(str(p) for p in _save_figure(make(result), fig_dir / name)) for name, make in makers.items()}


def write_analysis(result, out_dir, figures: bool = True, report: bool = True,
                   drawn: dict | None = None) -> dict[str, str]:
    """Write the tables (CSV, through the one table writer), figures (PNG, PDF) and
    report.html into ``out_dir``.

    Parameters
    ----------
    result : CalibrationResult
    out_dir : path-like
        Created if missing.
    figures : bool, default True
        Write the figures.
    report : bool, default True
        Write report.html.
    drawn : dict or None, optional
        What :func:`write_figures` returned for ``out_dir / "figures"`` when the figures were
        drawn already (the demo draws them while its second process works); None draws them
        here.

    Returns
    -------
    dict of str to str
        The path of every file written, by name.

    Raises
    ------
    SatcalError
        ``result`` is not a calibration (say, the study itself).
    """
    from .analysis import CalibrationResult
    if not isinstance(result, CalibrationResult):
        from .errors import SatcalError
        raise SatcalError(f"write_analysis writes a calibration: pass satcal.calibrate(study), "
                          f"not a {type(result).__name__}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    tables = result.tables()
    for name, table in tables.items():
        # a study's own ids reach these tables (workers, formulations): none may run as a
        # formula, which the one table writer of every result sees to
        written[name] = str(write_table(table, out / f"{name}.csv"))
    if "provenance" in result.meta:
        import json
        path = out / "calibration.json"
        atomic_write_text(path, json.dumps(result.meta["provenance"], indent=2, sort_keys=True) + "\n")
        written["calibration"] = str(path)
    pngs: dict[str, Path] = {}
    if figures or report:
        if drawn is None:
            drawn = write_figures(result, out / "figures")
        for name, (png, pdf) in drawn.items():
            pngs[name] = Path(png)
            written[f"{name}.png"], written[f"{name}.pdf"] = png, pdf
    if report:
        path = out / "report.html"
        atomic_write_text(path, render_report(result, pngs, pairs=tables.get("bias_pairs")))
        written["report"] = str(path)
    return written
