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

Every public dataclass (``@dataclass`` or ``@dataclasses.dataclass``, at module level or in a
public class) documents each of its fields in an ``Attributes`` (or ``Parameters``) section of
its class docstring, and names nothing that is neither a field, a property nor a class
attribute. ``ClassVar`` and private ``_name`` fields need no entry. Inherited fields are the
base class's to document.

The sections of study.toml (:mod:`satcal.settings`) are the one exception, and not by
exemption: each field is declared ``setting(..., help="...")``, and that declaration is already
read by the template, the validation, the CLI and docs/settings.md. A hand-written Attributes
section would be a fifth copy of some 60 help lines, free to drift from the others; instead the
decorator ``_help_as_attributes`` writes the numpydoc ``Attributes`` section (type, help, what the
key takes, default) into ``__doc__`` when the class is made, so that ``help()`` and Sphinx show
it. A reader of the source sees each field's help on the field itself. In a class carrying that
decorator a field with a non-empty declared help counts as documented here (read from ``ast``);
:func:`test_settings_sections_render_their_attributes` imports the module and checks the
rendered section, field by field.
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


def documented(doc: str | None, section: re.Pattern = _SECTION) -> list[str] | None:
    """Names the Parameters (and Other Parameters) sections of a cleaned docstring list, in
    order; None when it has no such section (``section`` matches other titles, e.g. Attributes).
    An entry is a line at the section's indentation (``name : type``, ``name``, ``a, b : float``,
    ``*args``); what is indented under it is its description. A line at that indentation that is no name (``As :func:`f```) is kept as it
    stands, so it shows up as a name the signature lacks."""
    if doc is None:
        return None
    lines = doc.expandtabs().splitlines()
    found, names, i = False, [], 0
    while i < len(lines):
        if section.match(lines[i].strip()) and i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1].strip()):
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


# ------------------------------------------------------------------------------------------
# Dataclass fields
# ------------------------------------------------------------------------------------------
_FIELD_SECTION = re.compile(r"^(Attributes|(Other )?Parameters)$")
#: The decorator of satcal.settings that renders a section's Attributes from its fields'
#: declared help when the class is made.
FROM_HELP = "_help_as_attributes"


def _declared_help(value: ast.expr | None) -> bool:
    """The field is declared ``setting(...)`` with a non-empty help (keyword, or the fifth
    positional argument as :func:`satcal.settings.setting` orders them)."""
    if not (isinstance(value, ast.Call) and ast.unparse(value.func).rsplit(".", 1)[-1] == "setting"):
        return False
    helps = [k.value for k in value.keywords if k.arg == "help"] + value.args[4:5]
    return any(isinstance(h, ast.Constant) and isinstance(h.value, str) and h.value.strip() for h in helps)


def dataclass_fields(node: ast.ClassDef) -> list[tuple[str, ast.expr | None]]:
    """The fields a dataclass's body declares, with their values: annotated names, less
    ``ClassVar`` ones and private ``_name`` ones (``_: KW_ONLY`` among them)."""
    return [(s.target.id, s.value) for s in node.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            and not s.target.id.startswith("_")
            and "ClassVar" not in ast.unparse(s.annotation)]


def _class_names(node: ast.ClassDef) -> set[str]:
    """What an Attributes section may name besides the fields: properties and class attributes."""
    out = set()
    for s in node.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                _decorators(s) & {"property", "cached_property"}:
            out.add(s.name)
        elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
            out.add(s.target.id)
        elif isinstance(s, ast.Assign):
            out.update(t.id for t in s.targets if isinstance(t, ast.Name))
    return out


def _dataclass_check(key: str, node: ast.ClassDef) -> list[str]:
    fields = dataclass_fields(node)
    from_help = FROM_HELP in _decorators(node)
    need = [name for name, value in fields if not (from_help and _declared_help(value))]
    names = documented(ast.get_docstring(node), _FIELD_SECTION)
    if names is None:
        return [f"{key}: no Attributes section for {', '.join(need)}"] if need else []
    missing = [n for n in need if n not in names]
    extra = [n for n in names if n not in _class_names(node)]
    out = []
    if missing:
        out.append(f"{key}: Attributes leaves out {', '.join(missing)}")
    if extra:
        out.append(f"{key}: Attributes names {', '.join(extra)}, not a field")
    return out


def dataclass_problems(source: str, module: str) -> dict[str, list[str]]:
    """``{"module:qualified name": [problem, ...]}`` for every public dataclass of ``source``
    whose docstring does not document its fields exactly."""
    out: dict[str, list[str]] = {}

    def visit(body, prefix):
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                key = f"{module}:{prefix}{node.name}"
                if "dataclass" in _decorators(node):
                    found = _dataclass_check(key, node)
                    if found:
                        out[key] = found
                visit(node.body, f"{prefix}{node.name}.")

    visit(ast.parse(source).body, "")
    return out


def _modules(root: Path = SRC):
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path.read_text(encoding="utf-8")


def test_every_public_dataclass_documents_its_fields():
    found = {}
    for module, source in _modules():
        found.update(dataclass_problems(source, module))
    assert [line for key, lines in sorted(found.items()) for line in lines] == []


def test_settings_sections_render_their_attributes():
    """The classes whose fields may be documented by their declared help are the sections of
    study.toml, each decorated; imported, each shows an Attributes section naming its fields
    in order, each with its help, and one entry as worked out by hand from its declaration."""
    import inspect
    from dataclasses import fields

    from satcal import settings
    marked = {(module, node.name) for module, source in _modules() for node in ast.walk(ast.parse(source))
              if isinstance(node, ast.ClassDef) and FROM_HELP in _decorators(node)}
    assert marked == {("satcal.settings", k.__name__) for k in settings.SECTIONS.values()}
    for klass in settings.SECTIONS.values():
        doc = inspect.getdoc(klass)
        assert documented(doc, _FIELD_SECTION) == [f.name for f in fields(klass)]
        flat = " ".join(doc.split())
        for f in fields(klass):
            assert f"{f.name} : {f.type} {f.metadata['help']} Takes " in flat
    # k = setting(5, int, _positive, "a positive integer", "Documents per list.", ...)
    assert "\nk : int\n    Documents per list. Takes a positive integer; default 5.\n" in \
        inspect.getdoc(settings.StudySection) + "\n"
    # abandoned: default 0.0, new 0.02; gains: a factory described by its docstring, not called
    assert "default 0.0 (0.02 in a new study.toml)." in " ".join(inspect.getdoc(settings.SimulationSection).split())
    assert "default the gains of ``satcal.measures.STUDY_GAINS``." in \
        " ".join(inspect.getdoc(settings.FormulationsSection).split())


PLANTED_DATACLASSES = '''
import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class Good:
    """Fine.

    Attributes
    ----------
    a, b : int
        Two fields.
    c : list
        A field with a factory.
    area : float
        A property may be listed.
    UNIT : str
        So may a class attribute.
    """

    a: int
    b: int = 1
    c: list = field(default_factory=list)
    _cache: dict = field(default_factory=dict)
    UNIT: ClassVar[str] = "s"
    KINDS: ClassVar[tuple] = ()

    @property
    def area(self):
        return self.a * self.b


@dataclasses.dataclass
class ByParameters:
    """Fields as constructor parameters.

    Parameters
    ----------
    x : float
        Fine too.
    """

    x: float


@dataclass
class Missing:
    """One of two.

    Attributes
    ----------
    x : float
        Documented.

    Parameters
    ----------
    y
        Counted: a constructor parameter is a field.
    """

    x: float
    y: float
    z: float = 0.0


@dataclass
class Stale:
    """A renamed field.

    Attributes
    ----------
    old : int
        Gone.
    method : callable
        A method is no attribute.
    """

    new: int

    def method(self):
        pass


@dataclass
class Bare:
    """No section."""

    p: int
    q: str = ""


@dataclass
class Empty:
    """No fields, no section."""


class NotADataclass:
    """Plain class: its annotations are no fields to document."""

    r: int


@dataclass
class _Private:
    s: int


class Outer:
    """Holds one."""

    @dataclass
    class Inner:
        """Nested.

        Attributes
        ----------
        t : int
            Documented.
        """

        t: int
        u: int


@_help_as_attributes
@dataclass(frozen=True)
class Section:
    """Fields declared with their help."""

    by_keyword: int = setting(5, int, help="Has help.")
    by_position: int = setting(5, int, None, "an integer", "Has help too.")
    empty_help: int = setting(5, int, help="")
    no_help: str = setting("x")
    plain: int = 3


@dataclass(frozen=True)
class Undecorated:
    """Help without the decorator renders nothing."""

    w: int = setting(5, int, help="Not shown by numpydoc.")
'''


def test_the_dataclass_check_flags_planted_docstrings():
    """Hand-listed: what each planted dataclass gets wrong, and nothing about the good ones."""
    assert dataclass_problems(PLANTED_DATACLASSES, "m") == {
        "m:Missing": ["m:Missing: Attributes leaves out z"],
        "m:Stale": ["m:Stale: Attributes leaves out new", "m:Stale: Attributes names old, method, not a field"],
        "m:Bare": ["m:Bare: no Attributes section for p, q"],
        "m:Outer.Inner": ["m:Outer.Inner: Attributes leaves out u"],
        "m:Section": ["m:Section: no Attributes section for empty_help, no_help, plain"],
        "m:Undecorated": ["m:Undecorated: no Attributes section for w"],
    }


def test_the_dataclass_check_finds_a_planted_field_in_the_package():
    """A copy of a real module with one field added to a documented dataclass is caught, and
    so is one whose docstring names a field by an old name."""
    source = (SRC / "analysis" / "fits.py").read_text(encoding="utf-8")
    assert dataclass_problems(source, "satcal.analysis.fits") == {}
    planted = source.replace("    converged: bool\n", "    converged: bool\n    planted_field: int = 0\n", 1)
    assert planted != source
    assert dataclass_problems(planted, "satcal.analysis.fits") == {
        "satcal.analysis.fits:LogitFit": ["satcal.analysis.fits:LogitFit: Attributes leaves out planted_field"]}
    renamed = source.replace("    aic : float\n", "    akaike : float\n", 1)
    assert renamed != source
    assert dataclass_problems(renamed, "satcal.analysis.fits") == {
        "satcal.analysis.fits:LogitFit": ["satcal.analysis.fits:LogitFit: Attributes leaves out aic",
                                          "satcal.analysis.fits:LogitFit: Attributes names akaike, not a field"]}
