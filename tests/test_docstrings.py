"""Every public function, method and constructor in src/satcal documents its arguments: the
numpydoc ``Parameters`` section of its docstring (with ``Other Parameters``) names each
argument of its signature, and names nothing the signature lacks. Read from the source with
``ast`` (nothing is imported), so a module that fails to import is still checked.

Public means a name without a leading underscore, at module level or in a public class at
module level, in any module (the private modules' public names are the package's internal
API, called across modules). Arguments with a leading underscore are private hooks and need
no entry; ``self``/``cls`` need none; ``*args``/``**kwargs`` need one, written ``*args``
(or ``args``) as numpydoc does. A constructor's arguments go in the class docstring (or
``__init__``'s). A function without arguments needs no section.
"""
import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "satcal"

_CLICK = ("a click command: its docstring is the --help text, and each argument is a click "
          "option documented by its own help=")
_STARLETTE = ("a Starlette endpoint or handler mounted by StudyRoutes.routes(): Starlette fixes "
              "its signature (the Request, and the exception for an error handler)")
#: Functions whose signature a framework fixes or whose docstring serves another reader:
#: "module:qualified name" -> why it has no Parameters section.
EXEMPT = {
    **{f"satcal.cli:{name}": _CLICK for name in (
        "init", "generate", "export", "preview", "simulate", "ingest", "analyze", "serve",
        "power", "evaluate", "reliability", "demo")},
    "satcal.cli:SatcalGroup.invoke": "overrides click.Group.invoke; click passes the Context",
    **{f"satcal.serve.routes:StudyRoutes.{name}": _STARLETTE for name in (
        "entry", "switch", "consent", "page", "done", "status", "not_found", "server_error")},
    "satcal.serve.priority:PageOrder.lifespan": "Starlette's lifespan hook; Starlette passes the app",
}

_SECTION = re.compile(r"^(Other )?Parameters$")
_UNDERLINE = re.compile(r"^-{3,}$")
_NAME = re.compile(r"^\*{0,2}[A-Za-z_][A-Za-z0-9_]*$")


def documented(doc: str | None) -> list[str] | None:
    """Names the Parameters (and Other Parameters) sections of a cleaned docstring list, in
    order; None when it has no such section. An entry is a line at the section's indentation
    (``name : type``, ``name``, ``a, b : float``, ``*args``); what is indented under it is its
    description. A line at that indentation that is no name (``As :func:`f```) is kept as it
    stands, so it shows up as a name the signature lacks."""
    if doc is None:
        return None
    lines = doc.expandtabs().splitlines()
    found, names, i = False, [], 0
    while i < len(lines):
        if _SECTION.match(lines[i].strip()) and i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1].strip()):
            found = True
            base = len(lines[i]) - len(lines[i].lstrip())
            i += 2
            while i < len(lines):
                line = lines[i]
                nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
                indent = len(line) - len(line.lstrip())
                if line.strip() and (indent < base or (indent == base and _UNDERLINE.match(nxt))):
                    break  # the next section
                if line.strip() and indent == base:
                    head = line.strip().split(" : ")[0].strip()
                    parts = [p.strip() for p in head.split(",")]
                    names.extend(parts if all(_NAME.match(p) for p in parts) else [line.strip()])
                i += 1
            continue
        i += 1
    return names if found else None


def _decorators(node) -> set[str]:
    return {ast.unparse(d).split("(")[0].rsplit(".", 1)[-1] for d in node.decorator_list}


def arguments(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[str]:
    """The arguments a docstring must name: all but self/cls and private ``_name`` hooks;
    ``*args`` and ``**kwargs`` keep their stars."""
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args]
    if method and "staticmethod" not in _decorators(node) and names:
        names = names[1:]
    names += [x.arg for x in a.kwonlyargs]
    names = [n for n in names if not n.startswith("_")]
    if a.vararg:
        names.append("*" + a.vararg.arg)
    if a.kwarg:
        names.append("**" + a.kwarg.arg)
    return names


def _compare(where: str, args: list[str], doc: str | None) -> list[str]:
    names = documented(doc)
    if names is None:
        return [f"{where}: no Parameters section for {', '.join(args)}"] if args else []
    bare = [n.lstrip("*") for n in names]
    missing = [x for x in args if x.lstrip("*") not in bare]
    extra = [n for n in names if n.lstrip("*") not in {x.lstrip("*") for x in args}]
    out = []
    if missing:
        out.append(f"{where}: Parameters leaves out {', '.join(missing)}")
    if extra:
        out.append(f"{where}: Parameters names {', '.join(extra)}, not in the signature")
    return out


def problems(source: str, module: str) -> dict[str, list[str]]:
    """``{"module:qualified name": [problem, ...]}`` for every public function, method and
    constructor of ``source`` whose docstring does not document its arguments exactly."""
    out: dict[str, list[str]] = {}

    def note(key, found):
        if found:
            out[key] = found

    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            if "overload" not in _decorators(node):
                key = f"{module}:{node.name}"
                note(key, _compare(key, arguments(node, method=False), ast.get_docstring(node)))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for m in node.body:
                if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                decos = _decorators(m)
                if decos & {"overload", "setter", "deleter"}:
                    continue
                if m.name == "__init__":
                    key = f"{module}:{node.name}"
                    args = arguments(m, method=True)
                    doc = ast.get_docstring(node)
                    if documented(doc) is None:
                        doc = ast.get_docstring(m)
                    note(key, _compare(key, args, doc))
                elif not m.name.startswith("_"):
                    key = f"{module}:{node.name}.{m.name}"
                    note(key, _compare(key, arguments(m, method="staticmethod" not in decos), ast.get_docstring(m)))
    return out


def package_problems(root: Path = SRC) -> dict[str, list[str]]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.update(problems(path.read_text(encoding="utf-8"), ".".join(parts)))
    return out


def test_every_public_function_documents_its_arguments():
    found = package_problems()
    assert [line for key, lines in sorted(found.items()) if key not in EXEMPT for line in lines] == []


def test_every_exemption_is_still_needed():
    """An exempt function that was removed, renamed or documented leaves the list."""
    found = package_problems()
    assert sorted(set(EXEMPT) - set(found)) == []


PLANTED = '''
def good(a, b=1, *rest, c, _hook=None, **extra):
    """Fine.

    Parameters
    ----------
    a, b : int
        Two.
    *rest
        More.

    Other Parameters
    ----------------
    c : str
        Keyword only.
    **extra
        Passed on.

    Returns
    -------
    int
    """

def left_out(x, y):
    """One of two.

    Parameters
    ----------
    x : float
        Documented.

    Returns
    -------
    y : float
        A return value named like the argument does not count.
    """

def stale(x):
    """Renamed argument.

    Parameters
    ----------
    old : float
        Gone from the signature.
    """

def delegated(levels, forms):
    """Points elsewhere.

    Parameters
    ----------
    As :func:`other`, with ``forms`` resolved.
    """

def none_at_all(q):
    """No section."""

def no_arguments():
    """Needs no section."""

def _private(z):
    pass

class Thing:
    """A thing.

    Parameters
    ----------
    size : int
        Its size.
    """

    def __init__(self, size, colour="red"):
        pass

    @property
    def area(self):
        """Its area."""

    @staticmethod
    def make(n):
        """Made.

        Parameters
        ----------
        n : int
            How many.
        """

    @classmethod
    def load(cls, path, *, strict=False):
        """Loaded.

        Parameters
        ----------
        path : str
            Where from.
        """

    def _helper(self, w):
        pass
'''


def test_the_check_flags_planted_docstrings():
    """Hand-listed: what each planted definition gets wrong, and nothing about the good ones."""
    assert problems(PLANTED, "m") == {
        "m:left_out": ["m:left_out: Parameters leaves out y"],
        "m:stale": ["m:stale: Parameters leaves out x", "m:stale: Parameters names old, not in the signature"],
        "m:delegated": ["m:delegated: Parameters leaves out levels, forms",
                        "m:delegated: Parameters names As :func:`other`, with ``forms`` resolved., not in the signature"],
        "m:none_at_all": ["m:none_at_all: no Parameters section for q"],
        "m:Thing": ["m:Thing: Parameters leaves out colour"],
        "m:Thing.load": ["m:Thing.load: Parameters leaves out strict"],
    }


@pytest.mark.parametrize("doc, names", [
    ("S.\n\nParameters\n----------\na : int\n    A.\nb\n    B.\n\nReturns\n-------\nc : int\n    C.", ["a", "b"]),
    ("S.\n\nParameters\n----------\nx, y : float\n    Both.", ["x", "y"]),
    ("S.\n\nParameters\n----------\n*args\n    Rest.\n**kw : dict\n    Options.", ["*args", "**kw"]),
    ("S.", None),
    ("S.\n\nParameters\n----------\n", []),
])
def test_documented_reads_numpydoc_entries(doc, names):
    assert documented(doc) == names


def test_the_check_finds_a_planted_gap_in_the_package(tmp_path):
    """A copy of a real module with one argument added to a public function is caught."""
    source = (SRC / "measures" / "bins.py").read_text(encoding="utf-8")
    assert problems(source, "satcal.measures.bins") == {}
    planted = source.replace("def bin_index(", "def bin_index(planted_argument, ", 1)
    assert planted != source
    assert problems(planted, "satcal.measures.bins") == {
        "satcal.measures.bins:bin_index": ["satcal.measures.bins:bin_index: Parameters leaves out planted_argument"]}
