"""Inference of undeclared names (issue 9): sketches, strict declared files, the modes,
conflicts, and sketches that run and get a report.

The central test is differential: a sketch, and the same spec with the declarations
`verify` printed pasted at the top (checked strictly, as a declared file), must give
every tensor the same shape and the same verdict.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shapecheck.check import builtins
from shapecheck.passes import infer
from shapecheck.api import check_text
from shapecheck.cli import main

CARD = "S = Q @ K.T; P = softmax(S, axis=row); O = P @ V\n"

# The note's formulas, and variations a student writes, as sketches.
SKETCHES = {
    "card": CARD,
    "card_scaled": "S = Q @ K.T / sqrt(d)\nP = softmax(S, axis=row)\nO = P @ V\n",
    "index_form": 'S = einsum("bhqd,bhkd->bhqk", Q, K)\nP = softmax(S)\n'
                  'O = einsum("bhqk,bhkd->bhqd", P, V)\n',
    "index_form_2d": 'S = einsum("id,jd->ij", Q, K)\nO = einsum("ij,jd->id", softmax(S), V)\n',
    "multi_head": "Q = split_heads(X @ W_Q, H)\nK = split_heads(X @ W_K, H)\n"
                  "V = split_heads(X @ W_V, H)\nS = Q @ K.T / sqrt(d)\nP = softmax(S, axis=row)\n"
                  "O = merge_heads(P @ V)\nY = O @ W_O\n",
    "multi_head_reshape": "Q = transpose(reshape(X @ W_Q, [N, H, -1]), [1, 0, 2])\n"
                          "K = transpose(reshape(X @ W_K, [N, H, -1]), [1, 0, 2])\n"
                          "P = softmax(Q @ K.T)\n",
    "causal": "S = Q @ K.T\nP = softmax(where(causal_mask(N), S, -inf), axis=row)\nO = P @ V\n",
    "cross": "Q = X @ W_Q\nK = C @ W_K\nV = C @ W_V\nO = softmax(Q @ K.T) @ V\n",
    "bias_and_mask": "S = Q @ K.T + B\nP = softmax(where(mask, S, -inf))\nO = P @ V\n",
    "batched": "S = Q @ K.T\nP = softmax(S, axis=-1)\nO = P @ V\nassert O: [B, N, e]\n",
    "annotated": "S: [N, N] = Q @ K.T\nO = softmax(S) @ V\n",
    "with_constraint": "constraint D == H * k\nQ = split_heads(X @ W, H)\nY = merge_heads(Q) @ W2\n"
                       "Z: [N, D] = Y\n",
    "grouped_query": "K2 = repeat(K, G, axis=0)\nS = Q @ K2.T\nO = softmax(S) @ repeat(V, G, axis=0)\n",
    "layernorm_residual": "A = softmax(X @ W_Q @ (X @ W_K).T) @ X @ W_V\nY = layernorm(X + A)\n",
    "concat_heads": "O = concat([A, B], axis=-1) @ W\n",
    "reductions": "m = max(S, axis=-1, keepdims=true)\nP = exp(S - m) / sum(exp(S - m), axis=-1, keepdims=true)\n",
    "scalar_only": "y = relu(x) * 2\n",
    "rotary_slices": "q1 = Q[..., :h]\nq2 = Q[..., h:]\n"
                     "Qr = concat([q1 * c - q2 * s, q2 * c + q1 * s], axis=-1)\n"
                     "O = softmax(Qr @ K.T / sqrt(d), axis=-1) @ V\n",
    "slice_alone": "y = x[:, :h] @ W\n",
}


def _declarations(program) -> list[str]:
    assert program.inferred is not None
    return program.inferred.declarations()


@pytest.mark.parametrize("name", list(SKETCHES))
def test_a_sketch_verifies_and_says_what_it_inferred(name: str) -> None:
    program = check_text(SKETCHES[name])
    assert program.ok, [d.message for d in program.diagnostics]
    notes = [d for d in program.diagnostics if d.code == "SC106"]
    assert len(notes) == 1
    assert list(notes[0].help) == _declarations(program)


@pytest.mark.parametrize("name", list(SKETCHES))
def test_pasting_the_declarations_gives_the_same_shapes(name: str) -> None:
    """Differential: the sketch, and the spec with the printed declarations pasted in
    (a declared file, checked strictly), agree on every tensor's shape."""
    sketch = check_text(SKETCHES[name])
    pasted_source = "\n".join(_declarations(sketch)) + "\n" + SKETCHES[name]
    pasted = check_text(pasted_source, infer=False)
    assert pasted.inferred is None
    errors = [d.message for d in pasted.diagnostics if d.is_error]
    assert not errors, (pasted_source, errors)
    assert pasted.shapes() == sketch.shapes()
    assert [d.code for d in pasted.diagnostics if d.code == "SC401"] == []  # every declaration used


def test_the_card_verbatim() -> None:
    program = check_text(CARD)
    assert program.shapes() == {
        "Q": ["N", "d"], "K": ["M", "d"], "V": ["M", "e"],
        "S": ["N", "M"], "P": ["N", "M"], "O": ["N", "e"],
    }
    assert _declarations(program) == [
        "dim N, d, M, e", "input Q: [N, d]", "input K: [M, d]", "input V: [M, e]"]
    assert all(program.tensors[n].kind == "input" and program.tensors[n].inferred for n in "QKV")
    assert not program.tensors["S"].inferred


def test_verify_the_card(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    card = tmp_path / "card.attn"
    card.write_text(CARD)
    with pytest.raises(SystemExit) as done:
        main(["verify", str(card), "--color", "never"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for line in ("input Q: [N, d]", "input K: [M, d]", "input V: [M, e]", "dim N, d, M, e"):
        assert f"help: {line}\n" in out
    assert out.rstrip().endswith("1 file verified.")
    with pytest.raises(SystemExit) as done:
        main(["verify", str(card), "--format", "json"])
    assert done.value.code == 0
    document = json.loads(capsys.readouterr().out)["files"][0]
    assert document["ok"] is True
    assert document["shapes"]["Q"] == ["N", "d"] and document["shapes"]["O"] == ["N", "e"]
    assert document["inferred"] == {
        "tensors": ["Q", "K", "V"], "dims": ["N", "d", "M", "e"],
        "declarations": ["dim N, d, M, e", "input Q: [N, d]", "input K: [M, d]",
                         "input V: [M, e]"]}
    for fmt, marker in (("sarif", '"SC106"'), ("github", "::notice ")):
        with pytest.raises(SystemExit) as done:
            main(["verify", str(card), "--format", fmt])
        assert done.value.code == 0
        assert marker in capsys.readouterr().out


# --- what the rules give ----------------------------------------------------------------------


def shapes_of(source: str) -> dict[str, str]:
    program = check_text(source)
    assert program.ok, [d.message for d in program.diagnostics]
    return {name: tensor.value.text() for name, tensor in program.tensors.items()}


def test_einsum_letters_give_ranks_and_shared_axes() -> None:
    shapes = shapes_of(SKETCHES["index_form"])
    assert shapes["Q"] == "[B, H, N, d]" and shapes["K"] == "[B, H, M, d]"
    assert shapes["V"] == "[B, H, M, e]" and shapes["O"] == "[B, H, N, e]"


def test_a_name_in_a_dim_position_is_a_dim_and_divisibility_is_part_of_the_shape() -> None:
    program = check_text("Q = split_heads(X @ W_Q, H)\n")
    assert program.ok
    assert program.tensors["W_Q"].value.text() == "[D, H*k]"  # as the issue writes it
    assert program.tensors["Q"].value.text() == "[H, N, k]"
    assert "H" in program.dims.dims and "H" not in program.tensors


def test_a_slice_bound_is_part_of_the_shape() -> None:
    # As with divisibility: the axis a slice cuts is longer than the bound, and the two
    # halves of a rotary embedding make it twice the half.
    program = check_text(SKETCHES["rotary_slices"])
    assert program.ok, [d.message for d in program.diagnostics]
    assert program.tensors["Q"].value.text().endswith("2*h]")
    alone = check_text(SKETCHES["slice_alone"])
    assert alone.ok and alone.tensors["x"].value.text() == "[N, h + k]"


def test_operands_of_matmul_are_matrices_and_partners_share_the_shape() -> None:
    shapes = shapes_of("Y = X @ W + b\nZ = where(m, Y, 0)\n")
    assert shapes["X"] == "[N, D]" and shapes["W"] == "[D, d]"  # D: the width W maps from
    assert shapes["b"] == "[N, d]"  # takes its partner's shape, not a broadcast scalar
    assert shapes["m"] == "bool[N, d]"  # a `where` condition is bool


def test_a_name_nothing_gives_axes_is_a_dim_used_as_a_scalar() -> None:
    program = check_text("S = Q @ K.T / sqrt(d)\n")
    assert program.ok
    assert "d" in program.dims.dims and "d" not in program.tensors
    # distinct dims unless the formula makes them equal: the scale is not Q's width
    assert program.tensors["Q"].value.text() == "[N, e]"


def test_most_general_sizes_are_distinct_unless_forced() -> None:
    shapes = shapes_of("A = X @ Y\nB = Z @ Z.T\n")
    assert shapes["X"] == "[N, D]" and shapes["Y"] == "[D, d]"
    assert shapes["Z"] == "[M, e]" and shapes["B"] == "[M, M]"


def test_fresh_names_avoid_the_spec_names() -> None:
    program = check_text("N = Q @ K.T\nd = softmax(N) @ V\n")
    assert program.ok
    names = {name for name, _ in program.inferred.dims}
    assert not names & {"N", "d", "Q", "K", "V"}


def test_annotations_and_asserts_steer_inference() -> None:
    shapes = shapes_of("S: [T, T] = Q @ K.T\nO = softmax(S) @ V\nassert O: [T, 64]\n")
    assert shapes["Q"] == "[T, d]" and shapes["K"] == "[T, d]" and shapes["V"] == "[T, 64]"


def test_the_smallest_rank_the_formula_needs() -> None:
    shapes = shapes_of("P = softmax(A @ B, axis=-3)\n")
    # one batch axis is enough, on either operand; the other stays a matrix
    assert sorted(len(shapes[n].split(",")) for n in ("A", "B")) == [2, 3]


def test_a_name_used_as_a_dim_and_as_a_matrix_is_an_error() -> None:
    program = check_text("Y = H @ X\nQ = split_heads(X, H)\n")
    errors = [d for d in program.diagnostics if d.is_error]
    assert [d.code for d in errors] == ["SC302"]  # H is a dim: a scalar, not an operand of @
    assert errors[0].span.line == 1


# --- conflicts ---------------------------------------------------------------------------------


def test_a_conflict_is_reported_at_the_later_use_with_a_note_at_the_first() -> None:
    program = check_text("A = Q @ ones([3, 4])\nB = Q @ ones([5, 4])\n")
    (error,) = [d for d in program.diagnostics if d.is_error]
    assert error.code == "SC301" and error.span.line == 2
    assert "3 (last axis of [N, 3]) vs 5" in error.message
    notes = {(note.span.line if note.span else None): note.message for note in error.notes}
    assert notes[1].startswith("its axis 1 is 3") or any(
        "its axis 1 is 3" in n.message and n.span and n.span.line == 1 for n in error.notes)


def test_conflicting_ranks_are_an_error_not_a_hang() -> None:
    program = check_text('A = einsum("ij->i", X)\nB = einsum("ijk->i", X)\n')
    assert [d.code for d in program.diagnostics if d.is_error] == ["SC310"]
    assert program.tensors["X"].value.rank == 2


def test_inference_is_deterministic() -> None:
    source = SKETCHES["multi_head"] + SKETCHES["bias_and_mask"].replace("S =", "S2 =")
    first = check_text(source)
    second = check_text(source)
    assert first.shapes() == second.shapes()
    assert [d.message for d in first.diagnostics] == [d.message for d in second.diagnostics]


def test_many_undeclared_names_stay_bounded() -> None:
    """Thirty independent names, each needing three bumps of rank: the search budget
    ends it deterministically, with a diagnostic rather than a hang."""
    lines = [f'Y{i} = einsum("abc->a", X{i})' for i in range(30)]
    program = check_text("\n".join(lines) + "\n")
    again = check_text("\n".join(lines) + "\n")
    assert [d.message for d in program.diagnostics] == [d.message for d in again.diagnostics]


# --- declared files stay strict; the modes ----------------------------------------------------------


DECLARED = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\nS = Q @ K.T\nO = softmax(S) @ V\n"


def test_a_declared_file_keeps_sc101_and_offers_the_declaration() -> None:
    program = check_text(DECLARED)
    (error,) = [d for d in program.diagnostics if d.is_error]
    assert error.code == "SC101" and "`V`" in error.message
    assert "declare it: `dim e; input V: [N, e]`" in error.help
    assert program.inferred is None and "V" not in program.tensors


def test_did_you_mean_comes_first() -> None:
    program = check_text("dim N, d\ninput Query: [N, d]\nS = Qeury @ Query.T\n")
    (error,) = [d for d in program.diagnostics if d.is_error]
    assert error.help[0] == "did you mean `Query`?"
    assert error.help[1] == "declare it: `dim M; input Qeury: [M, d]`"  # its rows are free


def test_forcing_either_mode() -> None:
    forced = check_text(DECLARED, infer=True)
    assert forced.ok and forced.tensors["V"].value.text() == "[N, e]"
    strict = check_text(CARD, infer=False)
    assert [d.code for d in strict.diagnostics] == ["SC101"] * 3
    assert all(not d.help for d in strict.diagnostics)


def test_forcing_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    card = tmp_path / "card.attn"
    card.write_text(CARD)
    declared = tmp_path / "declared.attn"
    declared.write_text(DECLARED)
    for args, code in ((["verify", str(card), "--no-infer"], 1),
                       (["verify", str(declared)], 1),
                       (["verify", str(declared), "--infer"], 0)):
        with pytest.raises(SystemExit) as done:
            main(args)
        assert done.value.code == code, (args, capsys.readouterr())
        capsys.readouterr()


def test_a_typo_in_a_declared_file_is_not_a_new_input() -> None:
    program = check_text("dim N, d\ninput X: [N, d]\nparam W: [d, d]\nY = X @ w\n")
    assert not program.ok
    assert "w" not in program.tensors


# --- run and report -------------------------------------------------------------------------------


def test_run_a_sketch_binds_the_inferred_dims(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(0)
    arrays = {"Q": rng.standard_normal((5, 4)), "K": rng.standard_normal((7, 4)),
              "V": rng.standard_normal((7, 3))}
    for name, array in arrays.items():
        np.save(tmp_path / f"{name.lower()}.npy", array)
    card = tmp_path / "card.attn"
    card.write_text(CARD)
    out_file = tmp_path / "out.npz"
    with pytest.raises(SystemExit) as done:
        main(["run", str(card), "--input", f"Q={tmp_path / 'q.npy'}", "--input",
              f"K={tmp_path / 'k.npy'}", "--input", f"V={tmp_path / 'v.npy'}",
              "--save", str(out_file)])
    assert done.value.code == 0, capsys.readouterr()
    assert "N=5, d=4, M=7, e=3" in capsys.readouterr().out
    scores = arrays["Q"] @ arrays["K"].T
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    with np.load(out_file) as saved:
        np.testing.assert_allclose(saved["O"], weights @ arrays["V"], rtol=1e-12)


def test_compile_a_sketch_from_python() -> None:
    np = pytest.importorskip("numpy")
    from shapecheck import compile_spec

    attention = compile_spec(CARD)
    q, k, v = np.ones((2, 3)), np.ones((4, 3)), np.arange(8.0).reshape(4, 2)
    outputs = attention(Q=q, K=k, V=v)
    np.testing.assert_allclose(outputs["O"], np.tile(v.mean(axis=0), (2, 1)))


def test_run_a_forced_declared_file_recheck_keeps_the_mode() -> None:
    np = pytest.importorskip("numpy")
    from shapecheck import compile_spec

    program = check_text(DECLARED, infer=True)
    attention = compile_spec(program)
    outputs = attention(Q=np.ones((2, 3)), K=np.ones((2, 3)), V=np.ones((2, 5)))
    assert outputs["O"].shape == (2, 5)


def test_report_on_a_sketch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    card = tmp_path / "card.attn"
    card.write_text(CARD)
    out = tmp_path / "card.md"
    with pytest.raises(SystemExit) as done:
        main(["report", str(card), "-o", str(out)])
    assert done.value.code == 0
    text = out.read_text().replace("\u00a0", " ")  # shapes keep their spaces unbreakable
    assert "Q `[N, d]`, K `[M, d]`, V `[M, e]`" in text  # the cheat card, with inferred shapes
    assert "inferred from the uses" in text
    assert "SC106" in text


# --- one table per builtin ---------------------------------------------------------------------------


def test_a_builtins_partners_are_tensor_arguments_of_its_row() -> None:
    assert infer.PARTNERS == {name: row.partners for name, row in builtins.BUILTINS.items()}
    for name, row in builtins.BUILTINS.items():
        tensors = {p.name for p in row.params if p.kind is builtins.Kind.TENSOR}
        assert set(row.partners) <= tensors and len(row.partners) != 1, name
    assert builtins.BUILTINS["where"].partners == ("condition", "x", "y")
