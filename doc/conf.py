"""Sphinx configuration of the skgpstruct documentation.

Build it with ``sphinx-build -W -b html doc doc/_build/html`` (or
``.ci/docs``) after ``pip install -e ".[docs,plot]"``. The gallery in
``examples/`` runs at every build; ``-D plot_gallery=0`` skips running it.
"""

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import _results  # noqa: E402

import skgpstruct  # noqa: E402

# The benchmark tables, from benchmarks/results/*.md, as reST includes.
_results.build(ROOT / "benchmarks" / "results", HERE / "_generated" / "results")

project = "skgpstruct"
author = "skgpstruct developers"
copyright = "skgpstruct developers"
release = skgpstruct.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["custom.css"]
exclude_patterns = ["_build", "_generated", "_templates", "Thumbs.db", ".DS_Store"]
source_suffix = {".rst": "restructuredtext"}
root_doc = "index"

# API reference: one page per public name, written by autosummary from the
# lists in api.rst (tests/test_docs.py checks that every public name is listed).
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"
# numpydoc renders the docstrings; the methods are listed by the class template.
numpydoc_show_class_members = False
numpydoc_show_inherited_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = f"skgpstruct {release}"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
html_sidebars = {"**": ["sidebar-nav-bs"]}
html_show_sourcelink = False

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "doc_module": ("skgpstruct",),
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"skgpstruct": None},
    "abort_on_example_error": True,
    "remove_config_comments": True,
    "show_memory": False,
    "download_all_examples": False,
    "matplotlib_animations": False,
}

# The examples are short scripts on synthetic data: keep numba's compilation
# cache (the package's kernels are cached on disk) and the BLAS quiet.
suppress_warnings = []


# Methods inherited from scikit-learn (get_params, set_output, the
# set_fit_request of metadata routing, ...) carry :ref: and :term: roles to
# labels and the glossary of scikit-learn's own site: keep their text only.
_SKLEARN_REF = re.compile(r":(?:ref|term):`(?:([^`<]*?)\s*<[^`>]+>|([^`]+))`")


def _fix_docstring(app, what, name, obj, options, lines):
    if getattr(obj, "__module__", "").startswith("sklearn"):
        lines[:] = [_SKLEARN_REF.sub(lambda m: m.group(1) or m.group(2), line)
                    for line in lines]


def setup(app):
    # priority < 500: before numpydoc's own autodoc-process-docstring handler
    app.connect("autodoc-process-docstring", _fix_docstring, priority=400)
