"""Fuzz shapecheck: generated and mutated specs through the API in-process, a sample
through the real command line, and "verified at small sizes => `run` succeeds with
the checker's shapes" on the NumPy backend.

    python tools/fuzz.py --count 100000            # or --seconds 3600
    python tools/fuzz.py --seed 7 --only 4242      # reproduce one input, with its traceback

Every input is made from ``random.Random(f"{seed}:{index}")``, so a run is reproducible
and any input can be replayed alone (``--only``). Five generators, in turn:

- ``typed``: specs built from the builtin table (``builtins.BUILTINS``: each parameter's
  ``Kind`` says what argument to make), so a new builtin is fuzzed as soon as it has a row;
  ``pruned``: the same with the failing statements taken out, so that most verify and run;
- ``grammar``: random derivations of ``grammar/attn.lark`` itself, with names drawn from
  a declared preamble, so new syntax is fuzzed as soon as the grammar has it;
- ``algebra``: constraints with ``//``, ``/``, ``**``, inequalities, chains and the
  blow-ups of ``tools/blowups.py``, and a statement that asks about them;
- ``mutated``: the examples, the test cases and the blow-ups, edited at random.

Each input is checked (``check_text``, at no sizes and at drawn ones), its diagnostics
are validated (registered code and severity, spans inside the text), rendered in every
``verify`` format (SARIF and GitHub one in ``--report-every``, with both reports). A spec that verifies
is run (``compile_spec(...).run(seed=0)``) at admissible small sizes; anything but
success is a *mismatch*. One input in ``--cli-every`` also goes through
``python -m shapecheck`` (``verify`` in batches, ``run``, ``report``, ``explain``): exit
status 0 or 1, no traceback. A *hang* is an input that takes more than ``--hang`` CPU
seconds (a CPU-time alarm, so a busy machine does not count). Failures are written to
``--failures`` (one reproducer each, with its traceback) and summed up at the end.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import signal
import string
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import blowups  # noqa: E402

from shapecheck.messages import codes  # noqa: E402
from shapecheck.api import admissible_bindings, check_text, file_result  # noqa: E402
from shapecheck.check.builtins import BUILTINS, VARIADIC, Kind  # noqa: E402
from shapecheck.formats import render  # noqa: E402
from shapecheck.check.program import Program  # noqa: E402

DIMS = ["N", "d", "H", "D", "L", "B"]
TENSORS = ["X", "Q", "K", "V", "M", "W", "S", "v"]
PREAMBLE = """dim N, d, H, L, B
dim D = H * d
constraint L >= 2
input X: [N, D]
input Q: [N, d]
input K: [L, d]
input V: [L, d]
input M: bool[N, L]
param W: [D, D]
input S: [B, H, N, L]
input v: [d]
"""


# --- generators -------------------------------------------------------------------------


def dim_expr(rng: random.Random, depth: int = 0, names: list[str] = DIMS) -> str:
    """A dim expression: dims, integers, + - * / // ** and parentheses."""
    if depth > 2 or rng.random() < 0.4:
        return rng.choice(names + ["1", "2", "3", "64"])
    op = rng.choice(["+", "-", "*", "*", "/", "//", "**"])
    left = dim_expr(rng, depth + 1, names)
    if op == "**":
        return f"({left}) ** {rng.choice(['0', '1', '2', '3', '64', '65'])}"
    return f"({left} {op} {dim_expr(rng, depth + 1, names)})"


def shape(rng: random.Random, rank: int | None = None) -> str:
    rank = rng.choice([0, 1, 2, 2, 3, 4]) if rank is None else rank
    prefix = "bool" if rng.random() < 0.1 else ""
    return prefix + "[" + ", ".join(dim_expr(rng, 2) for _ in range(rank)) + "]"


def subscripts(rng: random.Random, operands: int) -> str:
    letters = "ijklmn"
    terms = []
    for _ in range(operands):
        term = "".join(rng.choice(letters) for _ in range(rng.randint(0, 3)))
        if rng.random() < 0.2:
            term = "..." + term
        terms.append(term)
    text = ",".join(terms)
    if rng.random() < 0.6:
        used = sorted(set("".join(terms).replace(".", "")))
        out = "".join(rng.sample(used, rng.randint(0, len(used)))) if used else ""
        text += "->" + ("..." if rng.random() < 0.3 else "") + out
    if rng.random() < 0.1:  # whitespace, a stray arrow, a bad character
        text = rng.choice([text.replace(",", " , "), text.replace("->", " - > "), text + "1"])
    return f'"{text}"'


def argument(rng: random.Random, kind: Kind, tensors: list[str], operands: int = 1) -> str:
    """An argument of the kind a builtin parameter takes (sometimes of another kind)."""
    if rng.random() < 0.05:
        kind = rng.choice(list(Kind))
    if kind is Kind.TENSOR:
        return value_expr(rng, tensors, 1)
    if kind is Kind.TENSORS:
        return "[" + ", ".join(value_expr(rng, tensors, 2) for _ in range(rng.randint(0, 3))) + "]"
    if kind is Kind.DIM:
        return dim_expr(rng)
    if kind is Kind.SHAPE:
        entries = [dim_expr(rng, 2) for _ in range(rng.randint(0, 4))]
        if entries and rng.random() < 0.3:
            entries[rng.randrange(len(entries))] = "-1"
        return "[" + ", ".join(entries) + "]"
    if kind is Kind.AXIS:
        return rng.choice(["row", "col", "0", "1", "-1", "-2", "2", "3", "99"])
    if kind is Kind.PERM:
        perm = list(range(rng.randint(0, 4)))
        rng.shuffle(perm)
        if perm and rng.random() < 0.2:
            perm[0] = rng.choice([perm[-1], 9, -1])
        return "[" + ", ".join(map(str, perm)) + "]"
    if kind is Kind.STRING:
        return subscripts(rng, operands)
    if kind is Kind.NUMBER:
        return rng.choice(["0", "0.1", "1e-5", "-1", "0.5", "1", "2"])
    if kind is Kind.BOOL:
        return rng.choice(["true", "false", "True"])
    return rng.choice(tensors)  # a kind added later: a name at least


def call(rng: random.Random, tensors: list[str], depth: int) -> str:
    """A call of a builtin, its arguments made from the row's parameters."""
    builtin = BUILTINS[rng.choice(sorted(BUILTINS))]
    variadic = VARIADIC.get(builtin.name)
    operands = rng.randint(1, 3)
    parts: list[str] = []
    keywords = False
    for param in builtin.params:
        if param.name == variadic:
            parts += [value_expr(rng, tensors, depth + 1) for _ in range(operands)]
            continue
        if not param.required and rng.random() < 0.5:
            continue
        text = argument(rng, param.kind, tensors, operands)
        if keywords or (not param.required and rng.random() < 0.7):
            keywords = True
            text = f"{param.name}={text}"
        parts.append(text)
    if rng.random() < 0.05 and parts:
        parts.pop(rng.randrange(len(parts)))  # a missing argument
    if rng.random() < 0.03:
        parts.append("bogus=1")
    return f"{builtin.name}({', '.join(parts)})"


def value_expr(rng: random.Random, tensors: list[str], depth: int = 0) -> str:
    """A value expression: tensors, dims as scalars, numbers, operators, `.T`, calls."""
    if depth > 3 or rng.random() < 0.3:
        return rng.choice(tensors + tensors + DIMS + ["2", "0.5", "inf", "true"])
    form = rng.random()
    if form < 0.35:
        op = rng.choice(["@", "@", "+", "-", "*", "/", "//", "**"])
        return f"({value_expr(rng, tensors, depth + 1)} {op} {value_expr(rng, tensors, depth + 1)})"
    if form < 0.42:
        return f"{value_expr(rng, tensors, depth + 1)}.T"
    if form < 0.46:
        return f"{rng.choice(['-', '~'])}{value_expr(rng, tensors, depth + 1)}"
    if form < 0.52:  # comparisons and their joins: masks
        op = rng.choice(["<", "<=", ">", ">=", "==", "!=", "&", "|"])
        return f"({value_expr(rng, tensors, depth + 1)} {op} {value_expr(rng, tensors, depth + 1)})"
    if form < 0.58:
        return f"{rng.choice(tensors)}[{subscript_items(rng)}]"
    if form < 0.62:  # a mask applied to scores
        return (f"where({rng.choice(['M', 'causal_mask(N)', 'causal_mask(N, L)', '~M'])}, "
                f"{value_expr(rng, tensors, depth + 1)}, {rng.choice(['-inf', '0.0', '-1e9'])})")
    return call(rng, tensors, depth)


def subscript_items(rng: random.Random) -> str:
    """The inside of a subscript: indices, slices, `...`, `None`, negative bounds."""
    items = []
    for _ in range(rng.randint(1, 4)):
        form = rng.random()
        if form < 0.25:
            items.append(rng.choice(["0", "-1", "1", "N - 1", "d"]))
        elif form < 0.7:
            start = rng.choice(["", "", "1", "-2", "d // 2", "H"])
            stop = rng.choice(["", "", "N", "-1", "2", "d // 2"])
            step = rng.choice(["", "", ":2", ":-1", ":0"])
            items.append(f"{start}:{stop}{step}")
        else:
            items.append(rng.choice(["...", "None", ":"]))
    return ", ".join(items)


def typed_spec(rng: random.Random) -> str:
    lines = [PREAMBLE]
    tensors = list(TENSORS)
    for index in range(rng.randint(1, 8)):
        name = f"T{index}"
        annotation = f": {shape(rng)}" if rng.random() < 0.15 else ""
        keyword = "output " if rng.random() < 0.2 else ""
        lines.append(f"{keyword}{name}{annotation} = {value_expr(rng, tensors)}")
        tensors.append(name)
        if rng.random() < 0.1:
            lines.append(f"assert {rng.choice(tensors)}: {shape(rng)}")
    if rng.random() < 0.3:
        lines.insert(1, f"constraint {dim_expr(rng)} {rng.choice(['==', '<=', '>', '!='])} "
                        f"{dim_expr(rng)}")
    return "\n".join(lines) + "\n"


def pruned_spec(rng: random.Random) -> str:
    """A typed spec with the statements that failed taken out (twice): mostly specs that
    verify, for the run check, which random specs rarely reach."""
    text = typed_spec(rng)
    for _ in range(2):
        failed = {d.span.line for d in check_text(text).diagnostics if d.is_error}
        if not failed:
            break
        text = "\n".join(line for number, line in enumerate(text.split("\n"), start=1)
                         if number not in failed) + "\n"
    return text


def algebra_spec(rng: random.Random) -> str:
    if rng.random() < 0.01:  # each takes up to a second or two: rarely
        return rng.choice(list(blowups.blowups().values()))
    names = [f"a{i}" for i in range(rng.randint(2, 6))]
    lines = [f"dim {', '.join(names)}"]
    if rng.random() < 0.3:
        lines.append(f"dim F = {rng.choice(['1', '2', '5', '64'])}")
        names.append("F")
    if rng.random() < 0.3:
        lines.append(f"dim G = {dim_expr(rng, 1, names)}")
        names.append("G")
    for _ in range(rng.randint(1, 5)):
        op = rng.choice(["==", "==", "==", "!=", "<", "<=", ">", ">="])
        lines.append(f"constraint {dim_expr(rng, 0, names)} {op} {dim_expr(rng, 0, names)}")
    lines.append(f"input X: [{dim_expr(rng, 0, names)}, {dim_expr(rng, 1, names)}]")
    lines.append(f"input Y: [{dim_expr(rng, 0, names)}, {dim_expr(rng, 1, names)}]")
    lines.append(rng.choice(["Z = X + Y", "Z = X @ Y.T", "Z = reshape(X, [-1])",
                             f"Z = split_heads(X, {rng.choice(names)})",
                             f"Z = reshape(X, [{dim_expr(rng, 1, names)}, -1])"]))
    return "\n".join(lines) + "\n"


class GrammarDeriver:
    """Random derivations of the grammar file, so new syntax is fuzzed without new code."""

    def __init__(self) -> None:
        from lark import Lark
        from lark.grammar import NonTerminal

        from shapecheck.syntax.parser import grammar_text

        lark = Lark(grammar_text(), parser="lalr", lexer="basic", start="file")
        self.rules: dict[str, list[list[Any]]] = collections.defaultdict(list)
        for rule in lark.rules:
            self.rules[rule.origin.name].append(list(rule.expansion))
        self.patterns = {t.name: t.pattern for t in lark.terminals}
        self.nonterminal = NonTerminal
        self.height = self._heights()

    def _heights(self) -> dict[str, int]:
        """The least derivation depth of each nonterminal (to stop growing)."""
        height: dict[str, int] = {}
        changed = True
        while changed:
            changed = False
            for name, expansions in self.rules.items():
                for expansion in expansions:
                    needed = [height.get(s.name) for s in expansion if isinstance(s, self.nonterminal)]
                    if all(h is not None for h in needed):
                        value = 1 + max((h for h in needed if h is not None), default=0)
                        if value < height.get(name, 10**9):
                            height[name] = value
                            changed = True
        return height

    def derive(self, rng: random.Random, symbol: str = "stmt", budget: int = 12) -> str:
        out: list[str] = []
        self._derive(rng, symbol, budget, out)
        return " ".join(out)

    def _derive(self, rng: random.Random, symbol: str, budget: int, out: list[str]) -> None:
        expansions = self.rules[symbol]
        if budget <= 0:
            expansions = [min(expansions, key=self._cost)]
        for part in rng.choice(expansions):
            if isinstance(part, self.nonterminal):
                self._derive(rng, part.name, budget - 1, out)
            else:
                out.append(self._terminal(rng, part.name))

    def _cost(self, expansion: list[Any]) -> int:
        return max((self.height.get(s.name, 99) for s in expansion
                    if isinstance(s, self.nonterminal)), default=0)

    def _terminal(self, rng: random.Random, name: str) -> str:
        if name == "NAME":
            return rng.choice(DIMS + TENSORS + sorted(BUILTINS) + ["x", "Y", "α", "row"])
        if name == "INT":
            return rng.choice(["0", "1", "2", "3", "64", "99999999999999999999"])
        if name == "DECIMAL":
            return rng.choice(["0.5", "1e-5", "2.0"])
        if name == "STRING":
            return subscripts(rng, rng.randint(1, 2))
        if name == "_SEP":
            return rng.choice(["\n", ";"])
        pattern = self.patterns.get(name)
        if pattern is not None and pattern.type == "str":
            return str(pattern.value)
        if name == "TRANSPOSE":
            return rng.choice([".T", "^T"])
        return rng.choice(["x", "1"])


_DERIVER: GrammarDeriver | None = None


def grammar_spec(rng: random.Random) -> str:
    global _DERIVER
    if _DERIVER is None:
        _DERIVER = GrammarDeriver()
    statements = [_DERIVER.derive(rng, "stmt", rng.randint(4, 14)) for _ in range(rng.randint(1, 5))]
    return PREAMBLE + "\n".join(statements) + "\n"


def corpus() -> list[str]:
    paths = sorted((ROOT / "examples").rglob("*.attn")) + sorted((ROOT / "tests" / "cases").glob("*.attn"))
    texts = []
    for path in paths:
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    small = [spec for spec in blowups.blowups().values() if len(spec) < 2000]
    return [text for text in texts if len(text) < 8000] + small


_CORPUS: list[str] = []
TOKENS = ["(", ")", "[", "]", ",", "@", "**", ".T", "-1", "dim ", "input ", "output ", ":", "=",
          "==", "<=", ";", "\n", "#", '"', " ", "//", "/", "*", "+", "-", "0", "1", "2", "64",
          "N", "d", "H", "softmax(", "axis=row", "bool", "inf", "\u200b", "\u00ad", "\u202e", "é"]


def mutated_spec(rng: random.Random) -> str:
    if not _CORPUS:
        _CORPUS.extend(corpus())
    text = rng.choice(_CORPUS)
    for _ in range(rng.randint(1, 6)):
        position = rng.randint(0, len(text))
        action = rng.random()
        if action < 0.25:
            text = text[:position] + text[position + rng.randint(1, 12):]
        elif action < 0.5:
            text = text[:position] + rng.choice(TOKENS) + text[position:]
        elif action < 0.65:  # a number changed
            text = re.sub(r"\d+", lambda m: rng.choice(["0", "1", "2", "65", m.group()]), text, count=1)
        elif action < 0.8:  # two lines swapped
            lines = text.split("\n")
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        else:
            text = text[:position] + rng.choice(string.printable) + text[position:]
    return text


def attention_spec(rng: random.Random) -> str:
    """One attention from the differential corpus's writer (``tools/plan_corpus.py``),
    sometimes edited: every variant of it must agree."""
    import plan_corpus

    choice = plan_corpus.Choice(
        rng.choice(plan_corpus.LAYOUTS), rng.choice(plan_corpus.SCALES),
        rng.choice(plan_corpus.BIASES), rng.choice(plan_corpus.MASKS), rng.random() < 0.2,
        rng.random() < 0.3, rng.random() < 0.5, rng.random() < 0.5,
        rng.randrange(len(plan_corpus.LETTERS)), rng.randrange(len(plan_corpus.DIM_LETTERS)))
    text = plan_corpus.Writer(choice).text()
    if rng.random() < 0.3:  # a statement more, read by the output or kept
        extra = rng.choice(["output S2 = softmax(O)", "output P2 = O * 2.0",
                            "output n = sum(O)", "output R = rmsnorm(O)"])
        text += extra + "\n"
    return text


INVISIBLE = ["\u200b", "\u00ad", "\u202e", "\u2066", "\ufeff", "\u00a0", "\u3000"]


def surface_spec(rng: random.Random) -> str:
    """A spec that verifies, changed only on its surface: CRLF line ends, `# noqa`
    comments, invisible characters in comments, strings or code, a statement nested
    deep (near the parser's limit), huge integer constants, trailing spaces, tabs."""
    if not _CORPUS:
        _CORPUS.extend(corpus())
    text = rng.choice(_CORPUS)
    lines = text.split("\n")
    for _ in range(rng.randint(1, 4)):
        number = rng.randrange(len(lines))
        action = rng.random()
        if action < 0.25:
            lines[number] += rng.choice(["  # noqa", "  # noqa: SC401", "  # noqa: SC4",
                                         "  # noqa:SC999", "# noqa: SC301, SC401"])
        elif action < 0.45:
            spot = rng.randint(0, len(lines[number]))
            lines[number] = lines[number][:spot] + rng.choice(INVISIBLE) + lines[number][spot:]
        elif action < 0.6:
            levels = rng.choice([5, 50, 150, 190, 198, 199, 200, 201, 260])
            inner = rng.choice(["X", "Q", "x", "1.0"])
            deep = rng.choice([("exp(" * levels) + inner + ")" * levels,
                               "(" * levels + inner + ")" * levels,
                               "-" * levels + inner, inner + ".T" * levels])
            lines.insert(number, f"deep{number} = {deep}")
        elif action < 0.75:
            huge = rng.choice(["170141183460469231731687303715884105728 ** 32",
                               "9999999999999999999999999999999999999999",
                               "10 ** 29", "2 ** 64 - 1", "(10 ** 40) ** 64"])
            lines.insert(number, rng.choice([f"constraint N <= {huge}",
                                             f"big{number} = ones([{huge}])",
                                             f"input big{number}: [{huge} - N]"]))
        elif action < 0.85:
            lines[number] = lines[number].replace("    ", "\t") + rng.choice([" ", "\t", ""])
        else:
            lines[number] = lines[number].replace(" = ", " = ", 1).replace(",", " ,", 1)
    text = "\n".join(lines)
    return text.replace("\n", "\r\n") if rng.random() < 0.4 else text


def sketch_spec(rng: random.Random) -> str:
    """A spec that declares nothing: the shapes of its names are inferred."""
    tensors = ["X", "Q", "K", "V", "W", "x", "bias"]
    lines = []
    for index in range(rng.randint(1, 5)):
        name = f"T{index}"
        lines.append(f"{name} = {value_expr(rng, tensors, 1)}")
        tensors.append(name)
    if rng.random() < 0.5:
        lines.append(rng.choice(["S = Q @ K.T / sqrt(d)", "P = softmax(Q @ K.T)",
                                 "O = softmax(Q @ K.T / sqrt(d)) @ V", "Y = layernorm(X @ W)"]))
    return "\n".join(lines) + "\n"


GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "typed": typed_spec, "pruned": pruned_spec, "grammar": grammar_spec, "algebra": algebra_spec,
    "mutated": mutated_spec, "attention": attention_spec, "surface": surface_spec,
    "sketch": sketch_spec,
}


# --- checks -----------------------------------------------------------------------------


class Hang(Exception):
    pass


class Problem(Exception):
    """A property that does not hold (a malformed diagnostic, a failed run)."""


def well_formed(program: Program) -> None:
    lines = program.source.split("\n")
    for diagnostic in program.diagnostics:
        code = codes.REGISTRY.get(diagnostic.code)
        if code is None or code.severity is not diagnostic.severity:
            raise Problem(f"unregistered code or severity: {diagnostic}")
        span = diagnostic.span
        if not (1 <= span.line <= span.end_line <= len(lines)):
            raise Problem(f"span outside the text: {diagnostic}")
        if not 1 <= span.column <= len(lines[span.line - 1]) + 1:
            raise Problem(f"column outside its line: {diagnostic}")
        for fix in diagnostic.fixes:
            for edit in fix.edits:
                if not 1 <= edit.span.line <= edit.span.end_line <= len(lines):
                    raise Problem(f"fix edit outside the text: {diagnostic}")


def render_all(program: Program, report: bool) -> None:
    """Every `verify` format (SARIF and GitHub, the slow ones, with the reports) and,
    when ``report``, both reports."""
    result = file_result(program, "spec.attn")
    render([result], "text", color=True, fail_on="error")
    json.loads(render([result], "json", color=False, fail_on="error"))
    if report:
        render([result], "sarif", color=False, fail_on="error")
        render([result], "github", color=False, fail_on="error")
        from shapecheck.report import build_report
        from shapecheck.report import render as render_report

        built = build_report(program, "spec.attn", dict(program.dims.bindings))
        render_report(built, "html")
        render_report(built, "md")


def run_verified(program: Program, seed: int, backends: tuple[str, ...]) -> bool:
    """Run a verified spec at admissible small sizes on every variant
    (:func:`shapecheck.backend.differential.disagreements`: NumPy = torch, fused =
    unfused, intermediates kept or not agree, inputs unchanged, outputs unaliased);
    False if no binding was found, or if the run would need more than 64 MiB
    (constraints can force huge sizes: refusing them is the memory guard's documented
    answer, not a failure). A disagreement raises :class:`Problem`."""
    from shapecheck.backend import MemoryLimitError, compile_spec
    from shapecheck.backend.differential import disagreements

    found = admissible_bindings(program, 1, seed=seed, high=5, attempts=12)
    if not found:
        return False
    bound = found[0]
    try:
        compiled = compile_spec(bound, dims=bound.dims.bindings, max_memory=64 * 2**20)
        compiled.run(seed=0, check_invariants=True)
    except MemoryLimitError:
        return False
    problems = disagreements(bound, seed=seed, backends=backends, max_memory=64 * 2**20)
    if problems:
        raise Problem("variants disagree at " + str(bound.dims.bindings) + ": " + "; ".join(problems[:4]))
    return True


def fixes_never_worsen(text: str, program: Program, limit: int = 3) -> None:
    """Each offered fix, applied alone, leaves no more errors than there were, and the
    diagnostic it was offered for is gone (a fix never makes a file worse)."""
    from shapecheck.messages.diagnostics import MAX_DIAGNOSTICS
    from shapecheck.messages.fixes import apply_edits

    before = sum(1 for d in program.diagnostics if d.is_error)
    offered = [(d, fix) for d in program.diagnostics for fix in d.fixes][:limit]
    for diagnostic, fix in offered:
        fixed = apply_edits(text, fix.edits)
        after = check_text(fixed)
        errors = sum(1 for d in after.diagnostics if d.is_error)
        capped = max(len(program.diagnostics), len(after.diagnostics)) >= MAX_DIAGNOSTICS
        if errors > before and not capped:  # (at the cap, counts say nothing)
            raise Problem(f"the fix {fix.help!r} for {diagnostic.code} line {diagnostic.span.line} "
                          f"leaves {errors} errors, not {before}")


@dataclass
class Tally:
    inputs: int = 0
    internal_errors: int = 0
    hangs: int = 0
    mismatches: int = 0
    verified: int = 0
    ran: int = 0
    cli_runs: int = 0
    oracle_failures: int = 0
    next_index: int = 0  # where a resumed run continues
    cpu_seconds: float = 0.0
    by_generator: collections.Counter[str] = field(default_factory=collections.Counter)
    cpu_by_generator: collections.Counter[str] = field(default_factory=collections.Counter)
    signatures: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def failures(self) -> int:
        return self.internal_errors + self.hangs + self.mismatches + self.oracle_failures

    def save(self, path: Path, seed: int) -> None:
        """The state of a run, written atomically: ``--resume`` continues from it."""
        state = {"seed": seed, **{k: v for k, v in vars(self).items()}}
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state, indent=1, sort_keys=True), encoding="utf-8")
        temporary.replace(path)

    @classmethod
    def load(cls, path: Path, seed: int) -> Tally:
        state = json.loads(path.read_text(encoding="utf-8"))
        if state.pop("seed") != seed:
            raise SystemExit(f"{path} is the state of a run with another --seed")
        tally = cls(**{k: v for k, v in state.items()
                       if k not in ("by_generator", "cpu_by_generator", "signatures")})
        for name in ("by_generator", "cpu_by_generator", "signatures"):
            getattr(tally, name).update(state.get(name, {}))
        return tally


def signature(error: BaseException) -> str:
    """Where an exception came from: its type and the innermost shapecheck frame."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "shapecheck" in f.filename]
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return f"{type(error).__name__} at {where}: {str(error)[:80]}"


def check_one(text: str, rng: random.Random, tally: Tally, report: bool,
              backends: tuple[str, ...] = ("numpy", "torch")) -> str | None:
    """Check one input; the kind of failure ("internal", "mismatch"), or None."""
    program = check_text(text)
    well_formed(program)
    render_all(program, report)
    fixes_never_worsen(text, program)
    if rng.random() < 0.25:  # at drawn sizes too
        bindings = {n: rng.randint(1, 6) for n in rng.sample(DIMS, rng.randint(1, 3))}
        at_sizes = check_text(text, bindings)
        well_formed(at_sizes)
        render_all(at_sizes, False)
    if program.ok and program.outputs:
        tally.verified += 1
        try:
            if run_verified(program, rng.randrange(1000), backends):
                tally.ran += 1
        except Problem:
            raise
        except Exception as error:  # noqa: BLE001 - every failure of a verified spec counts
            raise Mismatch(error) from error
    return None


class Mismatch(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


def _alarm(signum: int, frame: Any) -> None:
    raise Hang()


def fuzz_one(index: int, args: argparse.Namespace, tally: Tally, failures: Path) -> None:
    rng = random.Random(f"{args.seed}:{index}")
    kind = list(GENERATORS)[index % len(GENERATORS)]
    started = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, args.hang)
    text = ""
    try:
        text = GENERATORS[kind](rng)
        tally.inputs += 1
        tally.by_generator[kind] += 1
        check_one(text, rng, tally, report=index % args.report_every == 0,
                  backends=tuple(args.backends.split(",")))
        problem = None
    except Hang:
        tally.hangs += 1
        problem = ("hang", "hang", "")
    except Problem as failed:
        tally.oracle_failures += 1
        problem = ("oracle", str(failed)[:120], "".join(traceback.format_exception(failed)))
    except Mismatch as mismatch:
        tally.mismatches += 1
        error = mismatch.error
        problem = ("mismatch", signature(error), "".join(traceback.format_exception(error)))
    except Exception as error:  # noqa: BLE001 - an internal error is what we look for
        tally.internal_errors += 1
        problem = ("internal", signature(error), "".join(traceback.format_exception(error)))
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        spent = time.process_time() - started
        tally.cpu_seconds += spent
        tally.cpu_by_generator[kind] += spent
        tally.next_index = index + 1
    if problem is None:
        return
    what, sig, trace = problem
    tally.signatures[f"{what}: {sig}"] += 1
    failures.mkdir(parents=True, exist_ok=True)
    path = failures / f"{what}-{args.seed}-{index}.attn"
    path.write_text(text, encoding="utf-8")
    path.with_suffix(".txt").write_text(f"{kind} input {index} (seed {args.seed})\n{trace}",
                                        encoding="utf-8")
    if args.only is not None:
        print(trace)


# --- the command line, in a sample -----------------------------------------------------


def cli_batch(texts: list[str], tally: Tally, failures: Path) -> None:
    """`verify` on a folder of inputs, then `run`, `report` and `explain` on one of them."""
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for number, text in enumerate(texts):
            path = Path(folder) / f"f{number:03d}.attn"
            path.write_text(text, encoding="utf-8")
            paths.append(path)
        commands = [["verify", "--format", "json", folder],
                    ["run", str(paths[0]), "--dim", "N=3", "--dim", "d=2", "--dim", "H=2",
                     "--dim", "L=3", "--dim", "B=2"],
                    ["report", str(paths[0]), "-o", str(Path(folder) / "out.html")],
                    ["report", str(paths[-1]), "-o", str(Path(folder) / "out.md")],
                    ["explain", random.Random(len(texts)).choice(sorted(codes.REGISTRY))]]
        for command in commands:
            tally.cli_runs += 1
            process = subprocess.run([sys.executable, "-m", "shapecheck", *command],
                                     capture_output=True, text=True, timeout=600, check=False)
            bad = process.returncode not in (0, 1) or "Traceback" in process.stderr \
                or "internal error" in process.stderr.lower()
            if command[0] == "verify" and not bad:
                document = json.loads(process.stdout)
                bad = document["summary"]["files"] != len(texts)
            if bad:
                tally.internal_errors += 1
                tally.signatures[f"cli {command[0]}: exit {process.returncode}"] += 1
                failures.mkdir(parents=True, exist_ok=True)
                keep = failures / f"cli-{command[0]}-{int(time.time() * 1000)}"
                keep.mkdir()
                for path in paths:
                    (keep / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
                (keep / "stderr.txt").write_text(
                    f"{command}\nexit {process.returncode}\n{process.stderr[-4000:]}",
                    encoding="utf-8")


def indices(args: argparse.Namespace) -> Iterator[int]:
    if args.only is not None:
        yield args.only
        return
    start = time.monotonic()
    index = args.start
    while (args.count is None or index < args.start + args.count) and (
            args.seconds is None or time.monotonic() - start < args.seconds):
        yield index
        index += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=None, help="inputs to try")
    parser.add_argument("--seconds", type=float, default=None, help="time budget (wall clock)")
    parser.add_argument("--start", type=int, default=0, help="first input index")
    parser.add_argument("--only", type=int, default=None, help="replay one input index")
    parser.add_argument("--hang", type=float, default=10.0, help="CPU seconds that make a hang")
    parser.add_argument("--cli-every", type=int, default=200,
                        help="one input in N goes through the command line (0: never)")
    parser.add_argument("--report-every", type=int, default=10,
                        help="one input in N is also rendered as SARIF, GitHub and reports")
    parser.add_argument("--failures", type=Path, default=Path("fuzz-failures"))
    parser.add_argument("--progress", type=int, default=1000, help="print counts every N inputs")
    parser.add_argument("--backends", default="numpy,torch",
                        help="the backends every variant of a verified spec runs on")
    parser.add_argument("--state", type=Path, default=None,
                        help="save the run's state here as it goes (every --progress inputs)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run whose --state is given, where it stopped")
    args = parser.parse_args(argv)
    if args.count is None and args.seconds is None and args.only is None:
        args.count = 1000
    signal.signal(signal.SIGPROF, _alarm)
    tally = Tally()
    if args.resume:
        if args.state is None:
            parser.error("--resume needs --state")
        if args.state.exists():
            tally = Tally.load(args.state, args.seed)
            args.start = tally.next_index
            print(f"resuming at input {args.start} ({tally.inputs} done)", flush=True)
    batch: list[str] = []
    started = time.monotonic()
    for index in indices(args):
        fuzz_one(index, args, tally, args.failures)
        if args.cli_every and index % args.cli_every == 0:
            rng = random.Random(f"{args.seed}:{index}")
            batch.append(GENERATORS[list(GENERATORS)[index % len(GENERATORS)]](rng))
            if len(batch) >= 10:
                cli_batch(batch, tally, args.failures)
                batch = []
        if args.progress and tally.inputs % args.progress == 0:
            report(tally, time.monotonic() - started)
            if args.state is not None:
                tally.save(args.state, args.seed)
    if batch:
        cli_batch(batch, tally, args.failures)
    report(tally, time.monotonic() - started)
    if args.state is not None:
        tally.save(args.state, args.seed)
    return 1 if tally.failures else 0


def report(tally: Tally, elapsed: float) -> None:
    print(f"[{elapsed:7.0f} s] inputs {tally.inputs} ({dict(tally.by_generator)}), "
          f"internal errors {tally.internal_errors}, hangs {tally.hangs}, "
          f"mismatches {tally.mismatches}, oracle failures {tally.oracle_failures}; "
          f"verified {tally.verified}, ran {tally.ran}, CLI runs {tally.cli_runs}; "
          f"CPU {tally.cpu_seconds:.0f} s (" + ", ".join(
              f"{k} {v:.0f} s" for k, v in sorted(tally.cpu_by_generator.items())) + ")",
          flush=True)
    for what, count in tally.signatures.most_common(15):
        print(f"    {count:6d}  {what}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
