"""User-facing errors.

A :class:`SatcalError` is a user's mistake (bad file, bad option): the CLI prints its one-line
message and exits non-zero, with no traceback. Anything else is a bug and shows one.
"""
from __future__ import annotations


class SatcalError(ValueError):
    """A problem with the user's input, explained in one line."""


class InputFileError(SatcalError):
    """A malformed input file; the message names the file, the line or row, and the problem.

    Parameters
    ----------
    path : path-like
        The file.
    problem : str
        What is wrong and what was expected.
    line : int, optional
        The line or row.
    column : str, optional
        The column.
    """

    def __init__(self, path, problem: str, line: int | None = None, column: str | None = None):
        where = str(path)
        if line is not None:
            where += f":{line}"
        if column is not None:
            where += f": column {column!r}"
        super().__init__(f"{where}: {problem}")
        self.path, self.line, self.column, self.problem = path, line, column, problem


class SatcalWarning(UserWarning):
    """Something the user should know that does not stop the command (the CLI prints it as one
    line, ``satcal: warning: ...``)."""
