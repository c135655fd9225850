"""Write shapecheck/record_inits.py: every record's ``__init__``, compiled ahead.

``records.dataclass`` compiles a record's ``__init__`` on its first instantiation (about
0.1 ms each, some forty on every `verify`); the ones written here come with the package's
bytecode instead. Run after adding a record or changing its fields (tests/test_records.py
fails while `verify` still compiles one; until then it is compiled, as before):

    python tools/record_inits.py
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shapecheck import records  # noqa: E402

TARGET = ROOT / "shapecheck" / "record_inits.py"


def declared() -> list[tuple[type, Any, bool]]:
    """Every record the package declares (modules whose optional dependency is missing are
    left out): its class, fields and frozen-ness, as ``records`` sees them."""
    found: list[tuple[type, Any, bool]] = []
    lazy = records._lazy_init

    def noting(cls: type, fields: Any, frozen: bool) -> Any:
        found.append((cls, fields, frozen))
        return lazy(cls, fields, frozen)

    records._lazy_init = noting  # type: ignore[assignment]
    import shapecheck

    for module in pkgutil.walk_packages(shapecheck.__path__, "shapecheck."):
        if module.name == "shapecheck.__main__":
            continue
        try:
            importlib.import_module(module.name)
        except Exception:  # torch, jax, an editor's server: not installed here
            continue
    return found


def main() -> None:
    inits = []
    for cls, fields, frozen in declared():
        source, namespace = records.init_source(cls, fields, frozen)
        inits.append((source, tuple(name for name in namespace if name != "__name__")))
    TARGET.write_text(records.shipped_source(inits), encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)} ({len(dict(inits))} sources)")


if __name__ == "__main__":
    main()
