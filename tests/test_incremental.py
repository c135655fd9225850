"""Incremental checking gives what a full check gives.

The language server checks each new version of a document reusing the statements
that did not change (:class:`shapecheck.lsp.analysis.IncrementalParser`) and what
checking them did (:class:`shapecheck.passes.incremental.Memo`). After every edit of a series
— statements edited in the middle, lines inserted above everything, a dim or a
constraint that every statement depends on changed, names renamed, definitions moved
above their uses, syntax errors, random line edits — its diagnostics, shapes and
attention patterns must be exactly those of a fresh ``check_text`` of the same text
(what ``verify`` reports)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from shapecheck.api import check_text
from shapecheck.passes.incremental import Memo
from shapecheck.lsp.analysis import Documents

HEADER = """\
dim N, d, H
dim D_model
constraint D_model == H * d
input X0: [N, D_model]
param W_Q: [D_model, H * d]
param W_K: [D_model, H * d]
param W_V: [D_model, H * d]
param W_O: [H * d, D_model]
"""

BLOCK = """\
Q{i} = split_heads(X{i} @ W_Q, H)
K{i} = split_heads(X{i} @ W_K, H)
V{i} = split_heads(X{i} @ W_V, H)
S{i}: [H, N, N] = Q{i} @ K{i}.T / sqrt(d)
P{i} = softmax(S{i}, axis=row)
O{i} = merge_heads(P{i} @ V{i})
Y{i}: [N, D_model] = O{i} @ W_O
X{j} = layernorm(X{i} + Y{i})
"""


def spec(blocks: int = 6) -> str:
    return HEADER + "".join(BLOCK.format(i=i, j=i + 1) for i in range(blocks))


def _types(program):
    """The type of every expression, in document order, by span (hovers and inlay hints
    read these), with its call and subscript plan (what `run` executes)."""
    found = []
    stack = list(reversed(program.statements))
    while stack:
        node = stack.pop()
        if isinstance(node, (tuple, list)):
            stack.extend(reversed(node))
        elif hasattr(node, "__slots__") and hasattr(node, "span"):
            if id(node) in program.types:
                found.append((type(node).__name__, node.span, program.types[id(node)],
                              program.calls.get(id(node)), program.subscripts.get(id(node))))
            stack.extend(reversed([getattr(node, slot) for slot in node.__slots__]))
    return found


def _fingerprint(program):
    patterns = [(p.statement.span, p.output.span, p.softmax_axis, p.axis_ok, p.scale_ok,
                 p.mask_ok, p.output_roles, p.weights_roles, p.softmax_roles)
                for p in program.meaning.patterns]
    return (
        [(d.code, d.span, d.message, d.notes, d.help, d.fixes) for d in program.diagnostics],
        program.shapes(), program.outputs, _types(program), patterns,
        [(t.name, t.kind, t.value, t.span, t.name_span) for t in program.tensors.values()],
    )


class Editor:
    """One document edited through the server's analysis, checked against a full check."""

    def __init__(self, text: str) -> None:
        self.documents = Documents()
        self.uri = "file:///nowhere/incremental.attn"
        self.version = 0
        self.lines = text.split("\n")
        self.reused: list[int] = []
        self.check()

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def check(self) -> None:
        self.version += 1
        text = self.text
        analysis = self.documents.analyse(self.uri, text, self.version)
        fresh = check_text(text, warn_unknown_bindings=False)
        assert _fingerprint(analysis.program) == _fingerprint(fresh), text
        self.reused.append(self.documents._memos[self.uri].reused)

    def replace(self, old: str, new: str, count: int = 1) -> None:
        text = self.text
        assert old in text, old
        self.lines = text.replace(old, new, count).split("\n")
        self.check()

    def insert(self, index: int, line: str) -> None:
        self.lines.insert(index, line)
        self.check()

    def delete(self, index: int) -> None:
        del self.lines[index]
        self.check()


@pytest.mark.parametrize("every", [Memo.CHECKPOINT_EVERY, 4])
def test_a_series_of_edits_gives_what_a_full_check_gives(every, monkeypatch):
    monkeypatch.setattr(Memo, "CHECKPOINT_EVERY", every)
    editor = Editor(spec())
    editor.replace("Q3 @ K3.T", "Q3 @ K3")  # an error in the middle
    editor.replace("Q3 @ K3", "Q3 @ K3.T")  # and fixed
    assert editor.reused[-1] > 30  # most statements were not checked again
    editor.insert(0, "# a comment above everything")  # every statement moves down
    assert editor.reused[-1] > 30
    editor.insert(1, "")
    editor.replace("dim N, d, H", "dim N, d, H, E")  # a new, unused dim
    editor.replace("dim N, d, H, E", "dim N, d, H")
    editor.replace("constraint D_model == H * d", "constraint D_model == 2 * H * d")
    editor.replace("constraint D_model == 2 * H * d", "constraint D_model == H * d")
    editor.replace("dim N, d, H\n", "dim N, H\n")  # a dim every statement uses is gone
    editor.replace("dim N, H\n", "dim N, d, H\n")
    editor.replace("param W_Q: [D_model, H * d]", "param W_Q: [D_model, d]")  # used everywhere
    editor.replace("param W_Q: [D_model, d]", "param W_Q: [D_model, H * d]")
    editor.replace("X3 = layernorm", "X3b = layernorm")  # later uses are undefined
    editor.replace("X3b = layernorm", "X3 = layernorm")
    editor.replace("Y1: [N, D_model]", "Y1: [N, N]")  # an annotation that fails
    editor.replace("Y1: [N, N]", "Y1: [N, D_model]")
    editor.insert(12, "T = X4 + X0")  # a use above the definition
    editor.insert(12, "X4 = X0")  # now defined here, and again below: a redefinition
    editor.delete(12)
    editor.delete(12)
    editor.insert(20, "Z = S2 + 1  # noqa")  # a noqa that suppresses nothing
    editor.insert(21, "Z = S1")  # redefined
    editor.delete(21)
    editor.delete(20)
    editor.replace("P2 = softmax(S2, axis=row)", "P2 = softmax(S2, axis=col)")  # meaning
    editor.replace("P2 = softmax(S2, axis=col)", "P2 = softmax(S2, axis=row)")
    editor.replace("O4 = merge_heads(P4 @ V4)", "O4 = merge_heads(P4 @ V4")  # syntax error
    editor.replace("O4 = merge_heads(P4 @ V4\n", "O4 = merge_heads(P4 @ V4)\n")
    editor.lines.append("output X6")
    editor.check()
    editor.replace("output X6", "output X6: [N, d]")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_line_edits_give_what_a_full_check_gives(seed, monkeypatch):
    # Checkpoints of the meaning pass every few statements, so that edits land between many.
    monkeypatch.setattr(Memo, "CHECKPOINT_EVERY", 3)
    rng = random.Random(seed)
    editor = Editor(spec(4))
    names = ["X1", "Q2", "S0", "P3", "W_O", "d", "H", "N", "D_model", "Y2", "zz"]
    for _ in range(25):
        lines = editor.lines
        index = rng.randrange(len(lines))
        action = rng.randrange(7)
        if action == 0:
            editor.delete(index)
        elif action == 1:
            editor.insert(rng.randrange(len(lines) + 1), lines[index])  # a copy elsewhere
        elif action == 2:
            other = rng.randrange(len(lines))
            lines[index], lines[other] = lines[other], lines[index]
            editor.check()
        elif action == 3:
            words = lines[index].split(" ")
            words[rng.randrange(len(words))] = rng.choice(names)
            lines[index] = " ".join(words)
            editor.check()
        elif action == 4:
            editor.insert(index, rng.choice(["# moved", "", "dim E", "constraint N >= 2"]))
        elif action == 5:
            lines[index] = lines[index].replace(".T", "", 1).replace("H * d", "d", 1)
            editor.check()
        else:  # what the meaning pass sees: the softmax's axis, the scale
            lines[index] = lines[index].replace("axis=row", "axis=col").replace(
                "/ sqrt(d)", "/ sqrt(N)")
            editor.check()


def test_a_memo_is_the_checker_run():
    """The memo on its own: the same program as `check_text`, and reuse across runs."""
    from shapecheck.api import check_parsed

    memo = Memo()
    text = spec(3)
    first = check_parsed(text, None, memo=memo)
    assert memo.reused == 0 and _fingerprint(first) == _fingerprint(check_text(text))
    # A new parse: new trees, so nothing is reused, and nothing stale leaks in.
    edited = text.replace("S1: [H, N, N]", "S1: [H, N, d]")
    second = check_parsed(edited, None, memo=memo)
    assert memo.reused == 0 and _fingerprint(second) == _fingerprint(check_text(edited))


TRICKY = """\
# a spec whose statements share lines and span lines
dim N, d  # two dims
input Q: [N, d]; input K: [N, d]
input V: [N,
          d]
# a comment line

S = Q @ K.T / sqrt(d); P = softmax(S,
                                   axis=row)
O = P @ V  # noqa
T = einsum("ij,jk->ik", P, V)
"""


@pytest.mark.parametrize("seed", range(6))
def test_character_edits_give_what_a_full_parse_gives(seed):
    """Edits of single characters anywhere — inside multi-line statements, next to `;`,
    in comments and strings, unbalancing brackets — parsed incrementally, then checked."""
    rng = random.Random(seed)
    editor = Editor(TRICKY)
    alphabet = ["(", ")", "[", "]", ";", "\n", " ", "#", '"', "x", "K", ".T", "=", ":"]
    for _ in range(30):
        text = editor.text
        where = rng.randrange(len(text) + 1)
        if rng.random() < 0.5 and where < len(text):
            text = text[:where] + text[where + 1:]
        else:
            text = text[:where] + rng.choice(alphabet) + text[where:]
        editor.lines = text.split("\n")
        editor.check()


def test_parsing_again_reuses_the_statements_around_an_edit():
    from shapecheck.lsp.analysis import IncrementalParser
    from shapecheck.syntax.parser import parse

    text = spec(6)
    parser = IncrementalParser()
    first = parser.parse(text)
    edited = text.replace("S3: [H, N, N] = Q3 @ K3.T", "S3: [H, N, N] = Q3 @ K3")
    second = parser.parse(edited)
    assert parser.reused == len(second.statements) - 1
    changed = [i for i, (a, b) in enumerate(zip(first.statements, second.statements))
               if a is not b]
    assert len(changed) == 1
    assert second.statements[changed[0]] == parse(edited).statements[changed[0]]
    moved = parser.parse("# above\n" + edited)
    assert parser.reused == len(moved.statements)
    assert moved.statements == parse("# above\n" + edited).statements
    # A statement typed above a leading comment, then one inside it.
    added = parser.parse("X = 1\n# above\n" + edited)
    assert added.statements == parse("X = 1\n# above\n" + edited).statements
    assert parser.reused == len(added.statements) - 1
    inside = parser.parse("X = 1\n# ab\nZ = 2\nove\n" + edited)
    assert inside.statements == parse("X = 1\n# ab\nZ = 2\nove\n" + edited).statements


EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.attn"))


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.stem)
def test_edits_of_every_example_give_what_a_full_check_gives(example, monkeypatch):
    """Every construct of the language (slices, einsum, masks, sketches...) through the
    incremental path: lines moved, removed, duplicated and retyped in each example."""
    monkeypatch.setattr(Memo, "CHECKPOINT_EVERY", 2)
    rng = random.Random(example.stem)
    editor = Editor(example.read_text(encoding="utf-8"))
    for _ in range(12):
        lines = editor.lines
        index = rng.randrange(len(lines))
        action = rng.randrange(4)
        if action == 0:
            editor.delete(index)
        elif action == 1:
            editor.insert(rng.randrange(len(lines) + 1), lines[index])
        elif action == 2:
            editor.insert(0, "# moved")
        else:
            lines[index] = lines[index].replace(".T", "", 1).replace(":", ": ", 1)
            editor.check()


def test_a_dim_edit_checks_again_only_what_involves_the_dims_it_changes():
    editor = Editor(spec())
    statements = 6 * 8
    editor.replace("dim D_model\n", "dim D_model = 512\n")  # D_model fixed: H and d stay free
    # The scores, weights and heads of each block ([H, N, N], [H, N, d]) never name D_model.
    assert editor.reused[-1] >= 6 * 3
    # Back: the relation 512 == H * d is gone, but no proof of those statements used it.
    editor.replace("dim D_model = 512\n", "dim D_model\n")
    assert editor.reused[-1] >= 6 * 3
    # A proof that needs the relation (N*H*d == N*512), then the relation removed: the
    # statement that relied on it is checked again (and now fails), the others are not.
    editor.replace("dim D_model\n", "dim D_model = 512\n")
    editor.lines.append("R = reshape(O0, [N, 512])")
    editor.check()
    editor.replace("dim D_model = 512\n", "dim D_model\n")
    assert editor.reused[-1] >= 6 * 3
    editor.delete(len(editor.lines) - 1)
    editor.replace("dim N, d, H\n", "dim N, d, H, E\nconstraint E >= 2\n")  # nothing uses E
    assert editor.reused[-1] == statements + 5  # every tensor statement (and declaration)
    editor.replace("constraint E >= 2\n", "constraint E >= 3\n")
    assert editor.reused[-1] == statements + 5
    editor.replace("constraint E >= 3\n", "constraint N >= E\n")  # now N's bound changes
    assert editor.reused[-1] < 6 * 3
    editor.replace("constraint N >= E\n", "")
    editor.replace("dim N, d, H, E\n", "dim N, d, H, E\ndim k = N // 2\n")  # a derived dim
    editor.replace("dim k = N // 2\n", "dim k = d // 2\n")  # redefined: its dims change
    editor.replace("dim k = d // 2\n", "dim k = d\n")
    editor.replace("constraint D_model == H * d\n", "constraint D_model == H * d\nconstraint d == 64\n")
    editor.replace("constraint d == 64\n", "constraint H == 8\n")
    editor.replace("constraint H == 8\n", "constraint H == 8\nconstraint d >= H\n")
    editor.replace("constraint d >= H\n", "constraint d != H\n")
    editor.replace("constraint d != H\n", "")
    editor.replace("dim D_model\n", "dim D_model = 8\n")  # 8 == H * d with H == 8: d is 1
    editor.replace("constraint H == 8\n", "")
    editor.replace("dim D_model = 8\n", "dim D_model = 7\n")  # no H * d is 7 with ... H free


def test_a_dim_edit_that_keeps_every_answer_resumes_the_meaning_pass():
    editor = Editor(spec())
    memo = editor.documents._memos[editor.uri]
    editor.replace("constraint D_model == H * d\n", "constraint D_model == d * H * 1\n")
    assert memo.resumed_at > 0  # the same relation, reworded: the pass went on where it was
    editor.replace("constraint D_model == d * H * 1\n", "constraint D_model == H * d\n")
    assert memo.resumed_at > 0
    # A relation added can prove what was not proved: the pass follows everything again
    # (the scale by sqrt(D_model) is SC404 only once D_model is known to be H times d).
    editor.replace("S3: [H, N, N] = Q3 @ K3.T / sqrt(d)", "S3: [H, N, N] = Q3 @ K3.T / sqrt(D_model)")
    editor.replace("constraint D_model == H * d\n", "")
    editor.replace("dim D_model\n", "dim D_model\nconstraint D_model == H * d\n")
    assert memo.resumed_at == 0
    assert any(d.code == "SC404" for d in editor.documents.latest(editor.uri).program.diagnostics)
    editor.replace("constraint D_model == H * d\n", "constraint D_model == H * d  # reworded\n")
    assert memo.resumed_at > 0
