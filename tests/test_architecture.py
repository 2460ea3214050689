"""The package's layout rules (ARCHITECTURE.md), checked on the source.

The import graph is read from the source with ``ast`` (every ``import``
statement, at module level or inside a function), so a lazy import counts
as an arrow as much as a top-level one.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "skgpstruct"

#: The module that defines each estimator.
ESTIMATORS = {
    "GPStructTagger": "skgpstruct._gpstruct.tagger",
    "RandomizedCRFTagger": "skgpstruct._randomized_crf.tagger",
}
#: Meta-estimators and front ends may import either estimator.
MAX_PRIVATE_ENTRIES = 8
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules():
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name, path):
    """Modules of the package that ``name`` imports (anywhere in its source)."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module]
            targets += [f"{module}.{alias.name}" for alias in node.names
                        if f"{module}.{alias.name}" in MODULES]
        else:
            continue
        for target in targets:
            # importing a.b.c runs a, a.b and a.b.c
            pieces = target.split(".")
            for k in range(1, len(pieces) + 1):
                prefix = ".".join(pieces[:k])
                # (the packages above ``name`` are already running)
                if prefix in MODULES and prefix != name and not name.startswith(prefix + "."):
                    found.add(prefix)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _reachable(start):
    seen, todo = set(), [start]
    while todo:
        for nxt in GRAPH[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_few_private_entries_at_the_top():
    private = sorted(p.name for p in PACKAGE.iterdir()
                     if p.name.startswith("_") and not p.name.startswith("__")
                     and (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())))
    assert len(private) <= MAX_PRIVATE_ENTRIES, private


@pytest.mark.parametrize("estimator", sorted(ESTIMATORS))
def test_an_estimator_does_not_import_the_other(estimator):
    module = ESTIMATORS[estimator]
    others = [m for e, m in ESTIMATORS.items() if e != estimator]
    reached = _reachable(module)
    for other in others:
        assert other not in reached, f"{module} reaches {other}"


def test_no_import_circle():
    circles = sorted({tuple(sorted((a, b))) for a in GRAPH for b in _reachable(a)
                      if a in _reachable(b) and a != b})
    assert not circles, circles[:10]


def test_lower_layers_do_not_import_upper_ones():
    """chain/ and gp/ know nothing of estimators, and _input/ and _utils/
    nothing of the rest of the package."""
    rules = {
        "skgpstruct.chain": ("skgpstruct.chain", "skgpstruct._input", "skgpstruct._utils"),
        "skgpstruct.gp": ("skgpstruct.gp", "skgpstruct._input", "skgpstruct._utils"),
        "skgpstruct._input": ("skgpstruct._input",),
        "skgpstruct._utils": ("skgpstruct._utils",),
        "skgpstruct._tagging": ("skgpstruct._tagging", "skgpstruct._input", "skgpstruct._utils",
                                "skgpstruct.chain", "skgpstruct.optim", "skgpstruct.metrics",
                                "skgpstruct.likelihoods"),
    }
    wrong = []
    for name, deps in GRAPH.items():
        for layer, allowed in rules.items():
            if name == layer or name.startswith(layer + "."):
                wrong += [(name, d) for d in deps
                          if not any(d == a or d.startswith(a + ".") for a in allowed)]
    assert not wrong, wrong


def test_modules_are_short():
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, long


def _is_numba(func):
    for dec in func.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("njit", "jit"):
            return True
    return False


def _code_lines(func, lines):
    """Lines of ``func``'s body that hold code (no docstrings, comments or
    blank lines), nested functions included."""
    docstrings = set()
    for node in ast.walk(func):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    start = func.body[0].lineno
    return [k for k in range(start, func.end_lineno + 1)
            if k not in docstrings and lines[k - 1].strip()
            and not lines[k - 1].strip().startswith("#")]


def test_functions_are_short():
    long = []
    for name, path in MODULES.items():
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_numba(node):
                n = len(_code_lines(node, lines))
                if n > MAX_FUNCTION_LINES:
                    long.append((name, node.name, n))
    assert not long, long


def test_one_definition_of_each_constant():
    """A module-level ALL_CAPS constant (the same name, public or private,
    with the same value) is assigned in one module only: the others import
    it. (Two modules may hold different constants that share a name.)"""
    where = {}
    for name, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            targets = []
            if isinstance(node, ast.Assign):
                targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                targets = [node.target.id]
            for target in targets:
                bare = target.lstrip("_")
                if bare.isupper() and len(bare) > 1 and target != "__all__":
                    where.setdefault((bare, ast.unparse(node.value)), []).append(name)
    repeated = {k: v for k, v in where.items() if len(v) > 1}
    assert not repeated, repeated
