"""White-space separated TREC files (qrels, runs) read in columns straight from their bytes.

Why: a million-line qrels or run parsed through Python strings costs seconds (a ``str`` per
field, then hashing each). Here the fields are located by a few numpy passes over the bytes,
ids are packed into 64-bit words (8 bytes each, big-endian, so that comparing words compares
the ids byte by byte) and factorised on those words, and numbers are parsed column by column.
Python strings are made only for distinct ids, and only when someone asks for them.

Only plain ASCII files (no quotes, no comment lines, no control characters) whose every
non-blank line has the expected number of fields take this path: for anything else
:func:`read_columns` returns None, and the caller's general reader, which names the offending
line, runs instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["TokenIds", "read_columns", "parse_decimals"]

#: Multiplier of the word hash (a 64-bit odd constant from Fibonacci hashing); equal hashes
#: are always checked against the words themselves, so collisions cost time, never accuracy.
_MIX = np.uint64(0x9E3779B97F4A7C15)
#: _KEEP[k] keeps the first k bytes of a big-endian word (the rest belong to the next field).
_KEEP = np.array([0] + [((1 << (8 * k)) - 1) << (8 * (8 - k)) for k in range(1, 9)], dtype=np.uint64)
#: Ids longer than this (bytes) are not worth packing: the general reader takes the file.
_MAX_ID_BYTES = 256
#: _MASK[w, n]: the mask of word w of an n-byte field (_KEEP of the bytes left for that word),
#: one gather per word instead of a clip and a gather.
_MASK = _KEEP[np.clip(np.arange(_MAX_ID_BYTES + 1)[None, :] - 8 * np.arange(_MAX_ID_BYTES // 8)[:, None], 0, 8)]
#: Spare zero bytes after each chunk: a word read at any offset of any field stays inside.
_SPARE = _MAX_ID_BYTES + 8


@dataclass
class TokenIds:
    """A column of ids held as integer codes into its distinct values. Names (Python strings)
    are decoded on first use.

    Attributes
    ----------
    codes : numpy.ndarray
        int64, one per row: ``codes[i]`` is the index of row i's id among the distinct ids.
    words : numpy.ndarray
        (distinct ids, words per id) of 64-bit words: ``words[c]`` packs the bytes of
        distinct id c, zero padded.
    """

    codes: np.ndarray
    words: np.ndarray
    _names: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.words)

    @property
    def names(self) -> np.ndarray:
        """The distinct ids as an object array of ``str``, in code order."""
        if self._names is None:
            width = 8 * self.words.shape[1]
            raw = np.ascontiguousarray(self.words.astype(">u8")).view(f"S{width}").ravel()
            self._names = raw.astype(f"U{width}").astype(object)
        return self._names

    def values(self) -> np.ndarray:
        """Each row's id (object array of ``str``).

        Returns
        -------
        numpy.ndarray of object
        """
        return self.names[self.codes]

    def sorted(self) -> "TokenIds":
        """The same column with codes in the ids' order (byte order, which is ``str`` order
        for ASCII).

        Returns
        -------
        TokenIds
        """
        order = np.lexsort(self.words.T[::-1]) if len(self.words) else np.zeros(0, np.int64)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        names = None if self._names is None else self._names[order]
        return TokenIds(rank[self.codes], self.words[order], names)

    def locate(self, words: np.ndarray) -> np.ndarray:
        """For each of the distinct packed ids ``words``, its code here, or -1 if absent.

        Their hashes are sorted (usually the few ids a ranking keeps: they stay in the CPU
        cache) and every id here is looked up among them.

        Parameters
        ----------
        words : numpy.ndarray of uint64, shape (m, w)
            Distinct ids packed as in :attr:`words`.

        Returns
        -------
        numpy.ndarray of int, shape (m,)
        """
        width = max(self.words.shape[1], words.shape[1])
        mine, theirs = _pad(self.words, width), _pad(words, width)
        out = np.full(len(theirs), -1, dtype=np.int64)
        if not len(mine) or not len(theirs):
            return out
        theirs_hash = _hash(theirs)
        by_hash = np.argsort(theirs_hash)
        ordered = theirs_hash[by_hash]
        if (ordered[1:] == ordered[:-1]).any():  # two of them share a hash: compare the bytes
            return _locate_exact(mine, theirs)
        mine_hash = _hash(mine)
        at = np.minimum(np.searchsorted(ordered, mine_hash), len(ordered) - 1)
        hit = np.flatnonzero(ordered[at] == mine_hash)
        candidate = by_hash[at[hit]]
        same = (mine[hit] == theirs[candidate]).all(axis=1)  # equal hashes, equal bytes
        out[candidate[same]] = hit[same]
        return out

    @staticmethod
    def concat(parts: "list[TokenIds]") -> "TokenIds":
        """Rows of several columns, one after the other, under common codes.

        Parameters
        ----------
        parts : list of TokenIds

        Returns
        -------
        TokenIds
        """
        width = max(p.words.shape[1] for p in parts)
        words = np.concatenate([_pad(p.words, width) for p in parts])
        code_of_word, uniq = factorize_words(words)
        offsets = np.cumsum([0] + [len(p.words) for p in parts[:-1]])
        codes = np.concatenate([code_of_word[o + p.codes] for o, p in zip(offsets, parts)])
        return TokenIds(codes, uniq)


def _pad(words: np.ndarray, width: int) -> np.ndarray:
    if words.shape[1] == width:
        return words
    return np.concatenate([words, np.zeros((len(words), width - words.shape[1]), np.uint64)], axis=1)


def _hash(words: np.ndarray) -> np.ndarray:
    h = words[:, 0].copy()
    for w in range(1, words.shape[1]):
        h *= _MIX
        h ^= words[:, w]
    return h


def _void(words: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(words).view(np.dtype((np.void, 8 * words.shape[1]))).ravel()


def _locate_exact(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    _, inverse = np.unique(np.concatenate([_void(mine), _void(theirs)]), return_inverse=True)
    code = np.full(inverse.max() + 1 if inverse.size else 0, -1, dtype=np.int64)
    code[inverse[: len(mine)]] = np.arange(len(mine))
    return code[inverse[len(mine):]]


def factorize_words(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes and distinct rows of packed ids (n, W), exactly; codes follow no particular order.

    Parameters
    ----------
    words : numpy.ndarray
        Packed ids, (n, W) of uint64.

    Returns
    -------
    tuple of (numpy.ndarray, numpy.ndarray)
        The code of each row and the distinct rows.
    """
    ids = _factorize_columns([words[:, w] for w in range(words.shape[1])])
    return ids.codes, ids.words


def _factorize_columns(columns: list[np.ndarray]) -> TokenIds:
    """Packed ids given word by word, factorised by sorting their hashes.

    A sort, not a hash table: in a fresh process a million-entry hash table costs more in
    first-touched memory than the sort costs in time. When every hash is distinct (a column
    of distinct ids: documents, say), every row is its own code and the ids stay in row
    order: one plain sort of the hashes, no argsort, no gather in hash order. Otherwise rows
    with equal hashes share a code, and every row is compared with its code's first row; a
    true collision (different ids, one hash) falls back to a sort of the ids' bytes.
    """
    n = len(columns[0])
    hashes = columns[0].copy()
    for c in columns[1:]:
        hashes *= _MIX
        hashes ^= c
    new = np.empty(n, dtype=bool)
    new[:1] = True
    ordered = np.sort(hashes)  # several times faster than argsort (SIMD sorts of integers)
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    del ordered
    if new.all():  # equal ids have equal hashes: all distinct
        return TokenIds(np.arange(n, dtype=np.int64), np.stack(columns, axis=1))
    order = np.argsort(hashes)
    del hashes
    codes = np.empty(n, dtype=np.int64)
    codes[order] = np.cumsum(new) - 1
    words = np.stack([c[order[new]] for c in columns], axis=1)
    if len(columns) > 1:  # one word is its own hash: no collision possible
        for w, c in enumerate(columns):
            if not np.array_equal(words[:, w][codes], c):  # a gather from the few distinct ids
                words = np.stack(columns, axis=1)
                _, first, codes = np.unique(_void(words), return_index=True, return_inverse=True)
                return TokenIds(codes.astype(np.int64).ravel(), words[first])
    return TokenIds(codes, words)


def _pack(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, out: list | None = None) -> np.ndarray:
    """The fields buf[start:start+length] packed into (n, W) big-endian words, zero padded.

    ``buf`` ends with at least 8 spare bytes. Words are read as unaligned 8-byte items at any
    byte offset (a view, no copy), then the bytes past each field's end are masked off.
    ``out``: one 1-D array of n words per word position, written into instead (no (n, W)
    array is made, and it returns None); as many as W at least.
    """
    longest = int(lengths.max(initial=0))
    width = max(1, (longest + 7) // 8)
    at_every_byte = np.ndarray(shape=(buf.size - 7,), dtype=">u8", buffer=buf, strides=(1,))
    last = at_every_byte.size - 1
    # with enough spare bytes after the last field no word read needs clamping
    clamp = int(starts.max(initial=0)) + 8 * (width - 1) > last
    whole = None if out is not None else np.empty((len(starts), width), dtype=np.uint64)
    for w in range(width):
        word = at_every_byte[np.minimum(starts + 8 * w, last) if clamp else starts + 8 * w]
        mask = _MASK[w][lengths] if longest <= _MAX_ID_BYTES else _KEEP[np.clip(lengths - 8 * w, 0, 8)]
        np.bitwise_and(word, mask, out=out[w] if out is not None else whole[:, w])
    return whole


#: Bytes read per step: small enough that every temporary array stays in the CPU cache and in
#: memory already mapped (the first touch of fresh memory costs more than the work done on it).
_CHUNK = 1 << 20


def read_columns(raw: bytes, n_fields: int, ids: tuple[int, ...], numbers: tuple[int, ...] = (),
                 forbidden: bytes = b'"') -> dict | None:
    """The white-space separated fields of every non-blank line, in columns.

    Returns ``{column: TokenIds}`` for the ``ids`` columns and ``{column: float array}`` for
    the ``numbers`` columns, one row per non-blank line; None when the file does not fit the
    fast path: non-ASCII or control bytes, a ``\\r`` that does not end a line, a forbidden
    byte, a line with another number of fields, an overlong id, something that is not a
    number, or no line at all.

    The file is read in chunks of whole lines, each copied into a small zero-padded buffer
    (so that 8-byte reads past a field's end stay inside it); results go straight into
    arrays sized for the file's line count, so nothing large is allocated twice.

    Parameters
    ----------
    raw : bytes
        The file's content.
    n_fields : int
        Fields every line must have.
    ids : tuple of int
        The columns read as ids.
    numbers : tuple of int
        The columns read as decimal numbers.
    forbidden : bytes
        Bytes that send the file to the general reader (quotes, by default).

    Returns
    -------
    dict or None
    """
    # the exact line count (one fast pass): a looser bound from the file's size would reserve
    # several times the memory, which a system that does not overcommit refuses for big files
    capacity = raw.count(b"\n") + 1
    sinks = {c: _IdSink(capacity) for c in ids}
    values = {c: np.empty(capacity) for c in numbers}
    scratch = np.zeros(0, dtype=np.uint8)
    rows = begin = 0
    while begin < len(raw):
        end = raw.find(b"\n", min(begin + _CHUNK, len(raw)))
        end = len(raw) if end < 0 else end + 1
        size = end - begin
        if scratch.size < size + _SPARE:
            scratch = np.zeros(size + _SPARE, dtype=np.uint8)
        scratch[:size] = np.frombuffer(raw, dtype=np.uint8, count=size, offset=begin)
        scratch[size:size + _SPARE] = 0
        located = _split_chunk(scratch[:size], n_fields, forbidden)
        if located is None:
            return None
        starts, lengths = located
        m = len(starts)
        for c in numbers:
            parsed = parse_decimals(scratch, starts[:, c], lengths[:, c])
            if parsed is None:
                return None
            values[c][rows:rows + m] = parsed
        for c in ids:
            sinks[c].put(rows, scratch, starts[:, c], lengths[:, c])
        rows += m
        begin = end
    if rows == 0:
        return None
    out: dict = {c: sink.finish(rows) for c, sink in sinks.items()}
    out.update({c: v[:rows] for c, v in values.items()})
    return out


class _IdSink:
    """One id column, written chunk by chunk into one preallocated array per 64-bit word."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.columns: list[np.ndarray] = []
        self.changes = 0  # rows whose id differs from the row before (the first counts)

    def put(self, at: int, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> None:
        """Pack the fields buf[start:start+length] straight into rows at, at + 1, ...

        Parameters
        ----------
        at : int
            The first row to write.
        buf : numpy.ndarray
            The chunk's bytes.
        starts, lengths : numpy.ndarray
            Where each field starts in ``buf``, and its length.
        """
        m = len(starts)
        width = max(1, (int(lengths.max(initial=0)) + 7) // 8)
        while len(self.columns) < width:  # calloc'd: rows never written read as zero padding
            self.columns.append(np.zeros(self.capacity, dtype=np.uint64))
        _pack(buf, starts, lengths, out=[c[at:at + m] for c in self.columns[:width]])
        if self.changes > self.capacity or not m:
            return  # counted enough: finish() factorises every row
        # rows whose id differs from the row before (the first: from the last row put before)
        lo = at - 1 if at else 0
        differs = np.zeros(at + m - lo - 1, dtype=bool)
        for c in self.columns:  # every column: a shorter id reads as zero in the wider words
            differs |= c[lo + 1:at + m] != c[lo:at + m - 1]
        self.changes += int(np.count_nonzero(differs)) + (at == 0)
        if self.changes > (at + m) // 4:
            # more than a quarter of the rows so far: finish() will factorise every row (only
            # the choice between two exact ways depends on this count, never the result)
            self.changes = self.capacity + 1

    def finish(self, n: int) -> TokenIds:
        """The ids of the first ``n`` rows, factorised (runs of equal ids factorised once).

        Parameters
        ----------
        n : int
            Rows written.

        Returns
        -------
        TokenIds
        """
        columns = [c[:n] for c in self.columns]
        if self.changes < n // 4:  # runs of equal ids: factorise the first row of each run
            change = np.zeros(n, dtype=bool)
            change[0] = True
            for c in columns:
                change[1:] |= c[1:] != c[:-1]
            heads = np.flatnonzero(change)
            codes, uniq = factorize_words(np.stack([c[heads] for c in columns], axis=1))
            return TokenIds(np.repeat(codes, np.diff(np.append(heads, n))), uniq)
        return _factorize_columns(columns)


def _split_chunk(data: np.ndarray, n_fields: int, forbidden: bytes):
    """Start offsets and lengths (lines x fields) of the fields in ``data``, or None."""
    if (data > 126).any():
        return None
    controls = np.count_nonzero(data < 32)
    newlines = np.flatnonzero(data == 10)
    returns = np.flatnonzero(data == 13)
    if controls != newlines.size + returns.size + np.count_nonzero(data == 9):
        return None
    if returns.size and (returns[-1] + 1 >= data.size or not (data[returns + 1] == 10).all()):
        return None
    if any((data == b).any() for b in forbidden):
        return None
    token = data > 32
    edges = np.flatnonzero(token[1:] != token[:-1]) + 1
    if token[0]:
        edges = np.concatenate([[0], edges])
    if token[-1]:
        edges = np.concatenate([edges, [data.size]])
    starts, ends = edges[0::2], edges[1::2]
    if starts.size % n_fields:
        return None
    lines = newlines.size + (data[-1] != 10)
    if starts.size == lines * n_fields and lines:
        # no blank line: fields n*i .. n*i+n-1 must lie between newlines i-1 and i (line i)
        first, last = starts[0::n_fields], ends[n_fields - 1::n_fields]
        inside = (first[1:] > newlines[:lines - 1]).all() and \
            (last[:newlines.size] <= newlines[:lines]).all()
    else:  # blank lines: count the fields of every line
        per_line = np.diff(np.searchsorted(starts, newlines), prepend=0, append=starts.size)
        inside = ((per_line == 0) | (per_line == n_fields)).all()
    if not inside:
        return None
    lengths = (ends - starts).reshape(-1, n_fields)
    if lengths.size and lengths.max() > _MAX_ID_BYTES:
        return None
    return starts.reshape(-1, n_fields), lengths


def parse_decimals(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """Decimal numbers (``-12.5``, ``3``, ``.25``) parsed in arrays, as ``float()`` would.

    A number of at most 15 digits is exact as an integer mantissa m, and m / 10**f (f <= 15)
    is then one correctly rounded division, so the result equals ``float(text)`` bit for bit.
    Other forms (exponents, ``inf``, longer numbers) go through ``float()``; None if one is
    not a number at all.

    Parameters
    ----------
    buf : numpy.ndarray of uint8
        The bytes holding the numbers.
    starts, lengths : numpy.ndarray of int
        Where each number starts in ``buf`` and its length in bytes.

    Returns
    -------
    numpy.ndarray of float or None
    """
    n = len(starts)
    if n == 0:
        return np.zeros(0)
    text = _pack(buf, starts, lengths).astype(">u8").view(np.uint8).reshape(n, -1)
    mantissa = np.zeros(n, dtype=np.int64)
    digits = np.zeros(n, dtype=np.int64)
    fraction = np.zeros(n, dtype=np.int64)
    dots = np.zeros(n, dtype=np.int64)
    negative = text[:, 0] == 45
    bad = np.zeros(n, dtype=bool)
    for c in range(int(lengths.max())):
        b = text[:, c]
        digit = b - np.uint8(48)
        is_digit = digit < 10
        is_dot = b == 46
        ok = is_digit | is_dot | (b == 0)
        if c == 0:
            ok |= negative | (b == 43)
        bad |= ~ok
        mantissa = np.where(is_digit, mantissa * 10 + digit, mantissa)
        digits += is_digit
        dots += is_dot
        fraction += is_digit & (dots > 0)
    simple = ~bad & (dots <= 1) & (digits >= 1) & (digits <= 15)
    value = mantissa / np.power(10.0, np.where(simple, fraction, 0))
    value = np.where(negative, -value, value)
    rest = np.flatnonzero(~simple)
    if rest.size:
        words = _pack(buf, starts[rest], lengths[rest])
        texts = TokenIds(np.arange(rest.size), words).names
        try:
            value[rest] = [float(t) for t in texts]
        except ValueError:
            return None
    return value
