"""One protocol for every result object, in statsmodels' style.

Every result type of satcal (a calibration, its bootstrap, a generation, an ingest, a power
analysis, an evaluation, a reliability report, a ranking verdict) answers to the same five
calls:

- ``tables()``: its data as tidy tables, ``{name: pandas.DataFrame}``;
- ``summary()``: a text summary for a terminal (nothing printed);
- ``_repr_html_()``: the view a notebook shows;
- ``save(out_dir)``: every table as CSV through :func:`write_table` (one writer, one float
  format, spreadsheet-safe) and every figure as PNG and PDF; returns ``{name: path}``;
- ``plot(ax=None)``: where the result has a figure, drawn on the caller's axes or a new figure.

:class:`ResultTables` implements ``summary``, ``_repr_html_`` and ``save`` from ``tables()``
(and ``figures()``), so a result type declares its tables once.
"""
from __future__ import annotations

import abc
import html
from pathlib import Path

__all__ = ["FLOAT_FORMAT", "ResultTables", "write_table", "read_table"]

#: The one float format of every table satcal writes: ten significant digits, enough to read
#: back any estimate to far below its standard error, short enough to read in a spreadsheet.
FLOAT_FORMAT = "%.10g"


def write_table(table, path) -> Path:
    """Write ``table`` as CSV, atomically, with no cell a spreadsheet would run as a formula.

    Parameters
    ----------
    table : pandas.DataFrame
        The table; its index is not written.
    path : str or os.PathLike
        The CSV file to (re)place.

    Returns
    -------
    pathlib.Path
        The path written.
    """
    from .fileio import atomic_write_text, spreadsheet_safe
    text = spreadsheet_safe(table).to_csv(index=False, lineterminator="\n", float_format=FLOAT_FORMAT)
    return atomic_write_text(path, text)


def read_table(path):
    """Read a table written by :func:`write_table` back, every protected cell as it was.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    pandas.DataFrame
    """
    import pandas as pd

    from .fileio import spreadsheet_value
    return spreadsheet_value(pd.read_csv(path))


class ResultTables(abc.ABC):
    """The shared half of the results protocol, built on a subclass's ``tables()``.

    A subclass defines ``tables()`` and, where it has figures, ``figures()`` (``{name:
    matplotlib Figure}``) and ``plot(ax=None)``; it may override ``summary()`` with a better
    text and ``_file_stem()`` to name its files.
    """

    @abc.abstractmethod
    def tables(self) -> dict:
        """The result's data as tidy tables: the one method each result type writes itself
        (a type without it cannot be made).

        Returns
        -------
        dict of str to pandas.DataFrame
        """

    def figures(self) -> dict:
        """The result's figures (none by default).

        Returns
        -------
        dict of str to matplotlib.figure.Figure
        """
        return {}

    def _file_stem(self, name: str) -> str:
        """The file name (without extension) of table or figure ``name`` in :meth:`save`."""
        return name

    def table_file(self, name: str) -> str:
        """The CSV file name :meth:`save` gives table ``name``.

        Parameters
        ----------
        name : str
            A key of :meth:`tables`.

        Returns
        -------
        str
        """
        return f"{self._file_stem(name)}.csv"

    def _tables(self) -> dict:
        return {name: t for name, t in self.tables().items() if t is not None}

    def summary(self) -> str:
        """A text summary: the result's type and the size of each of its tables.

        Returns
        -------
        str
        """
        lines = [f"{type(self).__name__}"]
        lines += [f"  {name:<22} {len(t)} rows x {t.shape[1]} columns" for name, t in self._tables().items()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(self.summary())}</pre>"

    def __repr__(self) -> str:
        # the summary's first line: a dataclass's own repr prints every table's cells, pages of
        # them in a terminal (the subclasses are dataclasses with repr=False for this)
        first = self.summary().splitlines()[0]
        return first if first.startswith("<") else f"<{type(self).__name__}: {first.rstrip(':')}>"

    def save(self, out_dir) -> dict:
        """Write every table (CSV, :func:`write_table`) and figure (PNG and PDF) into ``out_dir``.

        Parameters
        ----------
        out_dir : str or os.PathLike
            Created if missing.

        Returns
        -------
        dict of str to str
            Path of each table's CSV and each figure's PNG, by name; a figure's path replaces
            that of a table of the same name.
        """
        from .fileio import save_figure
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = {name: str(write_table(t, out / self.table_file(name))) for name, t in self._tables().items()}
        for name, fig in self.figures().items():
            written[name] = str(save_figure(fig, out / self._file_stem(name))[0])
        return written
