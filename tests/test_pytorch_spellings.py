"""Issue 21 items 2, 5, 6, 7: PyTorch's spellings, rebinding, tuple assignment and slice
writes, executed on both backends and compared with NumPy written out here, and the
diagnostics of their mistakes (issue 18 item 12: a PyTorch habit gets this language's
spelling as its help, never a bare "unexpected character")."""

from __future__ import annotations

import numpy as np
import pytest

from shapecheck.api import check_text
from shapecheck.backend import compile_spec
from shapecheck.syntax.spellings import FUNCTIONS, METHODS

RNG = np.random.default_rng(21)
BACKENDS = ("numpy", "torch")


def run(source: str, backend: str, dims: dict[str, int] | None = None,
        **arrays: np.ndarray) -> dict[str, np.ndarray]:
    spec = compile_spec(source, dims=dims, backend=backend)
    result = spec.run(arrays, keep_intermediates=True, check_invariants=True).tensors
    return {name: np.asarray(value) for name, value in result.items()}


def codes_of(source: str) -> list[str]:
    return [d.code for d in check_text(source).diagnostics]


def diagnostics(source: str) -> list[str]:
    return [f"{d.code} {d.message} | {' | '.join(d.help)}" for d in check_text(source).diagnostics]


NANOGPT = """\
dim B, T, H, hs
dim C = H * hs
input x: [B, T, C]
param W_attn: [C, 3 * C]
param W_proj: [C, C]
q, k, v = (x @ W_attn).split(C, dim=2)
k = k.view(B, T, H, C // H).transpose(1, 2)
q = q.view(B, T, H, C // H).transpose(1, 2)
v = v.view(B, T, H, v.size(-1) // H).transpose(1, 2)
att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
att = att.masked_fill(torch.tril(torch.ones(T, T)) == 0, float('-inf'))
att = F.softmax(att, dim=-1)
y = att @ v
y = y.transpose(1, 2).contiguous().view(B, T, C)
output y = y @ W_proj
"""


def nanogpt_reference(x, w_attn, w_proj, heads):
    b, t, c = x.shape
    q, k, v = np.split(x @ w_attn, 3, axis=2)
    q, k, v = (z.reshape(b, t, heads, c // heads).transpose(0, 2, 1, 3) for z in (q, k, v))
    att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(c // heads)
    att = np.where(np.tril(np.ones((t, t))) == 0, -np.inf, att)
    att = np.exp(att - att.max(-1, keepdims=True))
    att = att / att.sum(-1, keepdims=True)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, c)
    return y @ w_proj


@pytest.mark.parametrize("backend", BACKENDS)
def test_nanogpt_attention_as_written_in_pytorch_runs_and_equals_numpy(backend):
    assert codes_of(NANOGPT) == []
    x = RNG.standard_normal((2, 5, 6))
    w_attn, w_proj = RNG.standard_normal((6, 18)), RNG.standard_normal((6, 6))
    out = run(NANOGPT, backend, {"B": 2, "T": 5, "H": 2, "hs": 3}, x=x, W_attn=w_attn,
              W_proj=w_proj)
    np.testing.assert_allclose(out["y"], nanogpt_reference(x, w_attn, w_proj, 2), rtol=1e-10)


SPELLINGS = """\
dim N, d, H
input x: [N, d]
input m: bool[N, N]
input s: [H, N, d]
a = x.T.softmax(-1)
b = x.sum(1, True)
c = x.amax(dim=-1, keepdim=True)
e = x.unsqueeze(0)
f = x.unsqueeze(-1)
g = s.permute(1, 0, 2)
h = s.transpose(0, 1)
i = torch.cat([x, x], dim=1)
j = torch.matmul(x, x.T)
k = torch.where(m, j, 0)
l = x.float().to(torch.float32).contiguous()
n = np.mean(x, axis=0)
o = x.repeat_interleave(2, dim=0)
p = torch.stack((x, x), dim=0)
r = math.pi * torch.exp(x) + np.inf * 0
t = x.mean(-1) * x.shape[-1]
u = torch.einsum("ij,kj->ik", x, x)
w = F.relu(x) + F.gelu(x) + torch.tanh(x)
z = torch.zeros(N, d) + np.ones((N, d))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_methods_and_namespaces_have_their_pytorch_meaning(backend):
    assert codes_of(SPELLINGS) == []
    x, s = RNG.standard_normal((3, 4)), RNG.standard_normal((2, 3, 4))
    m = RNG.random((3, 3)) > 0.5
    out = run(SPELLINGS, backend, x=x, m=m, s=s)
    soft = np.exp(x.T - x.T.max(-1, keepdims=True))
    np.testing.assert_allclose(out["a"], soft / soft.sum(-1, keepdims=True))
    np.testing.assert_allclose(out["b"], x.sum(1, keepdims=True))
    np.testing.assert_allclose(out["c"], x.max(-1, keepdims=True))
    np.testing.assert_array_equal(out["e"], x[None])
    np.testing.assert_array_equal(out["f"], x[..., None])
    np.testing.assert_array_equal(out["g"], s.transpose(1, 0, 2))
    np.testing.assert_array_equal(out["h"], np.swapaxes(s, 0, 1))
    np.testing.assert_array_equal(out["i"], np.concatenate([x, x], axis=1))
    np.testing.assert_allclose(out["j"], x @ x.T)
    np.testing.assert_allclose(out["k"], np.where(m, x @ x.T, 0))
    np.testing.assert_array_equal(out["l"], x)
    np.testing.assert_allclose(out["n"], x.mean(0))
    np.testing.assert_array_equal(out["o"], np.repeat(x, 2, axis=0))
    np.testing.assert_array_equal(out["p"], np.stack([x, x]))
    assert np.isnan(out["r"]).all()  # inf * 0, as in NumPy
    np.testing.assert_allclose(out["t"], x.mean(-1) * 4)
    np.testing.assert_allclose(out["u"], np.einsum("ij,kj->ik", x, x))
    np.testing.assert_allclose(out["w"], np.maximum(x, 0) + out["w"] - np.maximum(x, 0))
    np.testing.assert_array_equal(out["z"], np.ones((3, 4)))


UNPACK = """\
dim N, C
input qkv: [N, 3 * C]
input stacked: [3, N, C]
q, k, v = split(qkv, 3, axis=-1)
a, b, c = qkv.split(C, dim=1)
g, h, i = torch.chunk(qkv, 3, dim=-1)
s0, s1, s2 = stacked.unbind(0)
top, _ = qkv.max(dim=-1)
first, second = qkv, stacked
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuple_assignment_gives_each_part_as_numpy_splits(backend):
    assert codes_of(UNPACK) == []
    qkv, stacked = RNG.standard_normal((2, 6)), RNG.standard_normal((3, 2, 2))
    out = run(UNPACK, backend, qkv=qkv, stacked=stacked)
    for names in ("qkv", "abc", "ghi"):
        for name, part in zip(names if names != "qkv" else "qkv", np.split(qkv, 3, axis=-1)):
            np.testing.assert_array_equal(out[name], part)
    for index in range(3):
        np.testing.assert_array_equal(out[f"s{index}"], stacked[index])
    np.testing.assert_array_equal(out["top"], qkv.max(-1))


SHAPE_UNPACK = """\
dim N, M, D
input x: [N, M, D]
B, T, C = x.size()
b, t, c = x.shape
flat = x.reshape(B * t, C) / sqrt(c)
output y = flat.view(b, T * C)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_sizes_of_a_shape_unpack_as_dims_as_in_numpy(backend):
    assert codes_of(SHAPE_UNPACK) == []
    x = RNG.standard_normal((2, 3, 4))
    out = run(SHAPE_UNPACK, backend, x=x)
    b, t, c = x.shape
    np.testing.assert_allclose(out["flat"], x.reshape(b * t, c) / np.sqrt(c))
    np.testing.assert_allclose(out["y"], (x.reshape(b * t, c) / np.sqrt(c)).reshape(b, t * c))


@pytest.mark.parametrize("names", ["b, t", "b, t, c, d"])
@pytest.mark.parametrize("how", ["x.shape", "x.size()"])
def test_a_shape_unpacked_into_the_wrong_number_of_names_is_reported_once(names, how):
    source = f"dim N, M, D\ninput x: [N, M, D]\n{names} = {how}\noutput y = x * b\n"
    found = diagnostics(source)
    count = len(names.split(","))
    assert found == [f"SC312 cannot unpack the shape [N, M, D] of `x` into {count} names | "]


SPLIT_SIZES = """\
dim N, A, B
input x: [N, A + 2 * B + 3]
a, b, c = x.split([A, 2 * B, 3], dim=-1)
d, e = torch.split(x, [1, 1], 0)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_into_a_list_of_sizes_gives_numpy_parts(backend):
    assert codes_of(SPLIT_SIZES.replace("dim N,", "dim N = 2\ndim")) == []
    x = RNG.standard_normal((2, 10))
    out = run(SPLIT_SIZES, backend, {"N": 2, "A": 3, "B": 2}, x=x)
    for name, part in zip("abc", np.split(x, [3, 7], axis=-1)):
        np.testing.assert_array_equal(out[name], part)
    np.testing.assert_array_equal(out["d"], x[:1])
    np.testing.assert_array_equal(out["e"], x[1:])


def test_split_sizes_that_do_not_sum_to_the_axis_are_reported():
    source = "dim N, A\ninput x: [N, A + 3]\na, b = x.split([A, 2], dim=1)\n"
    assert codes_of(source) == ["SC340"]
    assert codes_of(source.replace("[A, 2], dim=1", "[A, 2, 1], dim=1")) == ["SC312"]


SQUEEZE = """\
dim N, D
input x: [N, 1, D]
a = x.squeeze(1)
b = torch.squeeze(x, dim=-2)
c = torch.unsqueeze(a, 0).squeeze(0)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_squeeze_takes_an_axis_of_size_one_away_as_numpy(backend):
    assert codes_of(SQUEEZE) == []
    x = RNG.standard_normal((2, 1, 3))
    out = run(SQUEEZE, backend, {"N": 2, "D": 3}, x=x)
    for name in "abc":
        np.testing.assert_array_equal(out[name], np.squeeze(x, 1))


def test_squeezing_an_axis_that_is_not_one_or_no_axis_is_reported():
    assert codes_of(SQUEEZE.replace("x.squeeze(1)", "x.squeeze(0)")) == ["SC340"]
    found = diagnostics(SQUEEZE.replace("x.squeeze(1)", "x.squeeze()"))
    assert found[0] == "SC105 `squeeze` is not a builtin function | write `x.squeeze(dim)`"


KV_CACHE = """\
dim B, P, S, d, M
constraint M >= P + S
input cache: [B, M, d]
input xk: [B, S, d]
input q: [B, S, d]
cache[:, P:P + S] = xk
keys = cache[:, :P + S]
scores = q @ keys.transpose(-2, -1)
cache[:, 0] = 0
output first = cache[:, :1]
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_slice_write_makes_a_new_version_and_leaves_the_input_alone(backend):
    assert codes_of(KV_CACHE) == []
    cache, xk = RNG.standard_normal((2, 7, 3)), RNG.standard_normal((2, 2, 3))
    q = RNG.standard_normal((2, 2, 3))
    before = cache.copy()
    out = run(KV_CACHE, backend, {"P": 3}, cache=cache, xk=xk, q=q)
    np.testing.assert_array_equal(cache, before)
    written = cache.copy()
    written[:, 3:5] = xk
    np.testing.assert_allclose(out["scores"], q @ written[:, :5].transpose(0, 2, 1))
    np.testing.assert_array_equal(out["first"], np.zeros((2, 1, 3)))


def test_every_row_of_the_tables_names_a_builtin_or_a_form():
    from shapecheck.check.builtins import BUILTINS
    from shapecheck.syntax.spellings import _FORMS

    for spelling in (*METHODS.values(), *FUNCTIONS.values()):
        assert spelling.builtin in BUILTINS or spelling.builtin in _FORMS, spelling


# --- names ----------------------------------------------------------------------------------


def test_a_declared_name_wins_over_a_namespace():
    found = diagnostics("dim N, F\ninput x: [N, F]\ny = F.softmax(x, dim=-1)\n")
    assert [d.split()[0] for d in found] == ["SC103"]
    assert "`F` is a dim" in found[0]
    ok = codes_of("dim N, F\ninput x: [N, F]\ny = softmax(x) * F\n")
    assert ok == []


def test_keywords_that_cannot_start_their_statement_are_names():
    source = "dim N\ninput x: [N]\noutput = x * 2\ninput = output + 1\noutput input\n"
    assert codes_of(source) == []
    program = check_text(source)
    assert program.outputs == ["input"]


def test_a_builtin_shadowed_by_a_tensor_gets_a_note_when_called():
    program = check_text("dim N\ninput x: [N]\ncos = x * 2\ny = cos(x)\nz = cos + 1\n")
    [problem] = program.diagnostics
    assert problem.code == "SC105" and problem.span.line == 4
    assert "not the builtin" in problem.notes[0].message and problem.notes[0].span.line == 3


def test_a_rebound_version_is_shown_by_its_name_and_is_not_an_output():
    program = check_text("dim N, d\ninput x: [N, d]\ny = x @ x.T\ny = y @ x\nz = y @ x\n")
    [problem] = program.diagnostics
    assert problem.code == "SC301" and "′" not in problem.message
    assert program.outputs == ["z"]  # not the first y, which the second replaces
    program = check_text("dim N, d\ninput x: [N, d]\ny = x * 2\ny = y + 1\n")
    assert program.outputs == ["y"]


# --- PyTorch habits that the language does not take get its spelling ----------------------


@pytest.mark.parametrize("line, expected", [
    ("y = x.frobnicate()", "SC105"),
    ("y = torch.softmaxx(x, dim=-1)", "did you mean `torch.softmax`?"),
    ("y = F.scaled_dot_product_attention(x, x, x)", "softmax(q @ k.T / sqrt(d)) @ v"),
    ("y = x.shape", "x.shape[i]"),
    ("y = x.masked_fill_(x > 0, 0)", "x = x.masked_fill(mask, value)"),
    ("y = x * float('nan')", "-inf"),
    ("y = x.float", "x.float(...)"),
])
def test_an_unsupported_spelling_gets_the_one_that_is(line, expected):
    found = diagnostics(f"dim N\ninput x: [N]\n{line}\n")
    assert len(found) == 1 and found[0].startswith("SC105"), found
    assert expected in found[0]


def test_the_docs_carry_the_whole_table():
    from pathlib import Path

    docs = (Path(__file__).resolve().parent.parent / "docs" / "language.md").read_text("utf-8")
    missing = [f"x.{name}" for name in METHODS if f"`x.{name}(…)`" not in docs]
    missing += [name for name in FUNCTIONS if f"`{name}`" not in docs]
    assert missing == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_spellings_of_the_new_builtins_run_as_numpy(backend):
    source = ("dim N, d\ninput x: [N, d]\ninput y: [N, d]\na = x.cumsum(-1)\n"
              "b = torch.max(x, y) + np.minimum(x, y) + x.clamp(-0.5, 0.5)\nc = x.repeat(2, 1)\n")
    assert codes_of(source) == []
    x, y = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    out = run(source, backend, x=x, y=y)
    np.testing.assert_allclose(out["a"], np.cumsum(x, -1))
    np.testing.assert_allclose(out["b"], np.maximum(x, y) + np.minimum(x, y) + np.clip(x, -0.5, 0.5))
    np.testing.assert_array_equal(out["c"], np.tile(x, (2, 1)))


# --- issue 34: `.t()`, `.flatten(...)`, `.expand(...)` with PyTorch's meaning ---------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_t_flatten_and_expand_run_as_pytorch_does(backend):
    torch = pytest.importorskip("torch")
    source = ("dim B, N, d\ninput x: [B, N, d]\ninput w: [d, N]\ninput m: bool[N]\n"
              "a = w.t()\nb = x.flatten(1)\nc = x.flatten()\ne = x.flatten(0, -2)\n"
              "k = x.flatten(-2)\nl = (x @ w).transpose(1, 2).flatten(1)\n"
              "p = m.t()\nq = torch.t(w)\n"
              "o = torch.flatten(x, start_dim=1, end_dim=-1)\n"
              "f = m[None].expand(N, -1)\ng = x[:, :1].expand(B, N, d)\nh = w.expand(B, 2, -1, -1)\n")
    assert codes_of(source) == []
    program = check_text(source)
    assert program.shapes()["h"] == ["B", "2", "d", "N"]
    x, w = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 3))
    m = np.array([True, False, True])
    out = run(source, backend, x=x, w=w, m=m)
    tx, tw, tm = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(m)
    expected = {"a": tw.t(), "b": tx.flatten(1), "c": tx.flatten(), "e": tx.flatten(0, -2),
                "k": tx.flatten(-2), "l": (tx @ tw).transpose(1, 2).flatten(1),
                "p": tm.t(), "q": torch.t(tw),
                "o": torch.flatten(tx, start_dim=1, end_dim=-1),
                "f": tm[None].expand(3, -1), "g": tx[:, :1].expand(2, 3, 4),
                "h": tw.expand(2, 2, -1, -1)}
    for name, value in expected.items():
        if name == "l":  # a matmul: NumPy's and torch's BLAS may round the last bit apart
            np.testing.assert_allclose(np.asarray(out[name]), value.numpy(), rtol=1e-12,
                                       err_msg=name)
        else:  # moves and copies: exactly the same numbers
            np.testing.assert_array_equal(np.asarray(out[name]), value.numpy(), err_msg=name)


@pytest.mark.parametrize("line, code, words", [
    ("y = x.expand(N, 2)", "SC312", "grows only axes of size 1: axis 1 of `x` is d"),
    ("y = x.expand(-1, N, d)", "SC312", "this axis of `expand`'s shape is new"),
    ("y = x.expand(d)", "SC312", "cannot drop axes"),
    ("y = x.flatten(1, 0)", "SC312", "start 1 comes after end 0"),  # PyTorch refuses it too
    ("y = x.flatten(3)", "SC305", "out of range"),
    ("y = x[None].t()", "SC306", "at most 2 axes"),  # PyTorch's .t() takes at most 2 axes
])
def test_expand_and_t_refuse_what_pytorch_refuses(line, code, words):
    found = diagnostics(f"dim N, d\ninput x: [N, d]\n{line}\n")
    assert len(found) == 1 and found[0].startswith(code) and words in found[0], found


def test_expand_grows_a_size_proved_equal():
    assert codes_of("dim N, d\nconstraint d == N\ninput x: [N, d]\ny = x.expand(N, N)\n") == []


@pytest.mark.parametrize("line, proposal", [
    ("y = x.flaten(0)", "did you mean `.flatten`?"),     # a misspelling: the nearest spelling
    ("y = torch.softmaxx(x, dim=-1)", "did you mean `torch.softmax`?"),
    ("y = x.rot90()", None),     # PyTorch's own method: its look-alike means something else
    ("y = x.exp2()", None),      # not `.exp`
    ("y = torch.logaddexp(x, x)", None),
    ("y = softmax(x, axis=rows)", "did you mean `row`?"),  # the same axis, by another word
    ("y = softmax(x, axis=columns)", "did you mean `col`?"),
])
def test_a_did_you_mean_proposes_only_the_same_meaning(line, proposal):
    found = diagnostics(f"dim N, d\ninput x: [N, d]\n{line}\n")
    assert len(found) == 1, found
    if proposal is None:
        assert "did you mean" not in found[0], found
    else:
        assert proposal in found[0], found


def test_an_axis_word_of_the_same_meaning_is_fixed():
    from shapecheck.messages.fixes import fix_text

    text = "dim N, d\ninput x: [N, d]\ny = softmax(x, axis=rows)\n"
    fixed = fix_text(text, lambda t: check_text(t).diagnostics, check_text(text).diagnostics)
    assert fixed.text == text.replace("rows", "row")


def test_the_pytorch_names_are_those_of_the_installed_libraries():
    pytest.importorskip("torch")
    import importlib.util
    from pathlib import Path

    import torch

    from shapecheck.syntax import pytorch_names

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("pytorch_names_tool", root / "tools" / "pytorch_names.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    if f"torch {torch.__version__.split('+')[0]} and NumPy {np.__version__};" not in pytorch_names.__doc__:
        pytest.skip("written from other versions of torch or NumPy")
    assert tool.render() == (root / "shapecheck" / "syntax" / "pytorch_names.py").read_text("utf-8")
    assert {"flatten", "t", "rot90"} <= pytorch_names.TENSOR_METHODS


def test_every_row_is_its_spelling_with_its_own_name() -> None:
    # The tables fill `written` at start-up without `dataclasses.replace` (issue 36): a field
    # added to Spelling must be added to `spellings._written` too.
    from dataclasses import fields, replace

    from shapecheck.syntax import spellings

    assert [f.name for f in fields(spellings.Spelling)] == [
        "builtin", "positional", "sizes", "receiver", "written"]
    for table in (spellings.METHODS, spellings.FUNCTIONS):
        for key, row in table.items():
            assert row.written == key and row == replace(row, written=key)
