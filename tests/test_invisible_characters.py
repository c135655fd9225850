"""SC005: every character that prints as nothing is found, named and located exactly."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from shapecheck.syntax import invisible
from shapecheck.api import check_bytes, check_text


def test_every_format_character_is_invisible_to_us() -> None:
    """The written-out class covers Unicode's format characters (Cf), as this Python knows them."""
    missing = [f"U+{c:04X}" for c in range(sys.maxunicode + 1)
               if unicodedata.category(chr(c)) == "Cf" and not invisible._pattern().fullmatch(chr(c))]
    assert missing == []


def test_the_members_are_what_the_pattern_matches() -> None:
    # Issue 36: a text with none of MEMBERS is not searched (the pattern is compiled on the
    # first text that has one): the two must be the same characters.
    pattern = invisible._pattern()
    assert invisible.MEMBERS == {chr(c) for c in range(sys.maxunicode + 1)
                                 if pattern.fullmatch(chr(c))}


@pytest.mark.parametrize("character", ["\u200b", "\u200c", "\u200d", "\u2060", "\u00ad",
                                       "\u202a", "\u202e", "\u2066", "\u2069", "\u200f",
                                       "\ufeff", "\u3164", "\U000e0041"])
def test_each_is_reported_where_it_is(character: str) -> None:
    text = f"dim N\n# a comment {character}here\ninput X: [N]\noutput X\n"
    (diagnostic,) = [d for d in check_text(text).diagnostics if d.code == "SC005"]
    assert (diagnostic.span.line, diagnostic.span.column, diagnostic.span.end_column) == (2, 13, 14)
    assert f"U+{ord(character):04X} {unicodedata.name(character)}" in diagnostic.message
    (fix,) = diagnostic.fixes
    assert fix.edits[0].span == diagnostic.span and fix.edits[0].replacement == ""


def test_a_leading_byte_order_mark_is_not_reported() -> None:
    assert check_bytes(b"\xef\xbb\xbfdim N\ninput X: [N]\noutput X\n").diagnostics == []
    text = "\ufeffdim N\ninput X: [N]\noutput X\n"  # (the parser's business otherwise)
    assert "SC005" not in [d.code for d in check_text(text).diagnostics]


def test_many_runs_are_summed_up() -> None:
    text = "dim N\ninput X: [N]\noutput X\n" + "# \u200b\n" * 100
    found = [d for d in check_text(text).diagnostics if d.code == "SC005"]
    assert len(found) == invisible.MAX_REPORTED + 1
    assert "80 more" in found[-1].message


def test_columns_count_characters_not_bytes() -> None:
    text = "dim N\n# é→\u200b\ninput X: [N]\noutput X\n"
    (diagnostic,) = [d for d in check_text(text).diagnostics if d.code == "SC005"]
    assert diagnostic.span.column == 5 and text.split("\n")[1][4] == "\u200b"
