"""Write shapecheck/syntax/grammar_tables.py: the analysed grammar as Python literals.

Run after every edit of grammar/attn.lark (tests/test_grammar_cache.py fails until the
tables are this grammar's; until then the parser falls back to the per-user cache):

    python tools/grammar_tables.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shapecheck.syntax import grammar_cache, parser  # noqa: E402

TARGET = ROOT / "shapecheck" / "syntax" / "grammar_tables.py"


def main() -> None:
    options = parser.parser_options(parser.BracketNewlines())
    TARGET.write_text(grammar_cache.tables_source(parser.grammar_text(), **options),
                      encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
