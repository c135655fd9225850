"""Write shapecheck/record_inits.py: every record's ``__init__``, compiled ahead.

``records.dataclass`` compiles a record's ``__init__`` on its first instantiation (about
0.1 ms each, some forty on every `verify`), and ``records.NamedTuple`` a named tuple's
``__new__`` when the class is made (eighteen on every `verify`); the ones written here come
with the package's bytecode instead. Run after adding a record or changing its fields (tests/test_records.py
fails while `verify` still compiles one; until then it is compiled, as before):

    python tools/record_inits.py
"""

from __future__ import annotations

import gc
import importlib
import pkgutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shapecheck import records  # noqa: E402

TARGET = ROOT / "shapecheck" / "record_inits.py"


def declared() -> tuple[list[tuple[type, Any, bool]], list[tuple[str, ...]]]:
    """Every record the package declares (modules whose optional dependency is missing are
    left out): its class, fields and frozen-ness, as ``records`` sees them; and every named
    tuple's fields."""
    found: list[tuple[type, Any, bool]] = []
    tuples: list[tuple[str, ...]] = []
    lazy, named = records._lazy_init, records._named_tuple

    def noting(cls: type, fields: Any, frozen: bool) -> Any:
        found.append((cls, fields, frozen))
        return lazy(cls, fields, frozen)

    def noting_tuple(typename: str, names: tuple[str, ...], *rest: Any) -> type:
        tuples.append(names)
        return named(typename, names, *rest)

    records._lazy_init = noting  # type: ignore[assignment]
    records._named_tuple = noting_tuple  # type: ignore[assignment]
    import shapecheck

    for module in pkgutil.walk_packages(shapecheck.__path__, "shapecheck."):
        if module.name == "shapecheck.__main__":
            continue
        try:
            importlib.import_module(module.name)
        except Exception:  # torch, jax, an editor's server: not installed here
            continue
    # The records declared with the `Record` base (records._RecordMeta), every one made so far.
    for kind in gc.get_objects():
        if type(kind) is records._RecordMeta and kind is not records.Record:
            found.append((kind, tuple(kind.__dataclass_fields__.values()), records.frozen(kind)))
    return found, tuples


def main() -> None:
    inits = []
    found, tuples = declared()
    for cls, fields, frozen in found:
        source, namespace = records.init_source(cls, fields, frozen)
        inits.append((source, tuple(name for name in namespace if name != "__name__")))
    news = {records.new_source(names) for names in tuples}
    TARGET.write_text(records.shipped_source(inits, news), encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)} ({len(dict(inits))} sources, {len(news)} named "
          "tuples)")


if __name__ == "__main__":
    main()
