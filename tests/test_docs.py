"""The documentation in doc/ keeps up with the package (cheap: no Sphinx).

- Every public name (each public module's ``__all__``) is listed in the API
  reference, ``doc/api.rst``, in its module's section, so that a new public
  function cannot be left out of the docs.
- Every example of the gallery in ``examples/`` is a ``plot_*.py`` script
  (the pattern sphinx-gallery runs) with a titled docstring, and it compiles.
- The python code blocks of the pages run as written (those that need files
  or a cluster are listed with the reason they are skipped).

Skipped when doc/ is absent (an installed package without its sources).
"""

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import skgpstruct

REPO_ROOT = Path(__file__).resolve().parents[1]
DOC_DIR = REPO_ROOT / "doc"
API_RST = DOC_DIR / "api.rst"
EXAMPLES_DIR = REPO_ROOT / "examples"

pytestmark = pytest.mark.skipif(not API_RST.is_file(), reason="doc/ is not available")

# The examples the documentation pages point to.
EXPECTED_EXAMPLES = {
    "plot_quick_start.py",
    "plot_uncertainty.py",
    "plot_randomized_many_labels.py",
    "plot_inspection.py",
    "plot_pipeline_grid_search.py",
    "plot_crfsuite_tutorial.py",
}


def public_modules():
    """``skgpstruct`` and its public direct submodules and subpackages."""
    names = ["skgpstruct"]
    for info in pkgutil.iter_modules(skgpstruct.__path__):
        if not info.name.startswith("_"):
            names.append(f"skgpstruct.{info.name}")
    return names


def api_sections():
    """``{module: text of its section}``: the text of api.rst after each
    ``.. currentmodule:: module`` up to the next one."""
    text = API_RST.read_text(encoding="utf-8")
    parts = re.split(r"^\.\. currentmodule:: *(\S+) *$", text, flags=re.MULTILINE)
    sections = {}
    for module, body in zip(parts[1::2], parts[2::2]):
        sections[module] = sections.get(module, "") + body
    return sections


def documented_names(section):
    """Names listed in autosummary tables (one per indented line) or given a
    ``py:data`` / ``py:class`` / ``py:function`` directive."""
    names = set()
    in_autosummary = False
    for line in section.splitlines():
        directive = re.match(r"^\.\. (?:py:)?(\w+):: *(\S*)", line)
        if directive:
            in_autosummary = directive.group(1) == "autosummary"
            if directive.group(1) in ("data", "class", "function", "exception"):
                names.add(directive.group(2))
            continue
        if in_autosummary:
            entry = re.match(r"^ {3}~?([\w.]+)\s*$", line)
            if entry:
                names.add(entry.group(1).rsplit(".", 1)[-1])
            elif line and not line.startswith(" "):
                in_autosummary = False
    return names


@pytest.mark.parametrize("module_name", public_modules())
def test_every_public_name_is_in_the_api_reference(module_name):
    module = importlib.import_module(module_name)
    public = getattr(module, "__all__", None)
    if public is None:
        pytest.skip(f"{module_name} has no __all__")
    sections = api_sections()
    assert module_name in sections, (
        f"doc/api.rst has no section for {module_name} "
        f"(add '.. currentmodule:: {module_name}' and an autosummary of its names)"
    )
    missing = sorted(set(public) - documented_names(sections[module_name]))
    assert not missing, (
        f"public names of {module_name} missing from doc/api.rst: {missing} "
        "(add them to its autosummary, or a '.. py:data::' entry for data)"
    )


def test_api_reference_lists_no_stale_names():
    for module_name, section in api_sections().items():
        module = importlib.import_module(module_name)
        stale = sorted(name for name in documented_names(section)
                       if not hasattr(module, name))
        assert not stale, f"doc/api.rst lists names {module_name} lacks: {stale}"


def test_gallery_examples():
    assert (EXAMPLES_DIR / "README.rst").is_file() or (EXAMPLES_DIR / "README.txt").is_file()
    scripts = sorted(p.name for p in EXAMPLES_DIR.glob("*.py"))
    assert EXPECTED_EXAMPLES <= set(scripts), sorted(EXPECTED_EXAMPLES - set(scripts))
    for name in scripts:
        assert name.startswith("plot_"), (
            f"examples/{name} does not match sphinx-gallery's filename_pattern "
            "'/plot_': it would be shown but not run"
        )
        source = (EXAMPLES_DIR / name).read_text(encoding="utf-8")
        tree = ast.parse(source, filename=name)  # also: it compiles
        docstring = ast.get_docstring(tree)
        assert docstring, f"examples/{name} needs a docstring (the gallery's title and text)"
        lines = [line for line in docstring.splitlines() if line.strip()]
        if lines and set(lines[0].strip()) == {"="}:  # an overline
            lines = lines[1:]
        assert len(lines) >= 2 and set(lines[1].strip()) == {"="}, (
            f"examples/{name}: the docstring must start with a title underlined by '='"
        )
        assert len(lines[1].strip()) >= len(lines[0].strip()), (
            f"examples/{name}: the title's underline is shorter than the title"
        )


def test_every_results_file_names_the_script_that_writes_it():
    """The benchmarks page says which script wrote each results file: the
    script of that name or, for a ``--name`` variant, the longest script
    name that prefixes it (``calibration_transfer_n30`` is
    ``calibration_transfer``'s, not ``calibration``'s)."""
    import sys

    sys.path.insert(0, str(DOC_DIR))
    try:
        import _results
    finally:
        sys.path.remove(str(DOC_DIR))
    bench = REPO_ROOT / "benchmarks"
    scripts = sorted(p.stem for p in bench.glob("[!_]*.py"))
    assert _results._script("calibration_transfer_n30", scripts) == "calibration_transfer"
    assert _results._script("active_learning_ud", scripts) == "active_learning"
    assert _results._script("calibration", scripts) == "calibration"
    with pytest.raises(ValueError, match="No benchmark script"):
        _results._script("nobody_wrote_this", scripts)
    for md in (bench / "results").glob("*.md"):  # raises for an orphan
        assert (bench / f"{_results._script(md.stem, scripts)}.py").is_file()


# Pages' python code blocks that cannot run here, and why.
_NOT_RUN = {
    ("large_label_sets.rst", 0): "reads a CoNLL-U file from the working directory",
    ("coming_from_crfsuite.rst", 0): "reads CRF++ files from the working directory",
    ("dask.rst", 0): "starts a four-worker dask cluster",
}


def _page_blocks():
    """``(page, index, code)`` of every ``.. code-block:: python`` of doc/."""
    import textwrap

    blocks = []
    for page in sorted(DOC_DIR.glob("*.rst")):
        text = page.read_text(encoding="utf-8")
        found = re.findall(r"^\.\. code-block:: python\n\n((?:(?: {4}.*)?\n)+)", text,
                           flags=re.MULTILINE)
        blocks += [(page.name, i, textwrap.dedent(code)) for i, code in enumerate(found)]
    return blocks


@pytest.mark.parametrize("page, index, code", _page_blocks(),
                         ids=lambda v: v if isinstance(v, (str, int)) and "\n" not in str(v)
                         else "")
def test_page_examples_run(page, index, code, monkeypatch):
    """The pages' examples run as written, in a namespace that holds what
    their text takes as given (``X``, ``y`` and a train / test split), as on
    a machine without a GPU (``device="auto"`` would otherwise pick numba's
    CUDA simulator once ``tests/chain/test_cuda.py`` has switched it on, and
    train on it for minutes)."""
    if (page, index) in _NOT_RUN:
        pytest.skip(_NOT_RUN[(page, index)])
    from skgpstruct._utils import device as _device
    from skgpstruct.datasets import make_chain_data

    monkeypatch.setattr(_device, "_cuda_check", lambda: (False, False, "no GPU (test)"))

    X, y = make_chain_data(n_sequences=60, n_classes=3, random_state=0)
    namespace = {"X": X, "y": y, "X_train": X[:40], "y_train": y[:40],
                 "X_test": X[40:], "y_test": y[40:]}
    exec(compile(code, f"doc/{page}", "exec"), namespace)


def test_page_examples_are_found():
    """The block finder sees every example (a page's block that it missed
    would go untested)."""
    found = {(page, index) for page, index, _ in _page_blocks()}
    assert set(_NOT_RUN) <= found
    for page in DOC_DIR.glob("*.rst"):
        count = page.read_text(encoding="utf-8").count(".. code-block:: python")
        assert sum(p == page.name for p, _ in found) == count, page.name


def test_getting_started_names_every_dependency():
    """The installation section of getting_started.rst names every package
    of pyproject.toml's ``dependencies`` (a user installing by hand reads
    it)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    text = (DOC_DIR / "getting_started.rst").read_text(encoding="utf-8")
    install = text.split("Installation", 1)[1].split("Optional extras", 1)[0].lower()
    for requirement in project["project"]["dependencies"]:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
        assert name in install, f"{name} is not named in getting_started.rst"


def test_every_page_is_in_the_toctree():
    """Each page of doc/ (the README's links lead to them) is listed in a
    toctree of index.rst, so that the site shows it; pages marked
    ``:orphan:`` (sphinx-gallery's execution times) are left out on
    purpose."""
    text = (DOC_DIR / "index.rst").read_text(encoding="utf-8")
    listed = set()
    for body in re.findall(r"^\.\. toctree::\n((?:(?: {3}.*)?\n)+)", text, flags=re.MULTILINE):
        listed |= {line.strip() for line in body.splitlines()
                   if line.strip() and not line.strip().startswith(":")}
    pages = {page.stem for page in DOC_DIR.glob("*.rst")
             if page.read_text(encoding="utf-8").lstrip()[:8] != ":orphan:"} - {"index"}
    assert pages <= listed, sorted(pages - listed)
