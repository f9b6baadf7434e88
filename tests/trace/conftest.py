"""Make `tests/synth.py` importable as `synth` (this folder is not a package, see tests/analysis)."""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
