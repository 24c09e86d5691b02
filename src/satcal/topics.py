"""Topics: what each query means, shown to workers beside the lists.

Read from any of:

- TREC topics files, classic (``<top> <num> Number: 401 <title> ... <desc> Description: ...
  <narr> Narrative: ... </top>``, the ad hoc and Robust tracks) or XML (``<topic number="1">
  <query>...</query> <description>...</description>``, the Web tracks);
- query files of two tab-separated columns, id and text, without a header (TREC Deep Learning,
  MS MARCO);
- CSV or TSV with a header holding ``query`` and ``title``, and optionally ``description`` and
  ``narrative``.

Returns one row per query: ``query, title, description, narrative`` (text, unescaped; every
exporter escapes what it shows).
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from .errors import InputFileError

__all__ = ["read_topics", "TOPIC_COLUMNS"]

TOPIC_COLUMNS = ["query", "title", "description", "narrative"]
_CLASSIC_FIELDS = {"num": "query", "title": "title", "desc": "description", "narr": "narrative"}
_LABELS = re.compile(r"^\s*(Number|Topic|Description|Narrative)\s*:\s*", re.IGNORECASE)


def read_topics(path) -> pd.DataFrame:
    """Read a topics file in any of the formats above (detected from its content).

    Parameters
    ----------
    path : path-like

    Returns
    -------
    pandas.DataFrame
        One row per query: ``query, title, description, narrative`` (text, unescaped).

    Raises
    ------
    InputFileError
        Naming file and line: an empty file, none of the formats, a topic without its number
    or title, a topic twice.
    """
    from .fileio import read_utf8_text
    path = Path(path)
    text = read_utf8_text(path)
    if not text.strip():
        raise InputFileError(path, "is empty: expected TREC topics or a CSV/TSV with query and title")
    head = text.lstrip("\ufeff")[:2000].lower()
    if "<top>" in head:
        table = _classic(text, path)
    elif "<topic" in head:
        table = _xml(text, path)
    else:
        table = _delimited(text, path)
    return _checked(table, path)


def _clean(value: str) -> str:
    return " ".join(_LABELS.sub("", value).split())


def _classic(text: str, path: Path) -> pd.DataFrame:
    rows = []
    for block in re.finditer(r"<top>(.*?)(?:</top>|(?=<top>)|\Z)", text, flags=re.DOTALL | re.IGNORECASE):
        body = block.group(1)
        parts = re.split(r"<(num|title|desc|narr)>", body, flags=re.IGNORECASE)
        row = {c: "" for c in TOPIC_COLUMNS}
        for tag, value in zip(parts[1::2], parts[2::2]):
            row[_CLASSIC_FIELDS[tag.lower()]] = _clean(re.sub(r"</\w+>", " ", value))
        row["_line"] = text[:block.start()].count("\n") + 1
        rows.append(row)
    return pd.DataFrame(rows)


def _xml(text: str, path: Path) -> pd.DataFrame:
    import html
    rows = []
    for block in re.finditer(r"<topic\b([^>]*)>(.*?)</topic>", text, flags=re.DOTALL | re.IGNORECASE):
        attrs, body = block.group(1), block.group(2)
        number = re.search(r"number\s*=\s*[\"']?([^\"'\s>]+)", attrs)
        field = lambda name: (m.group(1) if (m := re.search(rf"<{name}>(.*?)</{name}>", body,
                                                             flags=re.DOTALL | re.IGNORECASE)) else "")
        rows.append({"query": number.group(1) if number else "",
                     "title": html.unescape(_clean(field("query") or field("title"))),
                     "description": html.unescape(_clean(field("description"))),
                     "narrative": html.unescape(_clean(field("narrative"))),
                     "_line": text[:block.start()].count("\n") + 1})
    return pd.DataFrame(rows)


def _delimited(text: str, path: Path) -> pd.DataFrame:
    import csv
    import io
    first = text.lstrip("\ufeff").splitlines()[0]
    delimiter = "\t" if "\t" in first else ","
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""), delimiter=delimiter)
    header = [h.strip().lower() for h in next(reader)]
    if "query" in header:
        missing = [c for c in ("title",) if c not in header]
        if missing:
            raise InputFileError(path, "missing column title: a topics table needs query and title "
                                       "(and optionally description, narrative)", 1)
        rows = []
        for line_no, row in enumerate(reader, start=2):
            if not any(v.strip() for v in row):
                continue
            if len(row) != len(header):
                raise InputFileError(path, f"{len(row)} fields, the header has {len(header)}", line_no)
            record = dict(zip(header, row))
            rows.append({**{c: record.get(c, "").strip() for c in TOPIC_COLUMNS}, "_line": line_no})
        return pd.DataFrame(rows)
    if delimiter == "\t" and len(header) == 2:  # id<TAB>text, no header (TREC DL, MS MARCO)
        rows = []
        for line_no, line in enumerate(text.lstrip("\ufeff").splitlines(), start=1):
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 2:
                raise InputFileError(path, f"expected two tab-separated fields (query id, text), got {len(parts)}",
                                     line_no)
            rows.append({"query": parts[0].strip(), "title": parts[1].strip(), "description": "",
                         "narrative": "", "_line": line_no})
        return pd.DataFrame(rows)
    raise InputFileError(path, "not a topics file: expected TREC topics (<top> or <topic>), "
                               "'id<TAB>text' lines, or a CSV/TSV with query and title columns", 1)


def _checked(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    if table.empty:
        raise InputFileError(path, "holds no topics")
    for column in ("query", "title"):
        empty = table[column].astype(str).str.strip() == ""
        if empty.any():
            raise InputFileError(path, f"a topic without a {'number' if column == 'query' else column}",
                                 int(table.loc[empty, "_line"].iloc[0]), column)
    dup = table["query"].duplicated()
    if dup.any():
        raise InputFileError(path, f"topic {table.loc[dup, 'query'].iloc[0]!r} appears twice",
                             int(table.loc[dup, "_line"].iloc[0]), "query")
    return table[TOPIC_COLUMNS].reset_index(drop=True)
