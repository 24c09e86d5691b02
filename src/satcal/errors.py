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


def is_whole(value) -> bool:
    """Whether ``value`` is an integer, Python's or NumPy's: not a bool (``True`` is no count)
    nor a float, even a whole one (``2.0``, ``2.5``: a count or a seed given as a float is a
    mistake better said than truncated).

    Parameters
    ----------
    value : object

    Returns
    -------
    bool

    Examples
    --------
    >>> is_whole(3), is_whole(2.0), is_whole(True)
    (True, False, False)
    """
    import numbers
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_seed(seed, name: str = "seed") -> int:
    """The one check of every public function's seed: a whole number >= 0, what NumPy's
    generators take (and what the results record), else a one-line :class:`SatcalError`
    before any work (NumPy's own is a TypeError from inside ``SeedSequence``).

    Parameters
    ----------
    seed : object
        What the caller passed.
    name : str, default "seed"
        The parameter's name, for the message.

    Returns
    -------
    int

    Raises
    ------
    SatcalError
        ``seed`` is not a whole number >= 0.

    Examples
    --------
    >>> check_seed(2015)
    2015
    """
    if not is_whole(seed) or seed < 0:
        raise SatcalError(f"{name} must be a whole number >= 0 (e.g. {name}=2015), got {seed!r}")
    return int(seed)


class SatcalWarning(UserWarning):
    """Something the user should know that does not stop the command (the CLI prints it as one
    line, ``satcal: warning: ...``)."""


#: Errors of the machine, not of satcal or the user's files: one line naming the path, exit 1.
_ENVIRONMENT_ERRORS = {"ENOSPC": "no space left on the device; free some and run the command again "
                                 "(nothing was changed)",
                       "EDQUOT": "disk quota exceeded; free some space and run the command again "
                                 "(nothing was changed)",
                       "EACCES": "permission denied",
                       "EPERM": "operation not permitted",
                       "EROFS": "read-only file system"}


def environment_error(exc: OSError) -> str | None:
    """The one line for a full disk, a denied permission, a read-only file system or any other
    system error about a named path (named by the path the failing call was given), or None
    for an error that names no path.

    Parameters
    ----------
    exc : OSError
        The error.

    Returns
    -------
    str or None
    """
    import errno
    import re
    name = errno.errorcode.get(exc.errno or 0, "")
    if name not in _ENVIRONMENT_ERRORS:
        # any other error the system gives about a named file (a directory where a file was
        # expected, a path too long...) is one line too; one about no file stays a traceback
        if exc.filename is None or not exc.strerror:
            return None
        where = re.sub(r"/\.satcal-stage-[^/]+/new/", "/", str(exc.filename))
        words = exc.strerror
        if len(words) > 1 and words[1].islower():  # "Is a directory" -> "is a directory"; "I/O error" stays
            words = words[0].lower() + words[1:]
        return f"{where}: {words}"
    # a copy that fails for want of space names its source first and its target second
    target = exc.filename2 if name in ("ENOSPC", "EDQUOT") and exc.filename2 is not None else exc.filename
    where = str(target) if target is not None else "a file"
    # a file written aside into an output set is named where it was to go
    where = re.sub(r"/\.satcal-stage-[^/]+/new/", "/", where)
    return f"{where}: {_ENVIRONMENT_ERRORS[name]}"
