"""The package's layout: its import graph has no circle and no upward arrow.

Every module of ``picard_casadi`` belongs to a layer (its wing, or, at the
top level, its own name); an import, at module level or inside a function,
may only point to the same or a lower layer.  Imports between modules of one
wing may not form a circle.  The layers, lowest first, are the ones the
package's ``__init__`` docstring draws; this test is their definition."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "picard_casadi"
MODELS = Path(__file__).resolve().parents[1] / "models"

#: lowest first; a module may import from its own layer or a lower one
LAYERS = [
    ("errors", "model", "inputs", "experiment", "noise", "parameters"),  # the user's problem
    ("runtime",),                        # how code runs: generated C, processes, Ctrl-C
    ("simulate",),                       # CVODES simulation of a model
    ("transcription",),                  # the problem as intervals and CasADi functions
    ("analysis",),                       # what an answer is worth
    ("methods",),                        # the step rules over a transcription
    ("result",),                         # the estimate and its JSON form
    ("estimation",),                     # one estimate's run: setup, refinement, fallbacks
    ("estimate",),                       # the user's call
    ("io",),                             # figures and exported C
    ("studies", "models"),               # many estimates: registry, compare, profiles
    ("cli",),                            # the command line
    ("", "__main__"),                    # the package's public names
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}

#: at the package's top level: the user's vocabulary only
TOP_LEVEL = {"__init__", "__main__", "errors", "model", "inputs", "experiment", "noise",
             "parameters",
             "simulate", "result", "estimate"}
MAX_LINES = 800


def _modules() -> dict[str, Path]:
    """``{dotted name under picard_casadi: file}``, the ``models`` package included."""
    out = {}
    for root, prefix in ((PACKAGE, ""), (MODELS, "models.")):
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[(prefix + ".".join(parts)).strip(".")] = path
    return out


MODULES = _modules()


def _layer(module: str) -> int:
    return RANK[module.split(".")[0]]


def _imports(module: str, path: Path) -> set[str]:
    """The package's modules that ``module`` imports, anywhere in its file."""
    is_package = path.name == "__init__.py"
    here = module.split(".") if module else []
    if not is_package:
        here = here[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
            found.update(t[len("picard_casadi"):].strip(".") for t in targets
                         if t == "picard_casadi" or t.startswith("picard_casadi."))
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = here[:len(here) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        elif node.module and (node.module == "picard_casadi"
                              or node.module.startswith("picard_casadi.")):
            target = node.module[len("picard_casadi"):].strip(".")
        else:
            continue
        for alias in node.names:
            name = f"{target}.{alias.name}".strip(".")
            found.add(name if name in MODULES else target)
    found.discard(module)
    return found


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def test_no_module_imports_from_a_higher_layer():
    upward = [f"{m} ({LAYERS[_layer(m)][0]}) imports {d} ({LAYERS[_layer(d)][0]})"
              for m, deps in GRAPH.items() for d in sorted(deps) if _layer(d) > _layer(m)]
    assert not upward, "\n".join(upward)


def test_the_import_graph_has_no_circle():
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for d in sorted(GRAPH[m]):
            # (the package itself re-exports everything: an import of it is
            # an upward one, which the test above refuses)
            if state.get(d) == 1 and d != "":
                return path[path.index(d):] + [d]
            if d not in state and d != "":
                cycle = visit(d)
                if cycle:
                    return cycle
        path.pop()
        state[m] = 2
        return None

    for module in sorted(GRAPH):
        if module not in state:
            cycle = visit(module)
            assert cycle is None, " -> ".join(cycle)


def test_the_top_level_holds_the_users_vocabulary_only():
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top == TOP_LEVEL, sorted(top ^ TOP_LEVEL)
    wings = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert wings == {names[0] for names in LAYERS[1:-1] if names[0] in wings} | {"methods"}
    for wing in wings:
        doc = ast.get_docstring(ast.parse((PACKAGE / wing / "__init__.py").read_text()))
        assert doc and "may import" in doc.lower(), f"{wing}/__init__.py says what it may import"


def test_no_file_is_over_800_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def test_every_import_names_a_module_of_the_package():
    unknown = [f"{m} imports {d}" for m, deps in GRAPH.items() for d in deps
               if d and d not in MODULES]
    assert not unknown, unknown


def test_the_check_sees_what_it_checks():
    # the walker finds imports inside functions and relative ones
    assert "runtime.codegen" in GRAPH["transcription.kernels"]
    assert "estimation.multistart" in GRAPH["estimate"]
    assert all(m in RANK for m in {k.split(".")[0] for k in MODULES})
