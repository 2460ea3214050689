"""What the tests of benchmark scripts share: loading a script of
``benchmarks/`` as a module."""

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_script(name):
    """``benchmarks/<name>.py`` as a module (its directory on ``sys.path``
    while it loads, for the scripts' ``_common`` import)."""
    path = BENCHMARKS / f"{name}.py"
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module
