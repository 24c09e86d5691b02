"""Small file helpers shared by every stage: atomic writes, output sets replaced as a whole,
content hashes."""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text", "sha256_file", "sha256_bytes", "save_figure", "OutputSet",
           "read_utf8_text", "read_delimited", "holding",
           "spreadsheet_safe", "spreadsheet_value", "to_csv_safe", "write_csv_safe", "table_csv_bytes"]


def atomic_write_bytes(path: "str | os.PathLike", data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file and a rename, so a reader never sees
    half a file and an interrupted write leaves the old one intact.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write; its directory is made if missing.
    data : bytes
        The content.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OSError
        The write failed (naming ``path``); the temporary file is removed.
    """
    return _atomic_write(path, lambda fh: fh.write(data))


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


def atomic_write_text(path: "str | os.PathLike", text: str) -> Path:
    """Write ``text`` as UTF-8 to ``path`` atomically (:func:`atomic_write_bytes`).

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    text : str
        The content.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    return atomic_write_bytes(path, text.encode("utf-8"))


class OutputSet:
    """Files and directories under ``root`` that a command replaces as one set.

    Each output is written into a stage directory (``.satcal-stage-<name>/new/<path>``); then
    the list of outputs is written atomically (the commit) and each one is moved into place,
    a replaced directory first set aside. A command killed before its commit leaves the old
    set whole (the stage is discarded by :meth:`recover`); killed after it, :meth:`recover`
    finishes the moves. No reader is ever left with half of one set and half of another once
    recovery has run, which every writing command does first.

    Parameters
    ----------
    root : str or os.PathLike
        The directory the outputs are written under.
    name : str
        Names the stage directory (``.satcal-stage-<name>``): one per kind of output set, so
        two commands writing different sets under one root do not share a stage.
    """

    def __init__(self, root: "str | os.PathLike", name: str):
        self.root = Path(root)
        self.stage = self.root / f".satcal-stage-{name}"
        self.targets: list[Path] = []
        self.deletions: list[Path] = []
        self._walk = False

    def __enter__(self) -> "OutputSet":
        return self.begin()

    def __exit__(self, kind, error, trace) -> None:
        # an error while writing discards the stage; one while committing (after the commit
        # list is written) leaves it for recover() to finish
        if kind is None:
            self.commit()
        else:
            self.abandon()

    def begin(self) -> "OutputSet":
        if self.stage.exists():
            OutputSet._settle(self.stage, self.root)
        try:
            (self.stage / "new").mkdir(parents=True)
        except BaseException:  # a full disk, say: no empty stage left behind
            self.abandon()
            raise
        return self

    def file(self, rel: "str | os.PathLike") -> Path:
        """Where to write the output file ``rel`` (relative to the root).

        Parameters
        ----------
        rel : str or os.PathLike
            Relative path of the output.

        Returns
        -------
        pathlib.Path
            Its path in the stage (its directory made).

        Raises
        ------
        ValueError
            ``rel`` is absolute or goes up with ``..``.
        """
        path = self._add(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def dir(self, rel: "str | os.PathLike") -> Path:
        """An empty directory to fill in place of the output directory ``rel``.

        Parameters
        ----------
        rel : str or os.PathLike
            Relative path of the output directory.

        Returns
        -------
        pathlib.Path

        Raises
        ------
        ValueError
            ``rel`` is absolute or goes up with ``..``.
        """
        path = self._add(rel)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def tree(self) -> Path:
        """A directory standing for the root: every file written under it is an output (a
        file of the same name in the root is replaced, the root's other files are kept)."""
        self._walk = True
        return self.stage / "new"

    def delete(self, rel: "str | os.PathLike") -> None:
        """Remove the file ``rel`` (relative to the root) when the set is committed.

        Parameters
        ----------
        rel : str or os.PathLike
            Relative path of the file.

        Raises
        ------
        ValueError
            ``rel`` is absolute or goes up with ``..``.
        """
        rel = Path(rel)
        if rel.is_absolute() or ".." in rel.parts:
            raise ValueError(f"{rel}: outputs are named relative to {self.root}")
        self.deletions.append(rel)

    def final(self, path: "str | os.PathLike") -> Path:
        """Where a file written in the stage ends up once committed.

        Parameters
        ----------
        path : str or os.PathLike
            A path under the stage's ``new`` directory.

        Returns
        -------
        pathlib.Path
        """
        return self.root / Path(path).relative_to(self.stage / "new")

    def _add(self, rel) -> Path:
        rel = Path(rel)
        if rel.is_absolute() or ".." in rel.parts:
            raise ValueError(f"{rel}: outputs are named relative to {self.root}")
        if rel not in self.targets:
            self.targets.append(rel)
        return self.stage / "new" / rel

    def commit(self) -> None:
        if self._walk:  # files written under tree(), outside the outputs already named
            new = self.stage / "new"
            named = [new / t for t in self.targets]
            for path in sorted(p for p in new.rglob("*") if p.is_file()):
                if not any(path == n or n in path.parents for n in named):
                    self.targets.append(path.relative_to(new))
        try:
            if self.deletions:  # read only once COMMIT exists
                atomic_write_text(self.stage / "DELETE", "".join(f"{t.as_posix()}\n" for t in self.deletions))
            atomic_write_text(self.stage / "COMMIT", "".join(f"{t.as_posix()}\n" for t in self.targets))
        except BaseException:
            # not committed (a full disk, say): the old set stays, and so must no stage
            self.abandon()
            raise
        OutputSet._settle(self.stage, self.root)

    def abandon(self) -> None:
        import shutil
        shutil.rmtree(self.stage, ignore_errors=True)

    @staticmethod
    def recover(root: "str | os.PathLike") -> list[str]:
        """Finish committed sets and discard uncommitted ones; the names of those finished.

        Parameters
        ----------
        root : str or os.PathLike
            The directory whose stages are settled.

        Returns
        -------
        list of str
        """
        finished = []
        for stage in sorted(Path(root).glob(".satcal-stage-*")):
            if (stage / "COMMIT").exists():
                finished.append(stage.name[len(".satcal-stage-"):])
            OutputSet._settle(stage, Path(root))
        return finished

    @staticmethod
    def _settle(stage: Path, root: Path) -> None:
        """Roll a stage forward (committed) or back (not), then remove it. Idempotent, so a
        recovery that is itself interrupted can simply run again."""
        import shutil
        commit = stage / "COMMIT"
        if commit.exists():
            for line in commit.read_text(encoding="utf-8").splitlines():
                new, target = stage / "new" / line, root / line
                if not new.exists() and not new.is_symlink():
                    continue  # moved by an earlier attempt
                target.parent.mkdir(parents=True, exist_ok=True)
                if new.is_dir() and target.exists():
                    old = stage / "old" / line
                    old.parent.mkdir(parents=True, exist_ok=True)
                    os.rename(target, old)
                os.replace(new, target)
            deletions = stage / "DELETE"
            if deletions.exists():
                for line in deletions.read_text(encoding="utf-8").splitlines():
                    (root / line).unlink(missing_ok=True)
        shutil.rmtree(stage, ignore_errors=True)


def package_versions() -> dict:
    """Versions of satcal and the scientific stack, for provenance records."""
    from importlib import metadata
    from ._version import __version__
    out = {"satcal": __version__}
    for name in ("numpy", "scipy", "pandas", "statsmodels", "scikit-learn", "matplotlib"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def sha256_bytes(data: bytes) -> str:
    """The SHA-256 hex digest of ``data``.

    Parameters
    ----------
    data : bytes

    Returns
    -------
    str
    """
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: "str | os.PathLike") -> str:
    """The SHA-256 hex digest of the file at ``path``, read in chunks of 1 MiB.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    str
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_figure(fig, base: "str | os.PathLike") -> list[Path]:
    """Save a matplotlib figure as ``base.png`` (150 dpi) and ``base.pdf``, atomically and with
    no creation date or software version inside, so the same figure gives the same bytes.

    The figure is saved at its own size (``bbox_inches=None``): its layout is made once, where
    it is drawn (``tight_layout`` or a constrained layout), and each format then costs one
    drawing. A tight bounding box would draw the whole figure once more per format only to
    measure it (a third of ``satcal analyze``'s time at 4,400 answers).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    base : str or os.PathLike
        The path without suffix.

    Returns
    -------
    list of pathlib.Path
        The PNG and the PDF.
    """
    import io

    base = Path(base)
    paths = []
    metadata = {"png": {"Software": None},
                "pdf": {"CreationDate": None, "Producer": None, "Creator": None}}
    for ext, kwargs in (("png", {"dpi": 150}), ("pdf", {})):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, bbox_inches=None, metadata=metadata[ext], **kwargs)
        paths.append(atomic_write_bytes(base.with_suffix(f".{ext}"), buf.getvalue()))
    return paths


def new_figure(*grid, figsize=None, layout=None, **subplots):
    """A matplotlib ``Figure`` and its axes (``Figure.subplots`` arguments), made without
    pyplot: the user's backend (a notebook's inline one, say) is never switched, and nothing
    is left open in pyplot. ``layout``: the Figure's layout engine (e.g. ``"constrained"``).

    Parameters
    ----------
    *grid : int
        Rows and columns (``Figure.subplots``' ``nrows, ncols``).
    figsize : tuple of float, optional
        Width and height in inches; default matplotlib's.
    layout : str, optional
        The Figure's layout engine (e.g. ``"constrained"``).
    **subplots
        Further ``Figure.subplots`` arguments (``sharex``, ``squeeze``, ...).

    Returns
    -------
    fig : matplotlib.figure.Figure
    axes : matplotlib.axes.Axes or numpy.ndarray of Axes
    """
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize, layout=layout)
    return fig, fig.subplots(*grid, **subplots)


def panel_axes(ax, panels: int, *grid, figsize=None, **subplots):
    """Axes for a figure of ``panels`` panels: the caller's (``ax``: one Axes or an array of
    them, at least one per panel, e.g. from a notebook's own ``plt.subplots``) or those of a
    new figure laid out as ``grid``. Returns the figure, a flat array of axes, and whether the
    figure is new (a new one gets the figure-level legend and title).

    Parameters
    ----------
    ax : matplotlib.axes.Axes, array of Axes, or None
        The caller's axes; None makes a new figure.
    panels : int
        Number of panels.
    *grid
        Rows and columns of a new figure.
    figsize : tuple or None, optional
        Size of a new figure.
    **subplots
        Other ``Figure.subplots`` arguments for a new figure.

    Returns
    -------
    tuple of (Figure, numpy.ndarray, bool)

    Raises
    ------
    ValueError
        ``ax`` holds fewer axes than ``panels``.
    """
    import numpy as np
    if ax is None:
        fig, axes = new_figure(*grid, figsize=figsize, squeeze=False, **subplots)
        return fig, axes.ravel(), True
    axes = np.asarray(ax, dtype=object).ravel()
    if axes.size < panels:
        raise ValueError(f"ax: this figure has {panels} panels; give at least {panels} axes "
                         f"(got {axes.size})")
    return axes[0].figure, axes, False


#: One colour per gain in every figure (calibration and reliability alike).
GAIN_COLOURS = {"bin2": "#8c564b", "bin1": "#e377c2", "exp5": "#d62728", "exp3": "#ff7f0e",
                "exp2": "#2ca02c", "lin": "#1f77b4"}


def gain_colour(gain: str, i: int) -> str:
    """The colour of a gain (the i-th of the figure's cycle for gains without a fixed one).

    Parameters
    ----------
    gain : str
        The gain's name.
    i : int
        Its position among the figure's gains.

    Returns
    -------
    str
        A matplotlib colour.
    """
    return GAIN_COLOURS.get(gain, f"C{i % 10}")


def read_utf8_text(path: "str | os.PathLike") -> str:
    """A text file's content: UTF-8 with or without a BOM, or UTF-16 / UTF-32 (as spreadsheet
    programs save "Unicode text"); CRLF is left to the line splitter.

    Another encoding (Latin-1, Windows-1252), a sequence that does not decode, or a binary
    file is a one-line error naming the line where decoding failed.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    str

    Raises
    ------
    SatcalError
        The file is missing, unreadable or not text in these encodings.
    """
    return decode_utf8(read_file_bytes(path), path)


def read_file_bytes(path: "str | os.PathLike") -> bytes:
    """A file's bytes; a missing, unreadable or special file is a one-line error.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    bytes

    Raises
    ------
    SatcalError
        No such file, a directory, permission denied, or another read error.
    """
    from .errors import SatcalError
    path = Path(path)
    held = _HELD.get(os.path.abspath(path))
    if held is not None:
        return held
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise SatcalError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SatcalError(f"{path}: is a directory, expected a file") from None
    except PermissionError:
        raise SatcalError(f"{path}: permission denied: the file cannot be read (check its "
                          "permissions)") from None
    except OSError as exc:
        raise SatcalError(f"{path}: cannot be read ({exc.strerror or exc})") from None


#: Files whose bytes are read already (:func:`holding`), by absolute path.
_HELD: dict = {}


def holding(path: "str | os.PathLike", data: bytes):
    """A context in which :func:`read_file_bytes` of ``path`` gives ``data``, the bytes read
    already: a result file is read once (not again by its platform's reader), and the rows an
    ingest parses are those of the very bytes it archives and hashes.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    data : bytes
        Its bytes.

    Returns
    -------
    contextlib.AbstractContextManager
    """
    import contextlib

    @contextlib.contextmanager
    def held():
        key = os.path.abspath(path)
        _HELD[key] = data
        try:
            yield
        finally:
            _HELD.pop(key, None)
    return held()


#: Byte-order marks of the wider Unicode encodings, longest first (UTF-32's LE mark starts
#: with UTF-16's).
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
         (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def _wide_codec(raw: bytes) -> str | None:
    """UTF-16 or UTF-32 by the BOM, or UTF-16 without one by the zero bytes of ASCII text."""
    for bom, codec in _BOMS:
        if raw.startswith(bom):
            return codec
    if len(raw) > 3 and raw[0] and not raw[1] and not raw[3]:
        return "utf-16-le"
    if len(raw) > 3 and not raw[0] and raw[1] and not raw[2]:
        return "utf-16-be"
    return None


def decode_utf8(raw: bytes, path: "str | os.PathLike") -> str:
    """``raw`` as text: UTF-8 (a BOM dropped), or UTF-16 / UTF-32 recognised by the BOM (or
    UTF-16 by its zero bytes). Undecodable bytes, NUL characters and spreadsheet workbooks are
    one-line errors naming the line.

    Parameters
    ----------
    raw : bytes
        The file's content.
    path : str or os.PathLike
        The file, named in errors.

    Returns
    -------
    str

    Raises
    ------
    InputFileError
        The bytes are a workbook, do not decode, or hold a NUL character.
    """
    from .errors import InputFileError
    if raw.startswith((b"PK\x03\x04", b"\xd0\xcf\x11\xe0")):
        raise InputFileError(path, "is a spreadsheet workbook (or another archive), not text: save it "
                                   "as CSV (UTF-8)")
    codec = _wide_codec(raw)
    try:
        text = raw.decode(codec or "utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].decode(codec or "utf-8", errors="replace").count("\n") + 1
        if codec:
            raise InputFileError(path, f"is {codec.upper().replace('-LE', '').replace('-BE', '')} text with "
                                       f"bytes that do not decode ({exc.reason}): re-save it as UTF-8",
                                 line) from None
        raise InputFileError(path, f"is not UTF-8 text (byte {raw[exc.start]:#x}; it looks like "
                                   "Latin-1 or Windows-1252: re-save it as UTF-8)", line) from None
    if codec and text.startswith("\ufeff"):
        text = text[1:]  # utf-16-le / -be keep a BOM that 'utf-16' would have dropped
    nul = text.find("\x00")
    if nul >= 0:
        raise InputFileError(path, "holds NUL characters: a binary file, not text",
                             text.count("\n", 0, nul) + 1)
    return text


def read_csv_strings(path: "str | os.PathLike", what: str = "a CSV file"):
    """A CSV with a header, every cell a string; unreadable files are one-line errors.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file.
    what : str, optional
        What the file should hold, for the error of an empty file (default ``"a CSV file"``).

    Returns
    -------
    pandas.DataFrame
        Columns pandas reads as numbers are read again as text, so leading zeros stay.

    Raises
    ------
    InputFileError
        The file is empty or not a readable CSV.
    """
    import io
    import pandas as pd
    from .errors import InputFileError
    text = read_utf8_text(path)
    if not text.strip():
        raise InputFileError(path, f"is empty: expected {what}")
    data = text.encode("utf-8")  # bytes go straight to the C parser
    try:
        # Read once letting pandas infer (text columns then come out as strings without a
        # per-cell conversion), and read again as text only the columns it took for numbers,
        # so that ids like 007 keep their zeros.
        table = pd.read_csv(io.BytesIO(data), na_filter=False)
        other = [i for i, c in enumerate(table.columns) if not pd.api.types.is_string_dtype(table.iloc[:, i])]
        if other:
            again = pd.read_csv(io.BytesIO(data), usecols=other, dtype=str, na_filter=False)
            for i, j in zip(other, range(len(other))):
                table.isetitem(i, again.iloc[:, j])
        return table
    except pd.errors.ParserError as exc:
        raise InputFileError(path, f"is not a readable CSV ({str(exc).splitlines()[0]})") from None


def read_delimited(path, delimiter: str, required: list[str], *, text: str | None = None,
                   expected: str | None = None, rows: str | None = None, coded: bool = False):
    """A delimited file with a header, every cell a string, checked row by row; the line in
    the file where each row starts is in the ``__line__`` column.

    ``expected`` describes the layout in the errors (default: the required columns); ``rows``,
    when given, makes a header without rows an error saying what rows were expected.

    Raises one-line errors for: a missing required column (naming the delimiter found when it
    looks like the wrong one), a row with the wrong number of fields (a truncated last line or
    quoting broken by a spreadsheet program), an unclosed quote.

    Parameters
    ----------
    path : str or os.PathLike
        The file, read unless ``text`` is given, and named in errors.
    delimiter : str
        The field delimiter.
    required : list of str
        Columns the header must hold.
    text : str or None, optional
        The file's content, when already read.
    expected : str or None, optional
        The layout, as errors describe it.
    rows : str or None, optional
        What rows are expected, making a file without rows an error.
    coded : bool, default False
        When pyarrow reads the file, give a column with few distinct values (ids, answers)
        as a pandas Categorical of its strings, and a column of mostly distinct values (row
        ids) as Arrow text (pandas' ``str`` dtype): no Python string per cell. The values
        are the same; a file read another way has object columns.

    Returns
    -------
    pandas.DataFrame
        String cells and the ``__line__`` column.

    Raises
    ------
    InputFileError
        See above.
    """
    import csv
    import io
    import pandas as pd
    from .errors import InputFileError
    data = None
    if text is None:
        raw = read_file_bytes(path)
        if raw.isascii() and b"\x00" not in raw and not raw.startswith(b"PK\x03\x04"):
            # ASCII is its own text (decode_utf8 would give it back as it is): the fast readers
            # take the bytes, and the text is decoded only if the row-by-row reader needs it
            data = raw
        else:
            text = decode_utf8(raw, path)
    layout = expected or f"a header with {', '.join(required)}"
    # nothing but white space (not a strip, which copies the whole text)
    if (not data or _ASCII_BLANK.search(data) is None) if data is not None else (not text or text.isspace()):
        raise InputFileError(path, f"is empty: expected {layout}")
    # the header alone when its line is plain (no quote, no carriage return): the row-by-row
    # reader of the whole text is made only if the fast readers decline the file
    if data is not None:
        end = data.find(b"\n")
        head = data[:end + 1].decode("ascii") if end >= 0 else None
        if head is None or '"' in head or "\r" in head:
            text = data.decode("ascii")
            head = text
    else:
        end = text.find("\n")
        head = text[:end + 1] if end >= 0 else text
        if '"' in head or "\r" in head:
            head = text
    reader = csv.reader(io.StringIO(head, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader)
    except csv.Error as exc:
        raise InputFileError(path, f"unreadable header ({exc})", 1) from None
    header = [h.strip() for h in header]
    repeated = sorted({h for h in header if header.count(h) > 1 and h})
    if repeated:
        name = repeated[0]
        where = [i + 1 for i, h in enumerate(header) if h == name]
        raise InputFileError(path, f"column {name!r} appears {len(where)} times in the header "
                                   f"(columns {', '.join(map(str, where))}); which one holds the "
                                   "answer is ambiguous", 1)
    missing = [c for c in required if c not in header]
    if missing:
        other = "," if delimiter == "\t" else "\t"
        hint = ""
        if len(header) == 1 and other in header[0]:
            hint = (f" (the header is split by {'commas' if other == ',' else 'tabs'}: wrong "
                    f"delimiter, expected {'tabs' if delimiter == chr(9) else 'commas'})")
        raise InputFileError(path, f"missing column(s) {', '.join(missing)}{hint}"
                                   + (f": expected {expected}" if expected else ""), 1)
    fast = _read_regular(text.encode("utf-8") if data is None else data, delimiter, header, coded)
    if fast is not None:
        return fast
    if text is None:
        text = data.decode("ascii")
    if head is not text:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
        next(reader)  # the header, read above
    records, lines = [], []
    while True:
        start = reader.line_num + 1  # a quoted field may run over several lines: name the first
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise InputFileError(path, f"broken quoting ({exc}){_quote_hint(start, reader.line_num)}; "
                                       "was the file re-saved by a spreadsheet program?", start) from None
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != len(header):
            problem = "truncated line" if len(row) < len(header) else "extra fields"
            raise InputFileError(path, f"{problem}: {len(row)} fields, the header has {len(header)}"
                                       f"{_quote_hint(start, reader.line_num)}", start)
        records.append(row)
        lines.append(start)
    if not records and rows:
        raise InputFileError(path, f"has a header and no rows under it: expected {rows}", 2)
    table = pd.DataFrame(records, columns=header, dtype=object) if records else pd.DataFrame(columns=header)
    table["__line__"] = lines
    return table


#: A byte that is not white space (``str.isspace`` of the ASCII characters: \x1c-\x1f are).
_ASCII_BLANK = re.compile(rb"[^ \t\n\r\x0b\x0c\x1c-\x1f]")


def _read_regular(data: bytes, delimiter: str, header: list[str], coded: bool = False):
    """The rows of a file (its text as UTF-8 ``data``) in which every record is one line with
    the header's number of fields and nothing is quoted, read by pandas' C parser, with each
    row's line in ``__line__``; None for any other file (the row-by-row reader then reads it
    and names the first irregular line). The fields per line are counted with numpy, so the
    check costs a few passes over the bytes rather than a Python step per row."""
    import numpy as np
    if len(header) < 2 or len(set(header)) != len(header) or b'"' in data or b"\r" in data:
        return None
    fast = _read_regular_arrow(data, delimiter, header, coded)
    if fast is not NotImplemented:
        return fast
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.append(np.flatnonzero(raw == 10), raw.size)
    starts = np.concatenate(([0], ends[:-1] + 1))
    fields = np.diff(np.concatenate(([0], np.searchsorted(np.flatnonzero(raw == ord(delimiter)), ends)))) + 1
    body = np.arange(1, ends.size)
    body = body[ends[body] > starts[body]]  # empty lines are skipped, as by the csv module
    if (fields[body] != len(header)).any():
        return None
    if not body.size:
        return None
    table = _strings_by_value(data[starts[body[0]]:], sep=delimiter, header=None,
                              names=list(range(len(header))), quoting=3, skip_blank_lines=True)
    if len(table) != body.size:
        return None
    table.columns = header
    table["__line__"] = body + 1
    return table


def _read_regular_arrow(data: bytes, delimiter: str, header: list[str], coded: bool = False):
    """:func:`_read_regular` by pyarrow's CSV reader (the ``fast`` extra), for a file with no
    blank line: every line after the header is then one row, at line 2, 3, ...; Arrow refuses
    a line with another number of fields (None: the row-by-row reader names it).
    NotImplemented when pyarrow is absent or a blank line is in the body (the numpy check
    then counts the lines). Cells come out as :func:`_strings_by_value` gives them, or with
    ``coded`` a column with few distinct values as a Categorical of its strings."""
    try:
        import pyarrow as pa
        import pyarrow.csv as pacsv
    except ImportError:
        return NotImplemented
    if int(pa.__version__.split(".")[0]) < 14:
        return NotImplemented
    import numpy as np
    import pandas as pd
    end = data.find(b"\n")
    if end < 0 or end + 1 == len(data) or data[end + 1:end + 2] == b"\n":
        return NotImplemented  # no row, or a blank line: lines counted by the numpy check
    # a blank line further on is looked for only when Arrow's rows do not match the lines
    # (Arrow skips blank lines, so then it has fewer rows): one pass over the bytes less
    blank = lambda: data.find(b"\n\n", end) >= 0  # noqa: E731
    body = pa.py_buffer(data).slice(end + 1)  # the rows, not copied
    names = [str(i) for i in range(len(header))]
    try:
        table = pacsv.read_csv(
            pa.BufferReader(body),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, quote_char=False, escape_char=False,
                                             newlines_in_values=False, ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in names},
                                                 strings_can_be_null=False, check_utf8=False))
    except (pa.ArrowInvalid, ValueError):
        return NotImplemented if blank() else None  # a line with another number of fields
    n = data.count(b"\n", end + 1) + (0 if data.endswith(b"\n") else 1)
    if table.num_rows != n:
        return NotImplemented if blank() else None
    columns = {}
    for name, c in zip(header, names):
        cells = table.column(c)  # Arrow's chunks, one a block of the file
        if n > 20_000 and len(pa.compute.unique(cells[:10_000])) > 5_000:
            # mostly distinct (row ids): Arrow's text itself (pandas' str dtype) when coded
            cells = cells.combine_chunks()
            columns[name] = cells.to_pandas() if coded else cells.to_numpy(zero_copy_only=False)
            continue
        codes, distinct = _dictionary_codes(cells)
        if len(distinct) < n // 2 and coded:  # codes into the distinct strings
            columns[name] = pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(pd.Index(distinct, dtype=object)))
        elif len(distinct) < n // 2:  # equal cells share one string object
            columns[name] = distinct[codes]
        else:
            columns[name] = cells.to_numpy()
        table = table.drop_columns([c])  # its text freed as soon as it is coded
    out = pd.DataFrame({name: v if isinstance(v, pd.Series) else
                        pd.Series(v, dtype=None if isinstance(v, pd.Categorical) else object, copy=False)
                        for name, v in columns.items()})
    out["__line__"] = np.arange(2, n + 2)
    return out


def _dictionary_codes(cells):
    """``(codes, distinct strings)`` of an Arrow text column given in chunks, as
    ``cells.combine_chunks().dictionary_encode()`` gives them, without that copy of the text:
    Arrow encodes the chunks with one table of the values seen so far, so each chunk's
    dictionary is the start of the last one and their indices index it. Checked chunk by
    chunk (the dictionaries are small); any other layout is combined and encoded whole."""
    import numpy as np
    encoded = cells.dictionary_encode()
    chunks = encoded.chunks
    if not chunks:
        return np.zeros(0, dtype=np.int32), np.array([], dtype=object)
    last = chunks[-1].dictionary
    if all(len(x.dictionary) <= len(last) and x.dictionary.equals(last.slice(0, len(x.dictionary)))
           for x in chunks[:-1]):
        codes = np.concatenate([x.indices.to_numpy(zero_copy_only=False) for x in chunks])
        return codes, last.to_numpy(zero_copy_only=False)
    whole = cells.combine_chunks().dictionary_encode()
    return whole.indices.to_numpy(zero_copy_only=False), whole.dictionary.to_numpy(zero_copy_only=False)


def _strings_by_value(data: bytes, **options):
    """A delimited text's cells as Python strings (object columns), equal cells sharing one
    string object: a worker id repeated a million times is stored once, so a result file is
    held in a few bytes per cell. pandas' C parser reads the bytes."""
    import io
    import numpy as np
    import pandas as pd
    table = pd.read_csv(io.BytesIO(data), na_filter=False, engine="c", dtype=object, **options)
    for j in range(table.shape[1]):
        cells = table.iloc[:, j].to_numpy(dtype=object)
        if len(cells) > 20_000 and len(pd.unique(cells[:10_000])) > 5_000:
            continue  # mostly distinct (row ids): sharing would save little, the hashing costs
        codes, distinct = pd.factorize(cells, use_na_sentinel=False)
        if len(distinct) < len(codes) // 2:
            table.isetitem(j, pd.Series(np.asarray(distinct, dtype=object)[codes], dtype=object))
    return table


def _quote_hint(start: int, end: int) -> str:
    """When a record ran over several lines, a stray quote on its first line opened a field."""
    if end <= start:
        return ""
    return f" (a quote opened on this line runs on to line {end}: a stray \" in a value?)"


#: First characters that make a spreadsheet read a cell as a formula (OWASP CSV injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_RISKY = r"^'*[=+\-@\t\r]"


def spreadsheet_safe(table):
    """``table`` with every text cell a spreadsheet would run as a formula behind a leading
    apostrophe (the OWASP rule for CSV injection); numbers, negative ones included, are left
    alone. A text cell that is already apostrophes before such a prefix gets one more, so
    :func:`spreadsheet_value` gives back every value exactly.

    Each distinct value of a column is checked once (a categorical column's categories, an
    other column's values factorised), so a column of a million answers costs a few checks.

    Parameters
    ----------
    table : pandas.DataFrame

    Returns
    -------
    pandas.DataFrame
        A shallow copy with the risky cells (and column names) marked.
    """
    import numpy as np
    import pandas as pd
    out = table.copy(deep=False)  # columns are replaced, never written into
    for col in out.columns:
        values = out[col]
        if isinstance(values.dtype, pd.CategoricalDtype):
            cats = pd.Series(values.cat.categories, dtype=object)
            risky = _risky_values(cats)
            if risky.any():
                out[col] = values.cat.rename_categories(cats.where(~risky, "'" + cats.astype(str)).tolist())
            continue
        if not (pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values)):
            continue
        try:
            codes, uniques = pd.factorize(values.to_numpy(dtype=object))
        except TypeError:  # unhashable cells: each its own value
            codes, uniques = np.arange(len(values)), values.to_numpy(dtype=object)
            codes = np.where(values.notna().to_numpy(), codes, -1)
        risky_u = _risky_values(pd.Series(uniques, dtype=object)).to_numpy()
        if not risky_u.any():
            continue
        hit = codes >= 0
        risky = np.zeros(len(values), dtype=bool)
        risky[hit] = risky_u[codes[hit]]
        marked = values.to_numpy(dtype=object).copy()
        marked[risky] = np.array(["'" + str(v) for v in uniques], dtype=object)[codes[risky]]
        out[col] = pd.Series(marked, index=values.index, dtype=object)
    if isinstance(out.columns, pd.Index) and out.columns.dtype == object:
        out.columns = [("'" + c) if isinstance(c, str) and _risky_text(c) else c for c in out.columns]
    return out


def _risky_values(values):
    """Which of ``values`` (a Series of distinct values) a spreadsheet would run as a formula:
    text starting, after any apostrophes, with a formula prefix, and not a number."""
    import pandas as pd
    text = values.astype(str)
    risky = text.str.contains(_RISKY, regex=True) & values.notna()
    numeric = pd.to_numeric(text.where(risky), errors="coerce").notna()
    return risky & ~numeric


def _risky_text(value: str) -> bool:
    import re
    if not re.match(_RISKY, value):
        return False
    try:
        float(value)
        return False
    except ValueError:
        return True


def spreadsheet_value(table):
    """The values :func:`spreadsheet_safe` protected, as they were (one apostrophe dropped
    from each cell that is apostrophes before a formula prefix); for satcal's own tables read
    back.

    Parameters
    ----------
    table : pandas.DataFrame

    Returns
    -------
    pandas.DataFrame
    """
    import pandas as pd
    out = table
    for col in table.columns:
        values = table[col]
        if not (pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values)):
            continue
        text = values.astype(str)
        marked = text.str.contains(r"^'+[=+\-@\t\r]", regex=True) & values.notna()
        if marked.any():
            if out is table:
                out = table.copy()
            out[col] = values.where(~marked, text.str[1:])
    cols = [c[1:] if isinstance(c, str) and re.match(r"^'+[=+\-@\t\r]", c) else c for c in out.columns]
    if list(cols) != list(out.columns):
        out = out.copy() if out is table else out
        out.columns = cols
    return out


def to_csv_safe(table, **kwargs) -> str:
    """``table`` as CSV text that a spreadsheet opens without running any cell
    (:func:`spreadsheet_safe`); the index is left out unless ``index=True``.

    Parameters
    ----------
    table : pandas.DataFrame
    **kwargs
        Passed to :meth:`pandas.DataFrame.to_csv` (``index`` defaults to False,
        ``lineterminator`` to ``"\\n"``).

    Returns
    -------
    str
    """
    kwargs.setdefault("index", False)
    kwargs.setdefault("lineterminator", "\n")
    return spreadsheet_safe(table).to_csv(**kwargs)


#: Tables with fewer rows are written by pandas alone: the Arrow path pays off on large ones.
ARROW_MIN_ROWS = 20_000


def table_csv_bytes(table) -> bytes:
    """``spreadsheet_safe(table).to_csv(index=False, lineterminator="\\n")`` as UTF-8 bytes.

    Parameters
    ----------
    table : pandas.DataFrame

    Returns
    -------
    bytes
    """
    import io
    buffer = io.BytesIO()
    _write_table_csv(table, buffer)
    return buffer.getvalue()


def ordinary_pages(func):
    """Run ``func`` with numpy's large arrays on ordinary pages, numpy's own setting restored
    after (as ``NUMPY_MADVISE_HUGEPAGE=0`` would set it for the whole process). numpy asks the
    kernel for huge pages on every large array; where the kernel then compacts memory on each
    fault (transparent huge pages with ``defrag = madvise``, as here), an ingest, which makes
    and frees many arrays of a million rows, spent a third of its CPU in the kernel: 1.44-1.50
    s of system time against 0.82-0.99 s without (1M-row ingest, load 17). A numpy without the
    switch runs ``func`` as it is.

    Arrow's buffers are allocated by the C library's allocator meanwhile (its default pool
    restored after; each buffer is freed by the pool that made it): pyarrow's mimalloc asks
    for huge pages on a 1 GB arena and hands pages back and forth, and an ingest's system time
    was 1.29 s with it against 0.83 s (median of 4 runs in turn, 1M rows, load 18).

    Parameters
    ----------
    func : callable
        The function to wrap.

    Returns
    -------
    callable
        ``func``, run so.
    """
    import functools

    @functools.wraps(func)
    def run(*args, **kwargs):
        try:
            from numpy._core.multiarray import _set_madvise_hugepage
        except ImportError:
            try:
                from numpy.core.multiarray import _set_madvise_hugepage
            except ImportError:
                return func(*args, **kwargs)
        previous = _set_madvise_hugepage(False)
        pool = None
        try:
            pool = _system_arrow_pool()
            return func(*args, **kwargs)
        finally:
            _set_madvise_hugepage(previous)
            if pool is not None:
                import pyarrow
                pyarrow.set_memory_pool(pool)
    return run


def _system_arrow_pool():
    """Make the C library's allocator Arrow's default pool; the pool it replaces (None when
    pyarrow is absent or has no such pool)."""
    try:
        import pyarrow
        previous = pyarrow.default_memory_pool()
        pyarrow.set_memory_pool(pyarrow.system_memory_pool())
    except (ImportError, AttributeError, NotImplementedError):
        return None
    return previous


#: glibc's mallopt parameters (malloc.h) and the largest mmap threshold it accepts (64-bit).
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024


def keep_freed_memory() -> bool:
    """For the rest of the process, have the C library keep freed memory for reuse rather
    than hand it back to the kernel (glibc's ``mallopt``; nothing elsewhere). Returns whether
    it was set.

    Why: an ingest makes and frees dozens of arrays of a million rows; glibc maps each block
    over its (adaptive) threshold afresh and trims the heap's top as soon as it is free, so
    the kernel faults in and zeroes new pages for every array (``clear_page`` alone was 15% of
    a 1M-row ingest's CPU). With blocks up to 32 MB taken from the heap and the heap kept,
    freed pages are reused: 264,000 -> 208,000 page faults and 0.77 -> 0.60 s of system time
    (1M rows, 3 runs in turn, load 15). The cost is that the process keeps its peak heap until
    it exits, so only a command, never a library call, sets it (the setting cannot be undone:
    the adaptive threshold is off once set).

    Returns
    -------
    bool
    """
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
    except (ValueError, OSError, AttributeError):  # not glibc (macOS, Windows, musl)
        return False
    import ctypes
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)
        ok &= libc.mallopt(_M_TRIM_THRESHOLD, 2 ** 31 - 1)
        ok &= libc.mallopt(_M_TOP_PAD, 64 * 1024 * 1024)
    except (OSError, AttributeError):
        return False
    return bool(ok)


@ordinary_pages
def write_csv_safe(path: "str | os.PathLike", table) -> Path:
    """Write ``table`` atomically as the CSV file :func:`to_csv_safe` makes of it (no index,
    ``\\n`` line ends, spreadsheet-safe cells), byte for byte.

    A large table is written through pyarrow's CSV writer when pyarrow (the ``fast`` extra,
    14 or later) is importable, in blocks of :data:`ARROW_BLOCK_ROWS` rows: each cell is
    rendered as pandas renders it (text as it is, ``str`` of other objects, an integer's
    digits, numpy's text of each float and ``str`` of each bool, once per distinct value; a
    categorical text column once per category; missing cells empty), the cells a spreadsheet
    would run are marked as :func:`spreadsheet_safe` marks them, the cells holding a comma or
    a quote are quoted as the csv module quotes them, and each row's cells are joined by Arrow,
    so the file is the one pandas writes. A table with a line end in a cell, a cell Arrow
    refuses, a column of another dtype, a single column, or no pyarrow, is written by pandas.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    table : pandas.DataFrame
        The table.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    return _atomic_write(path, lambda fh: _write_table_csv(table, fh))


def _atomic_write(path: "str | os.PathLike", write) -> Path:
    """:func:`atomic_write_bytes` with the content written by ``write(binary file)``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; outputs follow the user's umask
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:  # a failed write() names no file: name the one being written
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


#: Rows rendered and written at a time by the Arrow path (its memory is that of one block).
ARROW_BLOCK_ROWS = 250_000


def _write_table_csv(table, fh) -> None:
    """Write :func:`table_csv_bytes` of ``table`` to the seekable binary file ``fh``."""
    start = fh.tell()
    if len(table) >= ARROW_MIN_ROWS and table.shape[1] >= 2 and _write_arrow_blocks(table, fh):
        return
    fh.seek(start)  # a block Arrow could not write: pandas writes the whole table
    fh.truncate()
    fh.write(to_csv_safe(table).encode("utf-8"))


def _write_arrow_blocks(table, fh) -> bool:
    """Write ``table`` through Arrow's CSV writer in blocks of rows; False as soon as a block
    cannot be (see :func:`_arrow_columns`) or Arrow refuses a cell (text that is not
    valid Unicode, say), what was written then to be discarded."""
    try:
        return _write_blocks(table, fh)
    except (ValueError, TypeError):  # pyarrow's ArrowInvalid and ArrowTypeError are these
        return False  # pandas writes the table (an OSError, a full disk, still stops the write)


def _write_blocks(table, fh) -> bool:
    """:func:`_write_arrow_blocks`, unguarded."""
    first = _arrow_columns(table.iloc[:ARROW_BLOCK_ROWS])
    if first is None:
        return False
    fh.write(to_csv_safe(table.iloc[:0]).encode("utf-8"))  # the header, as pandas writes it
    for at in range(0, len(table), ARROW_BLOCK_ROWS):
        columns = first if at == 0 else _arrow_columns(table.iloc[at:at + ARROW_BLOCK_ROWS])
        if columns is None:
            return False
        fh.write(_joined_rows(columns))
        first = None
    return True


def _joined_rows(columns) -> memoryview:
    """The CSV lines of a block: each row's cells (Arrow text arrays, already rendered, safe
    and quoted) joined by commas, each line ended by ``\n``, as one buffer."""
    import numpy as np
    import pyarrow.compute as pc
    # the line end appended to the last cell (the cell, "\n", and nothing), not to the joined
    # rows: one pass over a column instead of a second pass over every byte of the block
    last = pc.binary_join_element_wise(columns[-1], "", "\n")
    rows = pc.binary_join_element_wise(*columns[:-1], last, ",") if len(columns) > 1 else last
    offsets, data = _text_buffers(rows)
    if data is None:
        return memoryview(b"")
    return memoryview(data)[int(offsets[0]):int(offsets[-1])]


def _arrow_columns(table):
    """Each column of ``table`` as an Arrow text array holding the cells as pandas writes
    them (spreadsheet-safe, quoted as the csv module quotes them), or None when the table
    must be written by pandas (no pyarrow 14, a dtype other than text, categorical text, bool,
    integer and float, or a cell holding a line end)."""
    try:
        import pyarrow as pa
    except ImportError:
        return None
    if int(pa.__version__.split(".")[0]) < 14:
        return None
    import numpy as np
    import pandas as pd
    if len(set(map(str, table.columns))) != table.shape[1]:
        return None
    out = []
    for j in range(table.shape[1]):
        values = table.iloc[:, j]
        dtype = values.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            coded = _arrow_categorical(values, coded=True)
            if coded is None:
                return None
            out.append(coded)
            continue
        if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
            # Arrow's own text: no Python string per cell (a missing cell is written empty)
            column = pa.array(values.array)
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            column = _safe_text(column.cast(pa.string()).fill_null(""))
            if column is None:
                return None
            out.append(column)
            continue
        text_like = dtype == object or isinstance(dtype, pd.StringDtype)
        if not (text_like or (isinstance(dtype, np.dtype) and dtype.kind in "biuf")):
            return None
        if text_like:
            cells = values.to_numpy(dtype=object)
            if pd.api.types.infer_dtype(cells, skipna=True) not in ("string", "empty"):
                # other objects as the csv module writes them, str() of each, a missing one
                # empty; cell by cell, as equal objects of two types (1, 1.0 and True; 0.0
                # and -0.0) print differently. A number is never risky and a text equals no
                # other object, so the spreadsheet rule decides the same on these texts.
                text = np.array([str(v) for v in cells], dtype=object)
                text[pd.isna(cells)] = ""
                cells = text
            column = _arrow_text(pd.Series(cells, dtype=object, copy=False))
            if column is None:
                return None
            out.append(column)
            continue
        if dtype.kind in "iu":  # an integer's decimal digits: Arrow's text of it is str()'s
            out.append(pa.array(values.to_numpy()).cast(pa.string()))
            continue
        # a bool or float column by distinct value, rendered as pandas renders it (str() of
        # each bool, numpy's text of each float, NaN empty), then spread by codes
        raw = values.to_numpy()
        if dtype.kind == "f":
            # by bit pattern, so that -0.0 and 0.0 stay two values, as they are written
            raw = raw.astype(np.float64).view(np.int64)
        codes, uniques = pd.factorize(raw, use_na_sentinel=False)
        uniques = np.asarray(uniques)
        if dtype.kind == "f":
            uniques = uniques.view(np.float64).astype(dtype)
            text = uniques.astype(str).astype(object)
            text[np.isnan(uniques)] = ""
        else:
            text = np.array([str(v) for v in uniques.astype(object)], dtype=object)
        out.append((pa.array(list(text), type=pa.string()), codes))
    return _spread_coded(out, len(table))


#: Neighbouring coded columns are written as one when their distinct values multiply to at
#: most this share of a block's rows (the joined dictionary is then small beside the block).
_JOINED_DICTIONARY_SHARE = 4


def _spread_coded(parts, rows: int):
    """The Arrow text arrays of :func:`_arrow_columns` from its ``parts``: an Arrow array, or
    ``(dictionary, codes)`` for a column of few distinct values (its rendered, safe, quoted
    texts and each row's index into them). Neighbouring coded columns whose dictionaries
    multiply to at most ``rows / _JOINED_DICTIONARY_SHARE`` become one array of their cells
    already joined by commas: every combination's text joined once (a small array), each row's
    combination ``code_1 * n_2 + code_2 ...``, one take. The bytes of a row are the same, and
    the rows' join has fewer columns to copy (answers.csv's answer, is_trap, correct,
    submitted_at and source_file are 24 combinations at most)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    limit = max(rows // _JOINED_DICTIONARY_SHARE, 1)
    out, run = [], None  # run: (dictionary, codes) of the coded columns joined so far
    for part in parts + [None]:
        if isinstance(part, tuple) and run is not None and len(run[0]) * len(part[0]) <= limit:
            (left, left_codes), (right, right_codes) = run, part
            m = len(right)
            combos = np.arange(len(left) * m, dtype=np.int64)
            joined = pc.binary_join_element_wise(left.take(pa.array(combos // m)),
                                                 right.take(pa.array(combos % m)), ",")
            run = (joined, left_codes.astype(np.int64) * m + right_codes)
            continue
        if run is not None:
            dictionary, codes = run
            out.append(dictionary.take(pa.array(codes.astype(np.int32 if len(dictionary) < 2**31 else np.int64))))
            run = None
        if isinstance(part, tuple):
            run = part
        elif part is not None:
            out.append(part)
    return out


def _arrow_categorical(values, coded: bool = False):
    """A categorical column of text as Arrow text, each category rendered, made safe and
    quoted once and spread by the codes (a missing cell empty); None for other categories.
    With ``coded``, ``(dictionary, codes)`` instead, unspread: the rendered categories, an
    empty text last when a cell is missing, and each row's index into them."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    categories = pd.Series(np.asarray(values.cat.categories, dtype=object), dtype=object)
    if pd.api.types.infer_dtype(categories.to_numpy(), skipna=False) not in ("string", "empty"):
        return None
    dictionary = _arrow_text(categories)
    if dictionary is None:
        return None
    codes = values.cat.codes.to_numpy()
    if coded:
        missing = codes < 0
        if missing.any():
            codes = np.where(missing, len(dictionary), codes)
            dictionary = pa.concat_arrays([dictionary, pa.array([""], type=pa.string())])
        return dictionary, codes
    return dictionary.take(pa.array(codes, mask=codes < 0)).fill_null("")


def _text_holds(column, characters: bytes) -> bool:
    """Whether any cell of an Arrow text array holds one of ``characters`` (ASCII), searched
    in the array's bytes at once."""
    if not len(column):
        return False
    offsets, data = _text_buffers(column)
    text = data.to_pybytes()[offsets[0]:offsets[-1]] if data is not None else b""
    return any(bytes([c]) in text for c in characters)


def _text_buffers(column):
    """The offsets (one more than the cells) and the data buffer of an Arrow text array."""
    import numpy as np
    import pyarrow as pa
    if column.type != pa.string():
        column = column.cast(pa.string())
    _, offsets, data = column.buffers()
    return np.frombuffer(offsets, dtype=np.int32)[column.offset:column.offset + len(column) + 1], data


def _first_in(column, characters: str):
    """Which cells of an Arrow text array start with one of the ASCII ``characters``."""
    import numpy as np
    offsets, data = _text_buffers(column)
    out = np.zeros(len(column), dtype=bool)
    if data is None or not len(column):
        return out
    starts = offsets[:-1]
    filled = offsets[1:] > starts
    table = np.zeros(256, dtype=bool)
    table[[ord(c) for c in characters]] = True
    out[filled] = table[np.frombuffer(data, dtype=np.uint8)[starts[filled]]]
    return out


def _arrow_text(values):
    """A text column (every cell a string or missing) as an Arrow array with the risky cells
    marked (:func:`spreadsheet_safe`) and the cells the csv module quotes quoted; None when a
    cell is not a string or holds a line end."""
    import pandas as pd
    import pyarrow as pa
    cells = values.to_numpy(dtype=object)
    if pd.api.types.infer_dtype(cells, skipna=True) not in ("string", "empty"):
        return None  # bytes, numbers, booleans among the cells: rendered by distinct value
    try:
        column = pa.array(cells, type=pa.string(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        return None
    if column.null_count and not pd.isna(cells[~column.is_valid().to_numpy(zero_copy_only=False)]).all():
        return None  # something Arrow took for missing that pandas would write
    if column.null_count:
        # a missing cell is written empty, as pandas' na_rep; a float NaN among strings is one
        column = column.fill_null("")
    return _safe_text(column)


def _safe_text(column):
    """An Arrow text array (no missing cell) as pandas writes it: the cells a spreadsheet would
    run marked as :func:`spreadsheet_safe` marks them, then the cells holding a comma or a
    quote quoted as the csv module quotes them (in quotes, a quote doubled); None when a cell
    holds a line end (left to pandas). Only the cells that start with a formula prefix or an
    apostrophe, or hold a comma or a quote, are looked at in Python."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc
    if _text_holds(column, b"\r\n"):
        return None
    candidate = _first_in(column, "'=+-@\t\r")
    if candidate.any():
        rows = np.flatnonzero(candidate)
        found = pd.Series(column.take(pa.array(rows)).to_pylist(), dtype=object)
        distinct = pd.Series(pd.unique(found.to_numpy(dtype=object)), dtype=object)
        risky = set(distinct[_risky_values(distinct).to_numpy()])
        if risky:
            hit = np.array([v in risky for v in found], dtype=bool)
            mask = np.zeros(len(column), dtype=bool)
            mask[rows[hit]] = True
            column = pc.replace_with_mask(column, pa.array(mask),
                                          pa.array(["'" + v for v in found[hit]], type=pa.string()))
    if _text_holds(column, b',"'):
        quote = pc.or_(pc.match_substring(column, ","), pc.match_substring(column, '"'))
        quote = quote.to_numpy(zero_copy_only=False)
        found = column.filter(pa.array(quote)).to_pylist()
        column = pc.replace_with_mask(column, pa.array(quote),
                                      pa.array(['"' + v.replace('"', '""') + '"' for v in found], type=pa.string()))
    return column
