"""What every platform shares: items with opaque ids, A/B counterbalancing,
shuffling and pages, the hidden key, the worker-visible HTML (Jinja2 templates with
autoescaping under ``templates/``; the item macros in ``_item.html`` serve the preview, the
generic form, Label Studio's tasks and ``satcal serve`` alike), the :class:`Platform`
declaration and its settings. The platform modules build on this module; the package's
``__init__`` holds their registry.

Worker-visible columns never hold anything of the key: no example id, no orientation, no
trap flag, no level, no score. Expected trap answers go only into a platform's gold columns,
and only on platforms that hide them from workers (Appen, Toloka).
"""
from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ..answers import ANSWER_CODES
from ..errors import SatcalError

__all__ = ["Platform", "Setting", "TrapCount", "traps_a_page", "trap_count_line", "build_items", "KEY_COLUMNS", "DISPLAY_FIELDS",
           "render_form_html", "render_lists_html", "render_instructions_html", "instruction_paragraphs",
           "item_view", "RAW_ANSWER_COLUMNS", "SHOWN_CODES", "swap_answer", "ANSWER_LABELS"]

#: Optional document display fields (documents table columns), HTML-escaped on export.
DISPLAY_FIELDS = ("title", "snippet", "url", "audio_url")
#: Columns of key.csv: never shown to workers.
KEY_COLUMNS = ("item_id", "source_id", "is_trap", "swapped", "expected", "expected_shown", "page")
#: Columns every reader returns.
RAW_ANSWER_COLUMNS = ("item_id", "worker_id", "answer", "submitted_at", "row_id", "trust", "status",
                      "line", "seconds")
SHOWN_CODES = ANSWER_CODES  # the same four codes, read in the orientation shown
ANSWER_LABELS = {"a_better": "System A gives better results",
                 "b_better": "System B gives better results",
                 "both_good": "Both are equally good",
                 "both_bad": "Both are equally bad"}
_SWAP = {"a_better": "b_better", "b_better": "a_better", "both_good": "both_good", "both_bad": "both_bad"}


def swap_answer(code: str) -> str:
    """The same judgement seen with A and B exchanged.

    Parameters
    ----------
    code : str
        An answer code; one that is not a known code comes back unchanged.

    Returns
    -------
    str
    """
    return _SWAP.get(code, code)


@dataclass(frozen=True)
class Platform:
    """A crowdsourcing platform: how a batch is written for it and its result files read.

    Attributes
    ----------
    name : str
        Its name in study.toml (``presentation.platform``) and on the command line.
    description : str
        One line naming it and the files it takes.
    write_batch : callable
        ``write_batch(visible, key, out_dir, k, instructions, items_per_page,
        answers_per_example=1[, settings=])``: writes the batch's files into ``out_dir`` and
        returns their paths (a read-only format, ecir2015, raises).
    read_results : callable
        ``read_results(path)``: a result file as a table of ``RAW_ANSWER_COLUMNS``; a broken
        file is a one-line error naming its line.
    result_suffix : str
        The suffix of its result files (``"csv"``, ``"tsv"``, ``"json"``); the simulated
        crowd writes ``simulated/<name>-results.<suffix>``.
    write_results : callable or None
        ``write_results(answers, visible, key, path)``: writes simulated answers as the
        platform's result file (the simulated crowd); None where it cannot.
    reports_unfinished : bool
        Whether its result file lists assignments left unfinished (the simulated crowd writes
        them only where the platform does).
    settings : tuple of Setting
        The researcher's settings of the platform, ``[platforms.<name>]`` in study.toml;
        ``write_batch`` then takes ``settings=`` (a dict of their values). Empty for none.
    describe : callable or None
        ``describe(settings, items_per_page, answers_per_example, traps=None)``: the one line
        export prints about those settings (``traps``: a :class:`TrapCount`); None for none.
    """

    name: str
    description: str
    write_batch: Callable
    read_results: Callable
    result_suffix: str
    write_results: Callable | None = None  # used by the simulated crowd
    #: whether its result file lists assignments left unfinished (the simulated crowd writes
    #: them only where the platform does)
    reports_unfinished: bool = False
    #: the researcher's settings of the platform, ``[platforms.<name>]`` in study.toml: a tuple
    #: of :class:`Setting`; ``write_batch`` then takes ``settings=`` (a dict of their values)
    settings: tuple = ()
    #: ``describe(settings, items_per_page, answers_per_example, traps=None)``: one line export prints
    describe: Callable | None = None


@dataclass(frozen=True)
class TrapCount:
    """The trap rule's count for a batch, as a platform's settings take it: how many traps a
    worker must meet (``satcal.quality.traps_needed`` of the batch's traps' chance rates, for
    ``[quality] trap_power``), how many the batch holds, among how many items.

    Attributes
    ----------
    needed : int or None
        Traps a worker must meet for the traps alone to exclude a random answerer with
        probability ``trap_power``, and at least ``quality.min_traps`` (fewer leave a worker
        unscored at ingest); None when no count can.
    in_batch : int
        Traps in the batch.
    items : int
        Items in the batch, traps included.
    fix : str
        The study.toml change that gives a batch holding fewer traps than ``needed`` the count,
        in words (an adaptive wave's is ``[design] wave_pages``); empty: ``[traps] count``.
    """

    needed: int | None
    in_batch: int
    items: int
    fix: str = ""


def traps_a_page(needed: int | None, pages: int, items_per_page: int, first: int = 0) -> int:
    """Traps on each of a worker's pages so that one who answers ``pages`` pages has met the trap
    rule's ``needed`` (after ``first`` met before them, e.g. on a quiz page):
    ``ceil((needed - first) / pages)``, at least 1 and at most ``items_per_page - 1`` (a page
    keeps one item of its own); 1 when ``pages`` is 0 (no limit) or ``needed`` is None.

    Parameters
    ----------
    needed : int or None
        The trap rule's count (:class:`TrapCount`).
    pages : int
        Pages (task suites) one worker answers at most; 0 for no limit.
    items_per_page : int
        Items on a page.
    first : int, optional
        Traps a worker has met before those pages (default 0).

    Returns
    -------
    int
    """
    if needed is None or pages <= 0:
        return 1
    return int(min(max(1, -(-(needed - first) // pages)), max(items_per_page - 1, 1)))


def trap_count_line(needed: int | None, per_page: int, pages: int, first: int = 0, available: int | None = None,
                    page: str = "page", platform: str = "the platform", keys: tuple = ("pages", "per_page"),
                    auto: int | None = None, fix: str = "") -> str:
    """Where a worker of a platform with test questions meets the trap rule's count, and what the
    platform cannot enforce, in words for export's summary.

    Parameters
    ----------
    needed : int or None
        The trap rule's count.
    per_page : int
        Traps on each page.
    pages : int
        Pages one worker answers at most; 0 for no limit.
    first : int, optional
        Traps met before them (a quiz page; default 0).
    available : int or None, optional
        Traps in the batch (a worker never meets one twice); None: not known.
    page : str, optional
        The platform's word for a page (default "page").
    platform : str, optional
        The platform's name (default "the platform").
    keys : tuple of str, optional
        The settings of the pages a worker may do and of the traps a page.
    auto : int or None, optional
        Traps a page ``"auto"`` gives, named when ``per_page`` is fewer.
    fix : str, optional
        What to set where the batch holds fewer traps than ``needed`` (:attr:`TrapCount.fix`);
        empty (default): ``[traps] count = <needed>``.

    Returns
    -------
    str
    """
    if needed is None:
        return "the trap rule's count: none is enough for these traps (see generate's line)"
    if available is not None and available < needed:
        return (f"the batch holds {available} traps, fewer than the trap rule's {needed}: a worker meets at most "
                f"{available}; " + (fix or f"set [traps] count = {needed} (or \"auto\") and generate and export again"))
    after = first + per_page * pages
    if pages > 0 and after < needed:
        more = -(-(needed - first) // max(per_page, 1))
        fix = f"set {keys[1]} to {auto} (\"auto\") or raise {keys[0]} to {more}" if auto and auto > per_page \
            else f"raise {keys[0]} to {more}"
        return (f"a worker meets {after} traps by the last of their {pages} {page}s, fewer than the trap rule's "
                f"{needed}: {fix}")
    reach = max(0, -(-(needed - first) // max(per_page, 1)))
    return (f"a worker meets the trap rule's {needed} traps after {reach} {page}{'' if reach == 1 else 's'}; "
            f"{platform} cannot make a worker do that many: one who stops sooner meets fewer, and under "
            "[quality] min_traps is kept unscored")


@dataclass(frozen=True)
class Setting:
    """One key of ``[platforms.<name>]`` in study.toml: default, type, check and its meaning.

    Attributes
    ----------
    name : str
        The key.
    default : object
        Its value when study.toml leaves it out (filled in by the validation).
    kind : type or tuple of type
        The TOML type(s) accepted, e.g. ``int`` or ``(int, float)`` (a bool is not a number).
    check : callable or None
        A constraint on the value (True when it holds); None for none.
    what : str
        What it takes, in the words of the error on a bad value.
    help : str
        Its meaning, one line: the comment above it in the template.
    """

    name: str
    default: object
    kind: type | tuple
    check: Callable | None = None
    what: str = ""
    help: str = ""

    def valid(self, value) -> bool:
        """Whether ``value`` has the setting's type (a bool is not a number) and passes its check.

        Parameters
        ----------
        value : object
            The value of study.toml.

        Returns
        -------
        bool
        """
        ok = isinstance(value, self.kind) and not (self.kind in (int, (int, float)) and isinstance(value, bool))
        return ok and (self.check is None or bool(self.check(value)))


# --------------------------------------------------------------------------------------------
# Items
# --------------------------------------------------------------------------------------------
def _token(rng: np.random.Generator, n: int) -> list[str]:
    """Opaque ids: 16 hex digits from the seeded generator, unique."""
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        for v in rng.integers(0, 2 ** 63, size=n - len(out)):
            t = f"{int(v):016x}"
            if t not in seen:
                seen.add(t)
                out.append(t)
    return out


#: Display fields that a page turns into a link or a player: only web addresses may.
URL_FIELDS = ("url", "audio_url")


def is_web_url(value: str) -> bool:
    """An http(s) address: the only kind a worker-visible page makes a link or a player of
    (``javascript:``, ``data:`` and the like would run or embed something on a click).

    Parameters
    ----------
    value : object
        The value, as text.

    Returns
    -------
    bool
    """
    return bool(re.match(r"\s*https?://", str(value), flags=re.IGNORECASE))


def _display(doc_ids: pd.Series, documents: pd.DataFrame | None, field: str) -> np.ndarray:
    if documents is None or field not in documents.columns:
        return np.full(len(doc_ids), "", dtype=object)
    values = doc_ids.map(documents[field]).fillna("")
    return values.map(lambda v: html.escape(str(v), quote=True)).to_numpy(dtype=object)


def example_digest(frame: pd.DataFrame, k: int) -> np.ndarray:
    """A short hash of each example's query and lists (a1..ak, b1..bk): stored in the key and
    with every collected answer, so an analysis can tell when the examples it joins answers to
    are no longer the ones that were answered.

    Parameters
    ----------
    frame : pandas.DataFrame
        Examples with ``query`` and ``a1``..``ak``, ``b1``..``bk``.
    k : int
        List length.

    Returns
    -------
    numpy.ndarray
        16 hexadecimal digits per example.
    """
    import hashlib
    cols = ["query"] + [f"{s}{i}" for s in "ab" for i in range(1, k + 1)]
    joined = frame[cols].astype(str).agg("\x1f".join, axis=1)
    return np.array([hashlib.sha256(v.encode("utf-8")).hexdigest()[:16] for v in joined], dtype=object)


def _split_urls(visible: pd.DataFrame) -> None:
    """Keep only web addresses in the url / audio_url columns (platform templates link them);
    any other value moves to a ``<field>_text`` column, shown as plain text."""
    for col in [c for c in visible.columns if c.endswith(URL_FIELDS)]:
        values = visible[col].astype(str)
        web = values.map(is_web_url) | (values == "")
        if not web.all():
            visible[f"{col}_text"] = values.where(~web, "")
            visible[col] = values.where(web, "")


def build_items(examples: pd.DataFrame, traps: pd.DataFrame, k: int, seed: int,
                items_per_page: int = 10, documents: pd.DataFrame | None = None,
                swap: bool = True, topics: pd.DataFrame | None = None):
    """Shuffle, counterbalance and pack examples and traps into worker-visible items.

    Parameters
    ----------
    examples : pandas.DataFrame
        examples.csv.
    traps : pandas.DataFrame
        traps.csv (may be empty).
    k : int
        List length.
    seed : int
        Seed of the shuffle, the swaps and the item ids.
    items_per_page : int, optional
        Items on a page (default 10).
    documents : pandas.DataFrame or None, optional
        The documents table, for the display fields.
    swap : bool, optional
        Show each item's lists swapped with probability 1/2 (default True).
    topics : pandas.DataFrame or None, optional
        The topics table, for the query's title and description.

    Returns
    -------
    visible : DataFrame
        ``item_id, page, query`` (+ ``query_title``, ``query_description`` from ``topics`` or the
        documents table), then for each shown side ``A``/``B``
        and rank i: ``A1`` (document id) and its display fields ``A1_title``, ... (escaped).
    key : DataFrame
        ``item_id, source_id, is_trap, swapped, expected, expected_shown, page``.

    Raises
    ------
    SatcalError
        ``items_per_page`` is below 1.
    """
    if items_per_page < 1:
        raise SatcalError(f"items_per_page must be at least 1, got {items_per_page}")
    rng = np.random.default_rng(seed)
    src = pd.concat([
        examples.assign(source_id=examples["example_id"], is_trap=False, expected=""),
        traps.assign(source_id=traps["trap_id"], is_trap=True),
    ], ignore_index=True) if len(traps) else examples.assign(source_id=examples["example_id"],
                                                              is_trap=False, expected="")
    n = len(src)
    order = rng.permutation(n)
    src = src.iloc[order].reset_index(drop=True)
    swapped = rng.random(n) < 0.5 if swap else np.zeros(n, dtype=bool)
    item_ids = _token(rng, n)
    page = np.arange(n) // items_per_page + 1
    docs = documents.set_index("doc") if documents is not None else None
    # every worker-visible value is HTML-escaped here, query ids included: platform templates
    # insert them as they are
    visible = pd.DataFrame({"item_id": item_ids, "page": page,
                            "query": [html.escape(str(v), quote=True) for v in src["query"]]})
    for field in DISPLAY_FIELDS:
        if docs is not None and field in docs.columns:
            visible[f"query_{field}"] = _display(src["query"], docs, field)
    if topics is not None:  # the topic's own text wins over a documents-table entry
        by_query = topics.set_index("query")
        for field in ("title", "description"):
            if (by_query[field] != "").any():
                visible[f"query_{field}"] = _display(src["query"].astype(str), by_query, field)
    for shown, (canon_plain, canon_swapped) in (("A", ("a", "b")), ("B", ("b", "a"))):
        for i in range(1, k + 1):
            ids = np.where(swapped, src[f"{canon_swapped}{i}"], src[f"{canon_plain}{i}"])
            visible[f"{shown}{i}"] = [html.escape(str(v), quote=True) for v in ids]
            for field in DISPLAY_FIELDS:
                if docs is not None and field in docs.columns:
                    visible[f"{shown}{i}_{field}"] = _display(pd.Series(ids), docs, field)
    _split_urls(visible)
    _fill_titles(visible, k)
    expected = src["expected"].fillna("").astype(str)
    expected_shown = [";".join(swap_answer(c) if s else c for c in e.split(";")) if e else ""
                      for e, s in zip(expected, swapped)]
    key = pd.DataFrame({"item_id": item_ids, "source_id": src["source_id"].to_numpy(),
                        "is_trap": src["is_trap"].to_numpy(bool), "swapped": swapped,
                        "expected": expected.to_numpy(), "expected_shown": expected_shown,
                        "page": page, "example_hash": example_digest(src, k)})
    return visible, key


def _fill_titles(visible: pd.DataFrame, k: int) -> None:
    """A query or document without a title shows its id, on every platform as in preview.

    Platform templates (Appen's CML, Toloka's view) show the ``_title`` column where there is
    one; a documents table or topics file that covers only some queries or documents leaves the
    others' titles empty, and a worker would read "Query:" and nothing. Preview and every
    HTML page satcal renders fall back to the id (``_item.html``); the files now carry the same
    text. Queries and documents shown as bare ids (no title, snippet, description or audio)
    are counted in one warning each.
    """
    import warnings
    from ..errors import SatcalWarning
    shown = [("query", "query_title", "queries", "a topics file (satcal init --topics, or topics = ... "
              "in study.toml) or documents-table rows for them")]
    shown += [(f"{side}{i}", f"{side}{i}_title", "documents", "documents-table titles for them")
              for side in ("A", "B") for i in range(1, k + 1)]
    bare: dict[str, tuple[set, set, str]] = {}
    for id_col, title_col, what, remedy in shown:
        if title_col not in visible.columns:
            continue  # no titles at all: workspace export warns about bare ids as a whole
        ids, titles = visible[id_col], visible[title_col].fillna("").astype(str)
        empty = titles.str.strip() == ""
        visible[title_col] = titles.where(~empty, ids)
        named, untitled, _ = bare.setdefault(what, (set(), set(), remedy))
        named.update(ids)
        shown_bare = empty | (titles == ids)
        for other in ("snippet", "audio_url", "description"):  # a snippet or a player says something
            col = f"{id_col}_{other}"
            if col in visible.columns:
                shown_bare &= visible[col].fillna("").astype(str).str.strip() == ""
        untitled.update(ids[shown_bare])
    for what, (named, untitled, remedy) in bare.items():
        if untitled:
            example = html.unescape(sorted(untitled)[0])
            warnings.warn(f"{len(untitled)} of {len(named)} {what} have no text: workers will see the "
                          f"bare id (e.g. {example!r}); give {remedy}", SatcalWarning, stacklevel=4)


# --------------------------------------------------------------------------------------------
# One item as a worker sees it
# --------------------------------------------------------------------------------------------
#: The Jinja2 templates of every worker-visible HTML page (``_item.html`` holds the item's
#: macros; ``satcal serve`` loads them too).
TEMPLATES = Path(__file__).parent / "templates"


def _plain(value) -> str:
    # items.csv holds HTML-escaped text (platform templates insert it as is); Jinja2 templates
    # escape on output, so they get the plain text back
    return html.unescape(str(value)) if value is not None and value == value else ""


def _document_view(row, prefix: str) -> dict:
    get = lambda field: _plain(row.get(f"{prefix}_{field}", ""))
    doc = _plain(row[prefix])
    return {"id": doc, "title": get("title") or doc, "snippet": get("snippet"), "url": get("url"),
            "url_text": get("url_text"), "audio_url": get("audio_url"), "audio_url_text": get("audio_url_text")}


def item_view(row, k: int) -> dict:
    """One row of the worker-visible items (:func:`build_items`) as the plain text a template
    shows: ``item_id``, the query's fields, and lists A and B with each document's fields.

    Parameters
    ----------
    row : Mapping or pandas.Series
        One row of items.csv.
    k : int
        List length.

    Returns
    -------
    dict
    """
    return {"item_id": str(row["item_id"]), "query": _plain(row["query"]),
            **{f"query_{f}": _plain(row.get(f"query_{f}", "")) for f in ("title", "description", "audio_url")},
            "lists": [{"side": side, "docs": [_document_view(row, f"{side}{i}") for i in range(1, k + 1)]}
                      for side in ("A", "B")]}


def template_environment(*extra_dirs):
    """A Jinja2 environment with autoescaping over ``extra_dirs`` and the item templates.

    Parameters
    ----------
    *extra_dirs : str or os.PathLike
        Template directories searched first, in order, before the item templates.

    Returns
    -------
    jinja2.Environment
        Undefined names are errors (``StrictUndefined``).
    """
    import jinja2
    return jinja2.Environment(loader=jinja2.FileSystemLoader([*map(str, extra_dirs), str(TEMPLATES)]),
                              autoescape=True, undefined=jinja2.StrictUndefined)


@functools.lru_cache(maxsize=1)
def _item_templates():
    """The item templates' environment, built once: building one per item made a Label Studio
    export of a thousand items take half a minute."""
    return template_environment()


def render_lists_html(row: pd.Series, k: int, inline_style: bool = False) -> str:
    """The HTML of an item without its answer controls: the query, then lists A and B side by
    side. ``inline_style`` puts the layout in style attributes, for platforms that show the
    HTML inside their own page (Label Studio's HyperText) where no stylesheet of ours applies.

    Parameters
    ----------
    row : Mapping or pandas.Series
        One row of items.csv.
    k : int
        List length.
    inline_style : bool, optional
        Put the layout in style attributes (default False).

    Returns
    -------
    str
    """
    return _item_templates().get_template("lists.html").render(item=item_view(row, k),
                                                               inline_style=inline_style)


def instruction_paragraphs(text: str) -> list[str]:
    """study.toml instructions are text; a blank line starts a paragraph.

    Parameters
    ----------
    text : str
        The instructions.

    Returns
    -------
    list of str
        The paragraphs, stripped; empty ones left out.
    """
    return [p.strip() for p in str(text).split("\n\n") if p.strip()]


def render_instructions_html(instructions: str) -> str:
    """The study's instructions as escaped HTML paragraphs, for a platform's instructions box.

    Parameters
    ----------
    instructions : str
        The instructions text.

    Returns
    -------
    str
    """
    template = _item_templates().get_template("instructions.html")
    return template.render(paragraphs=instruction_paragraphs(instructions))


def render_form_html(visible: pd.DataFrame, k: int, instructions: str, title: str) -> str:
    """A page of items with their four options, as a worker sees them (the generic platform's
    template and ``satcal preview``); a small script shows the code a click records.

    Parameters
    ----------
    visible : pandas.DataFrame
        The items of the page (rows of items.csv).
    k : int
        List length.
    instructions : str
        The instructions text.
    title : str
        The page's title.

    Returns
    -------
    str
    """
    paragraphs = instruction_paragraphs(instructions)
    items = [item_view(row, k) for row in visible.to_dict("records")]
    return _item_templates().get_template("form.html").render(
        title=title, instructions=paragraphs, items=items, labels=ANSWER_LABELS) + "\n"


def check_worker_visible(columns) -> None:
    """Refuse any worker-visible column that could carry the key.

    Parameters
    ----------
    columns : iterable of str
        The columns of a worker-visible table.

    Raises
    ------
    AssertionError
        A column is a key column (source, trap flag, swap, expected answers, levels, scores or
        example/trap ids).
    """
    secret = {"source_id", "is_trap", "swapped", "expected", "expected_shown"}
    leaks = [c for c in columns if c in secret or re.fullmatch(r"r[ab]\d+|phi.*|example_id|trap_id", c)]
    if leaks:
        raise AssertionError(f"key columns in a worker-visible file: {leaks}")
