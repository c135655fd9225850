"""Write shapecheck/record_inits.py and record_inits_rest.py: every record's ``__init__``,
compiled ahead; those `verify` of the examples uses in the first, every other in the second
(read on the first record a run builds that is not in the first).

``records.dataclass`` compiles a record's ``__init__`` on its first instantiation (about
0.1 ms each, some forty on every `verify`), and ``records.NamedTuple`` a named tuple's
``__new__`` when the class is made (eighteen on every `verify`); the ones written here come
with the package's bytecode instead. Run after adding a record or changing its fields (tests/test_records.py
fails while `verify` still compiles one; until then it is compiled, as before):

    python tools/record_inits.py
"""

from __future__ import annotations

import ast
import gc
import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shapecheck import records  # noqa: E402

TARGET = ROOT / "shapecheck" / "record_inits.py"
REST = ROOT / "shapecheck" / "record_inits_rest.py"


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
        if module.name in ("shapecheck.__main__", "shapecheck.record_inits",
                           "shapecheck.record_inits_rest"):
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


# Run in a fresh interpreter: `verify` of the examples, noting each `__init__` and named
# tuple `__new__` source it uses (compiled or shipped).
PROBE = """
import sys
from shapecheck import records
used = set()
compile_init, new_source = records._compile_init, records.new_source
def noting_init(cls, fields, frozen):
    used.add(records.init_source(cls, fields, frozen)[0])
    return compile_init(cls, fields, frozen)
def noting_new(names):
    source = new_source(names)
    used.add(source)
    return source
records._compile_init, records.new_source = noting_init, noting_new
from shapecheck.cli import main
try:
    main(["verify", *sys.argv[1:]])
except SystemExit:
    pass
print("USED", repr(sorted(used)))
"""


def used_by_verify() -> set[str]:
    """The sources `verify` of the examples (correct specs) uses: they go in the module a
    cold `verify` reads; every other one in ``record_inits_rest``, read on the first miss."""
    examples = sorted(str(path) for path in (ROOT / "examples").glob("*.attn"))
    done = subprocess.run([sys.executable, "-c", PROBE, *examples], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          check=True)
    line = [line for line in done.stdout.splitlines() if line.startswith("USED ")][-1]
    return set(ast.literal_eval(line[len("USED "):]))


def main() -> None:
    inits = []
    found, tuples = declared()
    for cls, fields, frozen in found:
        source, namespace = records.init_source(cls, fields, frozen)
        inits.append((source, tuple(name for name in namespace if name != "__name__")))
    news = {records.new_source(names) for names in tuples}
    used = used_by_verify()
    for target, keep in ((TARGET, True), (REST, False)):
        part = [(source, names) for source, names in inits if (source in used) == keep]
        part_news = {source for source in news if (source in used) == keep}
        target.write_text(records.shipped_source(part, part_news), encoding="utf-8")
        print(f"wrote {target.relative_to(ROOT)} ({len(dict(part))} sources, "
              f"{len(part_news)} named tuples)")


if __name__ == "__main__":
    main()
