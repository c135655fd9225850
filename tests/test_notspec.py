"""A file that is plainly not a spec gets one diagnostic, SC008 (issue 18, item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shapecheck.syntax import notspec
from shapecheck.api import check_path, check_text

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["README.md", "docs/language.md", "shapecheck/cli/__init__.py"])
def test_a_file_that_is_not_a_spec_gets_one_diagnostic(name):
    diagnostics = check_path(ROOT / name).diagnostics
    assert [d.code for d in diagnostics] == ["SC008"], [d.code for d in diagnostics][:5]
    assert "does not look like a spec" in diagnostics[0].message
    assert diagnostics[0].help  # where specs are


def test_it_names_the_first_syntax_error_where_it_is():
    text = "# Title\n\n" + "".join(f"Some prose, line {i}.\n" for i in range(12))
    (diagnostic,) = check_text(text).diagnostics
    assert diagnostic.code == "SC008" and diagnostic.span.line == 3
    assert "12 of its 12 statements" in diagnostic.message and "line 3" in diagnostic.message


def test_a_spec_with_a_few_broken_statements_keeps_its_syntax_errors():
    spec = "dim N, d\ninput Q: [N, d]\n" + "S = Q @\n" * (notspec.MIN_BROKEN - 1)
    found = [d.code for d in check_text(spec).diagnostics]
    assert "SC008" not in found and found.count("SC001") == notspec.MIN_BROKEN - 1


def test_a_spec_mostly_sound_keeps_its_syntax_errors():
    good = "dim N, d\ninput Q: [N, d]\n" + "".join(f"S{i} = Q @ Q.T\n" for i in range(20))
    spec = good + "T = Q @\n" * notspec.MIN_BROKEN
    found = [d.code for d in check_text(spec).diagnostics]
    assert "SC008" not in found and found.count("SC001") == notspec.MIN_BROKEN
