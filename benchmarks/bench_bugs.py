"""The bug benchmark (issue 31): the bugs attention code ships, planted in real modules.

Source-level mutation operators, one or more per bug class, are applied at every site
where they apply in real attention modules: the zoo's modules (tools/zoo.py: tiny
``transformers`` models, the attention module's real call captured), their real source
read with ``inspect.getsource``, each mutant compiled at its file's own line numbers and
patched in (the function of the module, or the attention's method); and the Python
examples (examples/python/), a mutated copy of the file traced. Each mutant is

1. **run** on the captured inputs: a mutant whose output equals the original's is
   *equivalent* (counted apart, never a miss); one that raises is *loud* (any run shows
   it: counted apart);
2. **traced and verified** (what ``shapecheck verify FILE:TARGET`` does): *flagged* when a
   diagnostic (or one of its notes) points at a line of the mutated statement;
3. **conformed**: the spec ``extract`` writes for the *original* module, run against the
   mutant (``conform``): *caught* when the numbers differ.

The originals are verified too: any diagnostic on one is a false alarm. Classes that
need a stated convention (an inverted padding mask, a relative bias's sign) are reported
apart. torch is imported once, each module traced once per mutant; ``--ci`` runs the
subset CI runs (tests/test_bugbench.py).

Usage: python benchmarks/bench_bugs.py [--ci | --public | --cases llama__eager,...] [-v]
       [--markdown]

``--public`` runs the operators on the public corpora's modules (tests/data/torch/public*,
code copied from public projects, called as their models call it; the ``CLEAN`` lists of
tests/test_torch_public.py and tests/test_torch_public6.py .. 9 name them): code the zoo's
transformers modules do not write.
"""

from __future__ import annotations

import argparse
import ast
import copy
import inspect
import os
import re
import sys
import textwrap
import time
import types
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

EXAMPLES = ROOT / "examples" / "python"
PUBLIC = ROOT / "tests" / "data" / "torch"

# --- the bug classes and their operators ---------------------------------------------------

CLASSES = {
    "softmax_axis": "softmax over the wrong axis",
    "scale": "scale by another width, squared, twice or missing",
    "mask_transposed": "mask transposed",
    "mask_inverted": "mask inverted",
    "mask_query_axis": "mask on the query axis",
    "mask_after_softmax": "mask added after the softmax",
    "causal_triangle": "wrong causal triangle",
    "causal_alignment": "causal alignment (top-left with a cache)",
    "gqa_tiled": "grouped K/V heads tiled, not repeated",
    "rotary": "rotary on V or on one side only",
    "heads_no_transpose": "heads split or merged without the transpose",
    "windows_no_permute": "windows partitioned without the permute",
    "pt_v": "P.T @ V",
    "kv_order": "K and V in different orders",
    "cross_roles": "Q and K swapped in cross-attention",
    "bias_transposed": "relative-position bias transposed",
    "bias_after_softmax": "bias added after the softmax",
    "batch_axis": "attention over the batch axis",
}
#: Classes whose bug is only a bug under a stated convention (reported apart).
CONVENTION = {"mask_inverted_padding", "bias_sign"}  # an input mask inverted; a bias's sign


@dataclass(frozen=True)
class Mutation:
    """One planted bug: line number -> new text (physical lines of the function's file);
    ``at`` is the line the operator matched. A diagnostic must point at a statement the
    mutant rewrote: ``at``'s or an edited line's (a mask moved after the softmax is written
    on the softmax's line)."""

    klass: str
    operator: str
    edits: tuple[tuple[int, str], ...]
    at: int


Operator = Callable[[list[str], int, int], Iterator[tuple[str, str, dict[int, str]]]]
OPERATORS: list[Operator] = []


def operator(function: Operator) -> Operator:
    OPERATORS.append(function)
    return function


_SOFTMAX_LAST = re.compile(r"(softmax\([^\n]*?dim\s*=\s*)(-1|3)\b")
_SOFTMAX_METHOD = re.compile(r"(\.softmax\(\s*)(-1|3)\b")


@operator
def softmax_axis(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    line = lines[i]
    for pattern in (_SOFTMAX_LAST, _SOFTMAX_METHOD):
        if pattern.search(line):
            yield "softmax_axis", "dim -2", {i: pattern.sub(r"\g<1>-2", line, count=1)}


_SCALED = re.compile(r"(\)|\w)\s*([*/])\s*(self\.scaling|scaling|self\.scale\b|scale\b|"
                     r"self\.norm_factor|self\.scale_attn|math\.sqrt\(self\.head_dim\)|"
                     r"self\.inv_norm_factor)")


@operator
def scale(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    line = lines[i]
    found = _SCALED.search(line)
    if not found or "matmul" not in line and "@" not in line and "bmm" not in line \
            and "baddbmm" not in line:
        return
    op, factor = found.group(2), found.group(3)
    head = line[:found.start(2)]
    tail = line[found.end(3):]
    scores = _scores_operand(line)
    yield "scale", "missing", {i: head.rstrip() + tail}
    yield "scale", "squared", {i: f"{head}{op} ({factor}) ** 2{tail}"}
    yield "scale", "twice", {i: f"{head}{op} {factor} {op} {factor}{tail}"}
    if scores:
        power = "-0.5" if op == "*" else "0.5"
        for what, size in (("sequence", f"{scores}.shape[-2]"), ("heads", f"{scores}.shape[1]"),
                           ("model width", f"({scores}.shape[1] * {scores}.shape[-1])")):
            yield "scale", f"by the {what}", {i: f"{head}* {size} ** {power}{tail}".replace(
                "* " + size + " ** 0.5", "/ " + size + " ** 0.5")}


def _scores_operand(line: str) -> str | None:
    """The query operand of a score product on LINE (``matmul(query, ...)``)."""
    found = re.search(r"(?:matmul|bmm)\(\s*([\w.]+)\s*,", line) or re.search(r"([\w.]+)\s*@", line)
    return found.group(1) if found else None


_MASK_ADD = re.compile(r"^(\s*)(\w+)\s*(?:=\s*\2\s*\+|\+=)\s*(.+?)\s*$")
_MASK_FILL = re.compile(r"masked_fill\(\s*")


def _first_argument(line: str, start: int) -> int | None:
    """The end of the call argument that starts at START (brackets balanced), or None."""
    depth = 0
    for k in range(start, len(line)):
        if line[k] in "([{":
            depth += 1
        elif line[k] in ")]}":
            if depth == 0:
                return None
            depth -= 1
        elif line[k] == "," and depth == 0:
            return k
    return None


def _additive(lines: list[str], i: int) -> tuple[str, str, str] | None:
    """``S = S + X`` / ``S += X`` on line I: (indent, S, X)."""
    found = _MASK_ADD.match(lines[i])
    if not found or "(" in found.group(2):
        return None
    return found.group(1), found.group(2), found.group(3)


def _parameters(lines: list[str]) -> set[str]:
    """The parameter names of the function whose source is LINES."""
    tree = ast.parse(textwrap.dedent("\n".join(lines)))
    function = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
    arguments = function.args
    return {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}


def _inverted_class(lines: list[str], term: str) -> str:
    """An input mask inverted is a question of its convention (which value keeps: docs
    /bugs.md), reported apart; a mask the function builds has its meaning in the code."""
    name = re.match(r"[~(\s]*(\w+)", term)
    return "mask_inverted_padding" if name and name.group(1) in _parameters(lines) else "mask_inverted"


def _is_mask(term: str) -> bool:
    return "mask" in term.lower()


def _next_softmax(lines: list[str], i: int, scores: str) -> int | None:
    for j in range(i + 1, min(len(lines), i + 8)):
        if "softmax" in lines[j] and scores in lines[j]:
            return j
    return None


@operator
def masks(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    line = lines[i]
    added = _additive(lines, i)
    if added and _is_mask(added[2]):
        indent, scores, term = added
        t = f"({term}).transpose(-1, -2)"
        yield "mask_transposed", "transpose", {i: f"{indent}{scores} = {scores} + {t}"}
        yield _inverted_class(lines, term), "additive inverted", {
            i: f"{indent}{scores} = {scores} + torch.where(({term}) == 0, "
               f"torch.finfo({scores}.dtype).min, 0.0).to({scores}.dtype)"}
    fill = _MASK_FILL.search(line)
    end = _first_argument(line, fill.end()) if fill else None
    if fill and end is not None and "softmax" not in line:
        start = fill.end()
        condition = line[start:end].strip()
        inverted = condition[1:] if condition.startswith("~") else f"~({condition})"
        if "==" in condition:
            inverted = condition.replace("==", "!=")
        yield _inverted_class(lines, condition), "fill inverted", {i: line[:start] + inverted + line[end:]}
        yield "mask_transposed", "fill transposed", {
            i: line[:start] + f"({condition}).transpose(-1, -2)" + line[end:]}


@operator
def after_softmax(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    added = _additive(lines, i)
    if not added:
        return
    indent, scores, term = added
    j = _next_softmax(lines, i, scores)
    if j is None or lines[j].rstrip().endswith((",", "(")):
        return
    klass = "mask_after_softmax" if _is_mask(term) else "bias_after_softmax"
    yield klass, "after softmax", {i: f"{indent}pass", j: f"{lines[j].rstrip()} + ({term})"}


_TRIANGLE = re.compile(r"\b(tril|triu)\(")


@operator
def triangle(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    line = lines[i]
    found = _TRIANGLE.search(line)
    if found and "mask" in line.lower() or found and "bias" in line:
        other = "triu" if found.group(1) == "tril" else "tril"
        yield "causal_triangle", "other triangle", {i: line[:found.start(1)] + other + line[found.end(1):]}
    diagonal = re.search(r"diagonal\s*=\s*(\w[\w.\- +]*)", line)
    if found and diagonal:
        yield "causal_alignment", "top-left", {i: line[:diagonal.start()] + "diagonal=0" + line[diagonal.end():]}


_REPEAT = re.compile(r"\[:, :, None, :, :\]\.expand\((\w+), (\w+), (\w+),")
_INTERLEAVE = re.compile(r"(\w+)\.repeat_interleave\(([^,()]+), dim=1\)")


@operator
def gqa(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    line = lines[i]
    found = _REPEAT.search(line)
    if found:
        b, kv, rep = found.groups()
        yield "gqa_tiled", "tile", {i: line[:found.start()] + f"[:, None, :, :, :].expand({b}, {rep}, {kv},"
                                    + line[found.end():]}
        # the reshape that follows must merge (rep, kv) in that order: it already does by size
    found = _INTERLEAVE.search(line)
    if found:
        x, n = found.groups()
        yield "gqa_tiled", "tile", {i: line[:found.start()] + f"{x}.repeat(1, {n}, 1, 1)" + line[found.end():]}


_ROTARY = re.compile(r"^(\s*)(\w+), (\w+) = (apply_rotary_pos_emb\w*)\((\w+), (\w+),(.*)$")


@operator
def rotary(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    found = _ROTARY.match(lines[i])
    if not found:
        return
    indent, q, k, function, qa, ka, rest = found.groups()
    yield "rotary", "query only", {i: f"{indent}{q}, _ = {function}({qa}, {ka},{rest}"}
    yield "rotary", "key only", {i: f"{indent}_, {k} = {function}({qa}, {ka},{rest}"}
    value = k.replace("key", "value")
    if value != k:
        yield "rotary", "on V", {i: f"{indent}{q}, {value} = {function}({qa}, {value},{rest}"}


_SPLIT = re.compile(r"\.(view|reshape)\(([^()]*|[^()]*\([^()]*\)[^()]*)\)\.transpose\(1, 2\)")
_MERGE = re.compile(r"\.transpose\(1, 2\)(\.contiguous\(\))?")


@operator
def heads(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    line = lines[i]
    found = _SPLIT.search(line)
    if found:  # [B, N, H, d] read as [B, H, N, d]: the split without its transpose
        new = line[:found.start()] + f".{found.group(1)}({found.group(2)}).flatten(1, 2).unflatten(1, " \
            f"(-1, {_length(line)})).contiguous()" + line[found.end():]
        if _length(line):
            yield "heads_no_transpose", "split", {i: new}
        splits = [j for j, other in enumerate(lines) if _SPLIT.search(other)]
        if splits and splits[0] == i:  # every split read batch-second: attention over the batch
            yield "batch_axis", "batch first", {j: _SPLIT.sub(
                lambda m: f".{m.group(1)}({m.group(2)}).permute(2, 1, 0, 3)", lines[j], count=1)
                for j in splits}
        return
    if re.search(r"\battn_output\b|\bcontext\w*\b|\bout\b", line) and _MERGE.search(line) \
            and "=" in line:
        yield "heads_no_transpose", "merge", {i: _MERGE.sub(lambda m: m.group(1) or "", line, count=1)}


def _length(line: str) -> str | None:
    """The sequence length on a split line (``input_shape[1]`` or ``q_len``...)."""
    if "hidden_shape" in line:
        return "input_shape[1]"
    found = re.search(r"\((\w+), (\w+), (?:self\.)?\w+, (?:self\.)?\w+\)", line)
    return found.group(2) if found else None


_WINDOWS = re.compile(r"\.permute\(0, 1, 3, 2, 4, 5\)(\.contiguous\(\))?(?=\.(view|reshape)\()")


@operator
def windows(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    """A window partition (or its reverse) without the permute that gathers each window's
    rows: ``[B, H/w, w, W/w, w, C]`` viewed as windows as it lies, strips of rows."""
    found = _WINDOWS.search(lines[i])
    if found:
        line = lines[i]
        yield "windows_no_permute", "partition", {
            i: line[:found.start()] + (found.group(1) or "") + line[found.end():]}


_PV = re.compile(r"(matmul|bmm)\(\s*(\w+)\s*,\s*(\w+)\s*\)|(\w+)\s*@\s*(\w+)")


@operator
def pt_v(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    line = lines[i]
    for found in _PV.finditer(line):
        p = found.group(2) or found.group(4)
        v = found.group(3) or found.group(5)
        if p and v and re.search(r"weight|prob|attn\b|^p$|scores", p) and "value" in v or v == "v":
            start, end = found.span(2) if found.group(2) else found.span(4)
            yield "pt_v", "P.T @ V", {i: line[:start] + f"{p}.transpose(-1, -2)" + line[end:]}


_QKV = re.compile(r"^(\s*)(\w*q\w*), (\w*k\w*), (\w*v\w*) = (.+)$")


@operator
def kv_order(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    found = _QKV.match(lines[i])
    if found and "split" in found.group(5) or found and "chunk" in found.group(5) \
            or found and "unbind" in found.group(5):
        indent, q, k, v, rest = found.groups()
        yield "kv_order", "K and V swapped", {i: f"{indent}{q}, {v}, {k} = {rest}"}
    cat = re.search(r"torch\.cat\(\s*[\(\[]\s*(\w+)\s*,\s*(\w+)\s*[\)\]]", lines[i])
    if cat and re.search(r"value|\bv\b", lines[i]):
        a, b = cat.groups()
        yield "kv_order", "V concatenated in the other order", {
            i: lines[i][:cat.start(1)] + f"{b}, {a}" + lines[i][cat.end(2):]}


_PROJECTED = re.compile(r"^(\s*)(\w+) = (self\.\w+)\((\w+)\)(.*)$")


@operator
def cross_roles(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    found = _PROJECTED.match(lines[i])
    if not found or not re.search(r"q_proj|\.q\b|query", found.group(3)):
        return
    indent, name, projection, source, rest = found.groups()
    for j in range(i + 1, min(len(lines), i + 25)):
        other = _PROJECTED.match(lines[j])
        if other and re.search(r"k_proj|\.k\b|key", other.group(3)) and other.group(4) != source:
            context = other.group(4)
            edits = {i: f"{indent}{name} = {projection}({context}){rest}"}
            for m in range(i + 1, min(len(lines), j + 6)):
                kv = _PROJECTED.match(lines[m])
                if kv and kv.group(4) == context and re.search(r"k_proj|v_proj|\.k\b|\.v\b|key|value",
                                                               kv.group(3)):
                    edits[m] = f"{kv.group(1)}{kv.group(2)} = {kv.group(3)}({source}){kv.group(5)}"
            yield "cross_roles", "queries from the context", edits
            return


@operator
def bias(lines: list[str], i: int, first: int) -> Iterator[tuple[str, str, dict[int, str]]]:
    line = lines[i]
    found = re.search(r"\.permute\(\[2, 0, 1\]\)", line)
    if found and "values" in line:
        yield "bias_transposed", "transpose", {i: line[:found.start()] + ".permute([2, 1, 0])"
                                               + line[found.end():]}
    sign = re.search(r"(\w+_position) - (\w+_position)", line)
    if sign:
        yield "bias_sign", "sign", {i: line[:sign.start()] + f"{sign.group(2)} - {sign.group(1)}"
                                    + line[sign.end():]}


# --- where the operators run ---------------------------------------------------------------


@dataclass
class Source:
    """One function of a module's source, as its file has it."""

    file: str
    first: int                  # line number of its first line (decorators included)
    lines: list[str]
    name: str
    owner: Any                  # the class (a method) or the module's globals (a function)
    function: Any

    def statement(self, line: int) -> tuple[int, int]:
        """The lines of the statement LINE belongs to (a diagnostic there is at the line)."""
        tree = ast.parse(textwrap.dedent("\n".join(self.lines)))
        best = (line, line)
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt) and not isinstance(
                    node, ast.FunctionDef | ast.If | ast.For | ast.With | ast.While | ast.Try):
                start, end = node.lineno + self.first - 1, (node.end_lineno or node.lineno) + self.first - 1
                if start <= line <= end and (best == (line, line) or end - start < best[1] - best[0]):
                    best = (start, end)
        return best


def mutations(source: Source) -> list[Mutation]:
    found: list[Mutation] = []
    for i, line in enumerate(source.lines):
        if line.lstrip().startswith("#"):
            continue
        for op in OPERATORS:
            for klass, name, edits in op(source.lines, i, source.first):
                found.append(Mutation(klass, name, tuple((source.first + k, v)
                                                         for k, v in sorted(edits.items())),
                                      source.first + i))
    return found


def function_sources(module: Any) -> list[Source]:
    """The attention module's forward and the functions of its module it calls (the
    attention itself, the rotary, the K/V repeat): where the bugs of each class live."""
    cls = type(module)
    forward = inspect.unwrap(cls.forward)
    home = sys.modules[forward.__module__]
    found = [_source(forward, cls, "forward")]
    seen = {forward}
    queue = [forward]
    while queue:
        code = queue.pop().__code__
        for name in code.co_names:
            value = vars(home).get(name)
            value = inspect.unwrap(value) if callable(value) else value
            if isinstance(value, types.FunctionType) and value not in seen \
                    and value.__module__ == home.__name__:
                seen.add(value)
                queue.append(value)
                found.append(_source(value, vars(home), name))
        for name in code.co_names:  # methods of the module it calls (self._attn, self._split_heads)
            attr = inspect.getattr_static(cls, name, None)
            if isinstance(attr, types.FunctionType) and attr not in seen and name != "forward":
                seen.add(attr)
                queue.append(attr)
                # patched on the class that defines it (a base class's method)
                owner = next(c for c in cls.__mro__ if name in vars(c))
                found.append(_source(inspect.unwrap(attr), owner, name))
    return found


def _source(function: Any, owner: Any, name: str) -> Source:
    lines, first = inspect.getsourcelines(function)
    return Source(inspect.getsourcefile(function) or "", first, [l.rstrip("\n") for l in lines],
                  name, owner, function)


@contextmanager
def patched(source: Source, mutation: Mutation) -> Iterator[None]:
    """The mutant in place of SOURCE's function, at its file's own line numbers."""
    lines = list(source.lines)
    for line, text in mutation.edits:
        lines[line - source.first] = text
    text = textwrap.dedent("\n".join(lines))
    code = compile("\n" * (source.first - 1) + text, source.file, "exec")
    home = sys.modules[source.function.__module__]
    namespace = dict(vars(home))
    exec(code, namespace)  # the module's own source, one line changed
    new = namespace[source.function.__name__]
    if isinstance(source.owner, dict):
        old = source.owner[source.name]
        source.owner[source.name] = new
    else:
        old = source.owner.__dict__[source.name]
        setattr(source.owner, source.name, new)
    try:
        yield
    finally:
        if isinstance(source.owner, dict):
            source.owner[source.name] = old
        else:
            setattr(source.owner, source.name, old)


# --- running one mutant --------------------------------------------------------------------


@dataclass
class Result:
    case: str
    mutation: Mutation
    outcome: str = ""           # "equivalent", "loud", "silent", "untraced"
    flagged: bool = False
    codes: str = ""
    caught: bool = False
    note: str = ""


def _outputs(module: Any, call: dict[str, Any]) -> list[Any]:
    import torch

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        out = module(**copy.deepcopy(call))
    flat = out if isinstance(out, tuple | list) else (out,)
    return [t for t in flat if isinstance(t, torch.Tensor)][:1]


def _same(a: list[Any], b: list[Any]) -> bool:
    import torch

    return len(a) == len(b) and all(x.shape == y.shape and torch.allclose(x, y, atol=1e-5, rtol=1e-4)
                                    for x, y in zip(a, b))


TARGET = "bugbench_target"


#: a case's own factory, by the id of the module it made (the public corpora's): verified
#: through it, shapecheck sees the module built (and can build it again at other sizes,
#: as `verify FILE:FACTORY` does), with the mutated code patched into its class
_FACTORIES: dict[int, Any] = {}


def _register(module: Any, call: dict[str, Any]) -> str:
    """A factory target (``bugbench_target:make``) handing shapecheck MODULE and its call
    (or the case's own factory, where it has one)."""
    holder = types.ModuleType(TARGET)
    holder.make = _FACTORIES.get(id(module)) or (  # type: ignore[attr-defined]
        lambda: (module, copy.deepcopy(call)))
    sys.modules[TARGET] = holder
    return f"{TARGET}:make"


def verified(target: str, *, spec: bool = True) -> tuple[Any, list[Any]]:
    """What ``shapecheck verify TARGET`` shows (a model holding attention layers: layer by
    layer), each diagnostic with its file; and, with ``spec``, the extraction `conform` runs
    the mutants against (None where the module cannot be traced whole)."""
    from shapecheck.pytorch.front import ExtractError, Untraceable, extract
    from shapecheck.pytorch.front.sourcemap import check

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check(target)
        extraction = None
        if spec:
            try:
                extraction = extract(target)
            except (ExtractError, Untraceable):
                pass
    return extraction, [(r.path, d) for r in results for d in r.diagnostics]


def _at(diagnostics: list[Any], file: str, lines: tuple[int, int]) -> bool:
    def here(path: str, span: Any) -> bool:
        return span is not None and lines[0] <= span.line <= lines[1] and (
            os.path.basename(path) == os.path.basename(file))

    return any(here(path, d.span) or any(here(path, n.span) for n in d.notes)
               for path, d in diagnostics)


def _conforms(spec: Any, module: Any) -> bool:
    """Does MODULE (the mutant, patched in place) compute what the original's spec says
    (``conform``)?"""
    from shapecheck.pytorch.conform import conform

    dtype = next((p.dtype for p in module.parameters()), None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = conform(spec.text, spec.function(), dims=spec.bindings, framework="torch",
                             cases=2, dtype="float32" if spec.float32 else "float64")
        return bool(result.ok)
    except Exception:  # the mutant cannot run the spec's cases: conform reports it
        return False
    finally:
        if dtype is not None:
            module.to(dtype)  # conform ran it at the spec's precision


def run_mutant(case: str, module: Any, call: dict[str, Any], source: Source, mutation: Mutation,
               expected: list[Any], spec: Any) -> Result:
    result = Result(case, mutation)
    try:
        with patched(source, mutation):
            return _run_patched(result, module, call, source, mutation, expected, spec)
    except SyntaxError:  # an operator's text that is not Python: no mutant
        result.outcome = "invalid"
        return result


def _run_patched(result: Result, module: Any, call: dict[str, Any], source: Source,
                 mutation: Mutation, expected: list[Any], spec: Any) -> Result:
    try:
        got = _outputs(module, call)
    except Exception as error:
        result.outcome, result.note = "loud", f"{type(error).__name__}: {error}"[:120]
        return result
    if _same(got, expected):
        result.outcome = "equivalent"
        return result
    result.outcome = "silent"
    try:
        _, diagnostics = verified(_register(module, call), spec=False)
    except Exception as error:  # a shapecheck bug on this mutant: shown, counted as a miss
        result.note = f"crash: {type(error).__name__}: {error}"[:120]
        diagnostics = []
    # every statement the mutant rewrote is its line (a mask moved after the softmax is
    # written on the softmax's line)
    result.flagged = any(_at(diagnostics, source.file, source.statement(line))
                         for line in sorted({mutation.at, *(line for line, _ in mutation.edits)}))
    result.codes = " ".join(sorted({d.code for _, d in diagnostics}))
    result.caught = spec is not None and not _conforms(spec, module)
    return result


# --- the cases -----------------------------------------------------------------------------

CI_CASES = ("llama__eager", "example:causal_cache", "example:cross_attention")


@dataclass
class Original:
    case: str
    module: Any
    call: dict[str, Any]
    diagnostics: list[Any] = field(default_factory=list)
    spec: Any = None


def zoo_original(name: str) -> Original:
    import zoo

    family, _, form = name.partition("__")
    family = next(f for f in zoo.FAMILIES if f.replace("-", "_") == family)
    module, call = zoo.capture(family, form)
    return Original(name, module, call)


def example_original(name: str) -> Original:
    import importlib

    module_name = f"bugbench_examples_{name}"
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = loaded
    spec.loader.exec_module(loaded)
    module, call = loaded.make()
    return Original(f"example:{name}", module, call)


def public_original(target: str) -> Original:
    """A module of the public corpora (tests/data/torch/public*: code copied from public
    projects, as their models call it), by its target ``public2/litgpt_attention.py:make``."""
    import importlib.util

    file, _, factory = target.rpartition(":")
    path = PUBLIC / file
    module_name = "bugbench_public_" + re.sub(r"\W", "_", file.removesuffix(".py"))
    sys.path.insert(0, str(path.parent))  # as `python file.py` would: its siblings import
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec and spec.loader
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = loaded
    spec.loader.exec_module(loaded)
    module, call = getattr(loaded, factory)()
    _FACTORIES[id(module)] = getattr(loaded, factory)
    return Original(f"public:{target}", module, call)


#: the test files that list each public corpus's clean targets (their ``CLEAN``), and the
#: folder under tests/data/torch their targets are written from
PUBLIC_LISTS = (("test_torch_public.py", ""), ("test_torch_public6.py", "public6/"),
                ("test_torch_public7.py", "public7/"), ("test_torch_public8.py", "public8/"),
                ("test_torch_public9.py", "public9/"))


def public_cases() -> list[str]:
    """The clean targets of the public corpora's tests (each file's ``CLEAN`` list)."""
    cases: list[str] = []
    for name, folder in PUBLIC_LISTS:
        tree = ast.parse((ROOT / "tests" / name).read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CLEAN"
                                                    for t in node.targets):
                cases += [f"public:{folder}{target}" for target in ast.literal_eval(node.value)]
    return cases


def original(case: str) -> Original:
    kind, _, name = case.partition(":")
    made = example_original(name) if kind == "example" else public_original(name) \
        if kind == "public" else zoo_original(case)
    made.spec, made.diagnostics = verified(_register(made.module, made.call))
    return made


def all_cases() -> list[str]:
    import zoo

    found = [f"example:{p.stem}" for p in sorted(EXAMPLES.glob("*.py")) if not p.stem.startswith("_")]
    return found + [c.name for c in zoo.cases()]


# --- the table -----------------------------------------------------------------------------


@dataclass
class Tally:
    mutants: int = 0
    equivalent: int = 0
    loud: int = 0
    silent: int = 0
    flagged: int = 0
    caught: int = 0


def tally(results: list[Result]) -> dict[str, Tally]:
    table: dict[str, Tally] = defaultdict(Tally)
    for r in results:
        if r.outcome == "invalid":
            continue
        row = table[r.mutation.klass]
        row.mutants += 1
        if r.outcome == "equivalent":
            row.equivalent += 1
        elif r.outcome == "loud":
            row.loud += 1
        else:
            row.silent += 1
            row.flagged += r.flagged
            row.caught += r.caught
    return table


def render(table: dict[str, Tally], originals: list[Original], markdown: bool = False) -> str:
    alarms = sum(1 for o in originals if o.diagnostics)
    head = ("class", "mutants", "equivalent", "loud", "silent", "flagged at line", "recall",
            "caught by conform")
    rows = []
    for klass in list(CLASSES) + sorted(CONVENTION):
        t = table.get(klass, Tally())
        recall = f"{100 * t.flagged / t.silent:.0f}%" if t.silent else "-"
        name = CLASSES.get(klass, klass) + (" (convention)" if klass in CONVENTION else "")
        rows.append((name, t.mutants, t.equivalent, t.loud, t.silent, t.flagged, recall,
                     f"{t.caught}/{t.silent}"))
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    else:
        lines = [f"{head[0]:52} " + " ".join(f"{h[:10]:>10}" for h in head[1:])]
        lines += [f"{row[0][:52]:52} " + " ".join(f"{str(c):>10}" for c in row[1:]) for row in rows]
    lines.append(f"\nfalse alarms on the originals: {alarms}/{len(originals)} cases with a diagnostic")
    return "\n".join(lines)


def run(cases: list[str], verbose: bool = False, limit: int | None = None,
        minutes: float | None = None) -> tuple[list[Result], list[Original]]:
    results: list[Result] = []
    originals: list[Original] = []
    done: set[tuple[Any, ...]] = set()
    began = time.perf_counter()
    for case in cases:
        start = time.perf_counter()
        if minutes and start - began > 60 * minutes:
            print(f"time budget of {minutes} minutes spent: {case} and later cases not run")
            break
        try:
            made = original(case)
        except Exception as error:  # a family not built at these sizes
            print(f"{case}: not built ({type(error).__name__}: {str(error)[:80]})", flush=True)
            continue
        originals.append(made)
        if made.diagnostics:
            print(f"{case}: FALSE ALARM " + "; ".join(f"{d.code} {os.path.basename(p)}:{d.span.line}"
                                                       for p, d in made.diagnostics[:3]), flush=True)
        expected = _outputs(made.module, made.call)
        form = case.partition("__")[2]
        count = 0
        for source in function_sources(made.module):
            for mutation in mutations(source):
                # the same source text copied into another family's file: mutated once per form
                key = (source.name, form, tuple((source.lines[line - source.first].strip(),
                                                 text.strip()) for line, text in mutation.edits))
                if key in done:
                    continue
                done.add(key)
                result = run_mutant(case, made.module, made.call, source, mutation, expected, made.spec)
                results.append(result)
                count += 1
                if verbose and result.outcome == "silent":
                    print(f"  {mutation.klass:20} {mutation.operator:24} line {mutation.at}: "
                          f"flagged={result.flagged} caught={result.caught} {result.codes}", flush=True)
                if limit and count >= limit:
                    break
        print(f"{case}: {count} mutants, {time.perf_counter() - start:.0f} s", flush=True)
    return results, originals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ci", action="store_true", help="the CI subset (under 5 minutes)")
    parser.add_argument("--cases", help="comma-separated cases (zoo names, example:NAME, "
                        "public:FILE:FACTORY)")
    parser.add_argument("--public", action="store_true",
                        help="the public corpora's clean modules (tests/test_torch_public*.py)")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--minutes", type=float, default=None,
                        help="start no case after this many minutes (the full run: 28)")
    options = parser.parse_args(argv)
    import torch  # noqa: F401  (once, before the clock of any case)

    cases = options.cases.split(",") if options.cases else public_cases() if options.public \
        else list(CI_CASES) if options.ci else all_cases()
    start = time.perf_counter()
    minutes = options.minutes if options.minutes is not None else None \
        if options.ci or options.cases or options.public else 28
    results, originals = run(cases, options.verbose, minutes=minutes)
    print()
    print(render(tally(results), originals, options.markdown))
    print(f"\n{len(results)} mutants on {len(originals)} cases in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
