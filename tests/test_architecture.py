"""The house plan (docs/architecture.md): imports go to a module's own layer or a lower one, never
up, and no module imports itself through others. Imports inside functions count too."""
import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "satcal"

#: Layers, lowest first, as docs/architecture.md declares them: a module's layer is that of its
#: longest listed prefix.
LAYERS = [
    ["satcal._version", "satcal.errors", "satcal._lazy", "satcal._threads", "satcal.fileio",
     "satcal._results"],
    ["satcal.trecfile", "satcal.measures", "satcal.judgments", "satcal.runs", "satcal.topics",
     "satcal.answers", "satcal.settings"],
    ["satcal.generate", "satcal.traps"],
    ["satcal.platforms"],
    ["satcal.serve", "satcal.quality", "satcal.ingest", "satcal.simulate",
     "satcal.datasets"],
    ["satcal.analysis", "satcal.reliability"],
    ["satcal.report"],
    ["satcal.study", "satcal.workspace", "satcal.adaptive_study", "satcal.pipeline", "satcal.cli", "satcal.cli_options", "satcal.__main__", "satcal"],
]


def modules(root: Path = SRC) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph(root: Path = SRC) -> set[tuple[str, str, int]]:
    """(importer, imported, line) for every import of a satcal module, at any depth."""
    mods = modules(root)
    edges = set()
    for mod, path in mods.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if not target.startswith("satcal"):
                    continue
                while target not in mods and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target != mod:
                    edges.add((mod, target, node.lineno))
    return edges


def layer(module: str) -> int:
    best, best_len = None, -1
    for i, members in enumerate(LAYERS):
        for prefix in members:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    if best is None:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS and docs/architecture.md")
    return best


def upward(edges) -> list[str]:
    return sorted(f"{a} (line {n}) imports {b}: layer {layer(a)} -> {layer(b)}"
                  for a, b, n in edges if layer(b) > layer(a))


def cycles(edges) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan). A package's __init__
    counts as a module: a submodule that imports its own package while the package imports it
    is a cycle too."""
    graph: dict[str, set[str]] = {}
    for a, b, _ in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_layer():
    assert all(0 <= layer(mod) < len(LAYERS) for mod in modules())


def test_no_import_goes_up_a_layer():
    assert upward(import_graph()) == []


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_check_fails_on_a_planted_upward_import(tmp_path):
    """A copy of the package with one upward import planted inside a function is caught."""
    import shutil
    root = tmp_path / "satcal"
    shutil.copytree(SRC, root, ignore=shutil.ignore_patterns("__pycache__", "data", "templates", "static"))
    with (root / "measures" / "scoring.py").open("a", encoding="utf-8") as f:
        f.write("\n\ndef _planted():\n    from ..report import write_analysis  # noqa\n")
    found = upward(import_graph(root))
    assert any(line.startswith("satcal.measures.scoring (line") and "imports satcal.report" in line
               for line in found)
    with (root / "judgments.py").open("a", encoding="utf-8") as f:
        f.write("\n\ndef _planted():\n    import satcal.measures  # noqa\n")
    with (root / "measures" / "scoring.py").open("a", encoding="utf-8") as f:
        f.write("\n\ndef _planted_too():\n    from .. import judgments  # noqa\n")
    assert any({"satcal.measures", "satcal.judgments"} <= set(c) for c in cycles(import_graph(root)))


def test_a_part_of_the_study_importing_its_package_is_a_cycle(tmp_path):
    """The study package's __init__ assembles the Study from its parts; a part that imports the
    package back (rather than the sibling module it needs) is caught as a cycle."""
    import shutil
    root = tmp_path / "satcal"
    shutil.copytree(SRC, root, ignore=shutil.ignore_patterns("__pycache__", "data", "templates", "static"))
    assert cycles(import_graph(root)) == []
    with (root / "study" / "archive.py").open("a", encoding="utf-8") as f:
        f.write("\n\ndef _planted():\n    from . import Study  # noqa\n")
    assert any({"satcal.study", "satcal.study.archive"} <= set(c) for c in cycles(import_graph(root)))


@pytest.mark.parametrize("name", ["satcal.analysis.core", "satcal.report", "satcal.cli",
                                  "satcal.measures.scoring", "satcal.study.archive", "satcal.serve.study"])
def test_layer_lookup_by_longest_prefix(name):
    assert layer(name) == {"satcal.analysis.core": 5, "satcal.report": 6, "satcal.cli": 7,
                           "satcal.measures.scoring": 1, "satcal.study.archive": 7,
                           "satcal.serve.study": 4}[name]
