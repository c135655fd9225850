"""Conformance of real implementations: `shapecheck conform` and `shapecheck.testing`.

Implementations are written as files in a temporary folder (as a user's module would be),
so that each module's imports decide arrays or tensors as they would for a user.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from shapecheck import api, symbolic
from shapecheck.cli import main
from shapecheck.pytorch.conform import FunctionFailed, UsageError, conform, load_function
from shapecheck.testing import assert_conforms

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
IMPLEMENTATIONS = EXAMPLES / "implementations"
MULTI_HEAD = EXAMPLES / "multi_head.attn"
SINGLE_HEAD = EXAMPLES / "single_head.attn"


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stopped:
        main(["conform", *map(str, args)])
    captured = capsys.readouterr()
    code = stopped.value.code
    return (code if isinstance(code, int) else 1), captured.out, captured.err


def module(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def implementation(tmp_path: Path, name: str, source: str, function: str = "attention"):
    return load_function(f"{module(tmp_path, name, source)}:{function}")


NUMPY_SINGLE = """
    import numpy as np

    seen = []

    def attention(Q, K, V):
        seen.append((type(Q).__module__, Q.shape, K.shape, V.shape, Q.dtype.name))
        S = Q @ K.T / np.sqrt(Q.shape[1])
        P = np.exp(S - S.max(axis=1, keepdims=True))
        return (P / P.sum(axis=1, keepdims=True)) @ V
"""

TORCH_SINGLE = """
    import torch

    seen = []

    def attention(Q, K, V):
        seen.append(type(Q))
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V)
"""


# --- the shipped examples --------------------------------------------------------------------


def test_the_correct_numpy_example_conforms(capsys):
    code, out, err = run(capsys, MULTI_HEAD, IMPLEMENTATIONS / "attention_numpy.py:attention")
    assert code == 0, out + err
    assert out.count("  ok    ") == 5
    assert "conforms: every output matches the spec at 5 binding(s)" in out


def test_the_subtly_wrong_numpy_example_fails_and_shrinks(capsys):
    code, out, _ = run(capsys, MULTI_HEAD, IMPLEMENTATIONS / "attention_numpy_wrong.py:attention")
    assert code == 1
    # sqrt(D_model) vs sqrt(d) agree with one head, and every scale agrees with one token
    assert "output `Y` does not match the spec at N=2, d=1, H=2, D_model=2 (the smallest " \
           "failing binding; it first failed at N=3, d=5, H=7, D_model=35)" in out
    assert "max abs error" in out and "max rel error" in out and "worst at index [" in out


def test_the_multihead_attention_wrapper_conforms_with_tensors(capsys):
    code, out, err = run(capsys, MULTI_HEAD, IMPLEMENTATIONS / "mha_torch.py:attention")
    assert code == 0, out + err
    assert "(torch, float64)" in out


def test_the_examples_conform_through_the_testing_api():
    for name in ("attention_numpy", "mha_torch"):
        result = assert_conforms(MULTI_HEAD, load_function(f"{IMPLEMENTATIONS}/{name}.py:attention"))
        assert len(result.passed) == 5
    wrong = load_function(f"{IMPLEMENTATIONS}/attention_numpy_wrong.py:attention")
    with pytest.raises(AssertionError, match=r"output `Y` does not match the spec at N=2, d=1"):
        assert_conforms(MULTI_HEAD, wrong)


# --- arrays or tensors: the function's module decides ------------------------------------------


def test_a_numpy_module_gets_arrays_and_a_torch_module_gets_tensors(tmp_path):
    numpy_impl = load_function(f"{module(tmp_path, 'np_single', NUMPY_SINGLE)}:attention")
    torch_impl = load_function(f"{module(tmp_path, 'torch_single', TORCH_SINGLE)}:attention")
    assert conform(SINGLE_HEAD, numpy_impl).ok and conform(SINGLE_HEAD, torch_impl).ok
    assert {seen[0] for seen in numpy_impl.__globals__["seen"]} == {"numpy"}
    import torch

    assert set(torch_impl.__globals__["seen"]) == {torch.Tensor}
    result = conform(SINGLE_HEAD, torch_impl)
    assert result.framework == "torch"
    with pytest.raises(UsageError, match="framework must be one of"):
        conform(SINGLE_HEAD, numpy_impl, framework="tensorflow")


def test_framework_can_be_forced(tmp_path):
    # no import of torch in this module, but it calls tensor methods
    impl = implementation(tmp_path, "methods_only", """
        def attention(Q, K, V):
            return (Q @ K.T / Q.shape[1] ** 0.5).softmax(-1) @ V
    """)
    with pytest.raises(FunctionFailed, match="AttributeError"):
        conform(SINGLE_HEAD, impl)  # NumPy arrays have no softmax method
    assert conform(SINGLE_HEAD, impl, framework="torch").ok


def test_an_nn_module_instance_is_a_torch_function():
    import torch

    class Attention(torch.nn.Module):
        def forward(self, Q, K, V):
            return torch.nn.functional.scaled_dot_product_attention(Q, K, V)

    assert conform(SINGLE_HEAD, Attention()).framework == "torch"


def test_a_device_that_cannot_hold_the_inputs_is_a_usage_error(capsys, tmp_path):
    import torch

    numpy_impl = module(tmp_path, "numpy_single", NUMPY_SINGLE)
    torch_impl = module(tmp_path, "torch_single", TORCH_SINGLE)
    code, _, err = run(capsys, SINGLE_HEAD, f"{numpy_impl}:attention", "--device", "cuda")
    assert code == 2 and "device 'cuda' is not one the numpy backend runs on (cpu)" in err
    code, _, err = run(capsys, SINGLE_HEAD, f"{torch_impl}:attention", "--device", "gpu")
    assert code == 2 and "device 'gpu' is not one the torch backend runs on" in err
    if not torch.cuda.is_available():  # written for CUDA; here the error must be clear
        code, out, err = run(capsys, SINGLE_HEAD, f"{torch_impl}:attention", "--device", "cuda")
        assert (code, out) == (2, "") and "device cuda: torch sees no CUDA device" in err


def test_an_nn_module_is_called_with_its_forwards_parameters():
    """Its ``forward``'s signature, not ``__call__``'s ``*args, **kwargs``, says which dims
    it takes and which parameters nothing fills."""
    import torch

    class Heads(torch.nn.Module):
        def forward(self, X, W_Q, W_K, W_V, W_O, H):
            n = X.shape[0]
            q, k, v = ((X @ W.T).reshape(n, H, -1).transpose(0, 1) for W in (W_Q, W_K, W_V))
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
            return o.transpose(0, 1).reshape(n, -1) @ W_O.T

    transposed = dict.fromkeys(("W_Q", "W_K", "W_V", "W_O"), "transpose")
    assert conform(MULTI_HEAD, Heads(), layouts=transposed).ok

    class Needy(torch.nn.Module):
        def forward(self, X, W_Q, W_K, W_V, W_O, heads):
            raise AssertionError("never called")

    with pytest.raises(UsageError, match="`heads`"):
        conform(MULTI_HEAD, Needy(), layouts=transposed)


# --- the bindings ------------------------------------------------------------------------------


def test_bindings_are_admissible_square_and_not_and_odd(tmp_path):
    impl = implementation(tmp_path, 'gqa_seen', '''
        import numpy as np
        seen = []
        def gqa(X, W_Q, W_K, W_V, W_O, H, G, R):
            seen.append((X.shape[0], H, G, R, W_Q.shape, W_K.shape))
            return X @ np.zeros((X.shape[1], X.shape[1]))
    ''', 'gqa')
    conform(EXAMPLES / "grouped_query.attn", impl, shrink=False)
    seen = impl.__globals__["seen"]
    assert len(seen) >= 1
    for n, h, g, r, w_q, w_k in seen:
        assert h == g * r  # the spec's constraint
    program = api.check_path(MULTI_HEAD)
    bindings = [p.dims.bindings for p in api.admissible_bindings(program, 5)]
    first, second = bindings[0], bindings[1]
    assert len(set(first.values())) == len(first) and all(v % 2 for v in first.values())
    assert len(set(second.values())) == 1  # every dim the same size: square tables, N == d
    assert len({tuple(sorted(b.items())) for b in bindings}) == 5


def test_a_derived_dim_needs_a_divisible_binding():
    source = "dim N, D, H\ndim d = D / H\ninput X: [N, D]\noutput Y: [N, d] = X @ ones([D, d])\n"
    for checked in api.admissible_bindings(api.check_text(source), 4):
        values = checked.dims.bindings
        assert values["D"] % values["H"] == 0


def test_a_dim_bounded_from_below_is_drawn_above_its_bound():
    """SEW-D's relative table (`constraint S >= 512`, torch's guard on its span): every
    candidate of sizes up to 8 was below it, so conform found no binding; a size below a
    dim's least is drawn again above it, the others as before."""
    source = ("dim B, S\nconstraint S >= 512\ninput X: [B, S]\n"
              "output Y: [B, 256] = X[:, :256]\n")
    found = [p.dims.bindings for p in api.admissible_bindings(api.check_text(source), 3)]
    assert len(found) == 3 and all(b["S"] >= 512 and b["B"] <= 8 for b in found)
    assert found[0]["B"] == 3  # a size the bound does not touch is the one drawn


def test_draw_bindings_is_reproducible_and_lists_the_free_dims():
    system = api.check_path(EXAMPLES / "grouped_query.attn").dims
    first = [b for _, b in zip(range(6), symbolic.draw_bindings(system, seed=3))]
    again = [b for _, b in zip(range(6), symbolic.draw_bindings(system, seed=3))]
    assert first == again and all(set(b) == {"N", "d", "G", "R"} for b in first)
    assert all(1 <= v <= 8 for b in first[2:] for v in b.values())


def test_dims_fixed_by_the_caller_hold_in_every_case(tmp_path):
    impl = load_function(f"{module(tmp_path, 'np_fixed', NUMPY_SINGLE)}:attention")
    conform(SINGLE_HEAD, impl, dims={"d": 6})
    assert {shape[1] for _, shape, *_ in impl.__globals__["seen"]} == {6}


def test_shrinking_finds_the_smallest_failing_binding(tmp_path):
    impl = implementation(tmp_path, 'np_late', '''
        import numpy as np
        def attention(Q, K, V):
            S = Q @ K.T / np.sqrt(Q.shape[1])
            P = np.exp(S - S.max(axis=1, keepdims=True))
            O = (P / P.sum(axis=1, keepdims=True)) @ V
            if Q.shape[0] >= 3:  # wrong from three tokens on
                O[-1] += 1e-3
            return O
    ''', 'attention')
    result = conform(SINGLE_HEAD, impl)
    assert result.failure is not None
    assert result.failure.bindings == {"N": 3, "d": 1}
    assert result.failure.first == {"N": 3, "d": 5}
    assert "[2, 0]" in result.report()  # the worst index: the last row
    unshrunk = conform(SINGLE_HEAD, impl, shrink=False)
    assert unshrunk.failure is not None and unshrunk.failure.bindings == {"N": 3, "d": 5}


# --- names and layouts -----------------------------------------------------------------------


TORCH_STYLE = """
    import torch

    def mha(x, q_proj, k_proj, v_proj, o_proj, num_heads):
        # PyTorch's convention: weights [out, in], applied as x @ W.T
        n, width = x.shape
        d = width // num_heads
        def heads(t):
            return t.reshape(n, num_heads, d).transpose(0, 1)
        q, k, v = heads(x @ q_proj.T), heads(x @ k_proj.T), heads(x @ v_proj.T)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return {"out": o.transpose(0, 1).reshape(n, width) @ o_proj.T}
"""


def test_names_and_layouts_map_the_spec_onto_a_pytorch_style_function(tmp_path):
    target = f"{module(tmp_path, 'torch_style', TORCH_STYLE)}:mha"
    names = {"X": "x", "W_Q": "q_proj", "W_K": "k_proj", "W_V": "v_proj", "W_O": "o_proj",
             "H": "num_heads", "Y": "out"}
    layouts = {w: "transpose" for w in ("W_Q", "W_K", "W_V", "W_O")}
    assert assert_conforms(MULTI_HEAD, load_function(target), names=names, layouts=layouts).ok
    without_layout = conform(MULTI_HEAD, load_function(target), names=names, cases=2)
    assert not without_layout.ok  # square weights: the shapes fit, the values do not


def test_the_command_line_takes_names_and_layouts(capsys, tmp_path):
    target = f"{module(tmp_path, 'torch_style_cli', TORCH_STYLE)}:mha"
    args = [f"--name={s}={p}" for s, p in (("X", "x"), ("W_Q", "q_proj"), ("W_K", "k_proj"),
                                            ("W_V", "v_proj"), ("W_O", "o_proj"),
                                            ("H", "num_heads"), ("Y", "out"))]
    args += [f"--layout={w}=transpose" for w in ("W_Q", "W_K", "W_V", "W_O")]
    code, out, err = run(capsys, MULTI_HEAD, target, *args, "--cases", "3")
    assert code == 0, out + err
    code, _, err = run(capsys, MULTI_HEAD, target, *args, "--layout", "X=2,0,1")
    assert code == 2 and "layout `2,0,1` for `X`" in err


def test_a_permutation_layout(tmp_path):
    impl = implementation(tmp_path, 'np_nhd', '''
        import numpy as np
        def attention(Q, K, V):  # takes and returns [d, N]
            S = Q.T @ K / np.sqrt(Q.shape[0])
            P = np.exp(S - S.max(axis=1, keepdims=True))
            return ((P / P.sum(axis=1, keepdims=True)) @ V.T).T
    ''', 'attention')
    layouts = {"Q": (1, 0), "K": "transpose", "V": "transpose", "O": "transpose"}
    assert conform(SINGLE_HEAD, impl, layouts=layouts).ok


@pytest.mark.parametrize(("names", "layouts", "expected"), [
    ({"Z": "z"}, {}, "`Z` is not an input, param, output or dim of the spec"),
    ({}, {"N": "transpose"}, "`N` is not an input, param or output of the spec"),
    ({}, {"Q": (0, 0)}, "layout `0,0` for `Q` (declared [N, d])"),
    ({}, {"Q": "flip"}, "layout `flip` for `Q`"),
])
def test_a_mapping_that_does_not_fit_the_spec_is_a_usage_error(tmp_path, names, layouts, expected):
    impl = load_function(f"{module(tmp_path, 'np_usage', NUMPY_SINGLE)}:attention")
    with pytest.raises(UsageError) as caught:
        conform(SINGLE_HEAD, impl, names=names, layouts=layouts)
    assert expected in str(caught.value)


def test_a_function_whose_parameters_do_not_fit_is_a_usage_error(capsys, tmp_path):
    lower = module(tmp_path, "np_lower", """
        def attention(q, k, v):
            return q
    """)
    code, _, err = run(capsys, SINGLE_HEAD, f"{lower}:attention")
    assert code == 2
    assert "the function has no parameter `Q`, `K`, `V` (its parameters: q, k, v)" in err
    assert "--name Q=q --name K=k --name V=v" in err
    extra = module(tmp_path, "np_extra", """
        def attention(Q, K, V, scale):
            return Q
    """)
    code, _, err = run(capsys, SINGLE_HEAD, f"{extra}:attention")
    assert code == 2 and "parameter `scale` has no value" in err
    anything = module(tmp_path, "np_kwargs", """
        import numpy as np
        def attention(**arrays):
            Q, K, V = arrays["Q"], arrays["K"], arrays["V"]
            S = Q @ K.T / np.sqrt(Q.shape[1])
            P = np.exp(S - S.max(axis=1, keepdims=True))
            return (P / P.sum(axis=1, keepdims=True)) @ V
    """)
    # **kwargs takes only what --name (or --arg) gives it, never every input silently
    code, out, err = run(capsys, SINGLE_HEAD, f"{anything}:attention")
    assert code == 2 and "--name Q=PARAM --name K=PARAM --name V=PARAM" in err
    code, out, err = run(capsys, SINGLE_HEAD, f"{anything}:attention",
                         "--name", "Q=Q", "--name", "K=K", "--name", "V=V")
    assert code == 0, out + err


# --- what the function returns ---------------------------------------------------------------


@pytest.mark.parametrize(("body", "expected"), [
    ("return Q @ K.T", "it has shape [3, 3], but the spec's is [N, d] = [3, 5] at the binding"),
    ("return None", "the function returned None for it, not an array"),
    ("return 'text'", "the function returned a str for it, not an array"),
    ("return (Q, Q)", "the function returned 2 value(s); the spec has 1 output(s): `O`"),
    ("return {'P': Q}", "the function's result has no entry `O` (it has: P)"),
    ("return Q * float('nan')", "the spec gives"),
])
def test_what_the_function_returns_is_checked(tmp_path, body, expected):
    impl = implementation(tmp_path, "np_returns", f"def attention(Q, K, V):\n    {body}\n")
    result = conform(SINGLE_HEAD, impl, shrink=False)
    assert result.failure is not None
    assert expected in result.report()


def test_several_outputs_by_tuple_or_mapping(tmp_path):
    source = "dim N, d\ninput Q: [N, d]\noutput A = Q * 2\noutput B = Q.T\n"
    as_tuple = implementation(tmp_path, 'np_two', '''
        def f(Q):
            return Q * 2, Q.T
    ''', 'f')
    as_mapping = implementation(tmp_path, 'np_map', '''
        def f(Q):
            return {"B": Q.T, "A": Q + Q}
    ''', 'f')
    single = implementation(tmp_path, 'np_one', '''
        def f(Q):
            return Q * 2
    ''', 'f')
    assert conform(source, as_tuple).ok and conform(source, as_mapping).ok
    assert "the function returned one value; the spec has 2 outputs" in conform(source, single).report()


def test_a_float32_result_is_compared_at_float32_tolerance(tmp_path):
    impl = implementation(tmp_path, 'np_f32', '''
        import numpy as np
        def attention(Q, K, V):
            Q, K, V = (a.astype(np.float32) for a in (Q, K, V))
            S = Q @ K.T / np.float32(np.sqrt(Q.shape[1]))
            P = np.exp(S - S.max(axis=1, keepdims=True))
            return (P / P.sum(axis=1, keepdims=True)) @ V
    ''', 'attention')
    assert conform(SINGLE_HEAD, impl).ok  # float32 arithmetic, judged as float32
    assert conform(SINGLE_HEAD, impl, dtype="float32").ok
    assert not conform(SINGLE_HEAD, impl, rtol=1e-12, atol=1e-14, cases=1).ok


def test_a_small_error_fails_in_float64(tmp_path):
    # rmsnorm with eps 1e-6 instead of the spec's default 1e-5: invisible in float32
    source = "dim N, d\ninput X: [N, d]\noutput Y = rmsnorm(X)\n"
    impl = implementation(tmp_path, 'np_eps', '''
        import numpy as np
        def norm(X):
            return X / np.sqrt(np.mean(X * X, axis=-1, keepdims=True) + 1e-6)
    ''', 'norm')
    assert not conform(source, impl, names={"Y": "Y"}).ok
    assert conform(source, impl, dtype="float32").ok


# --- failures of the function and of the spec ----------------------------------------------------


def test_a_function_that_raises_exits_2_with_its_message(capsys, tmp_path):
    impl = module(tmp_path, "np_raises", """
        def attention(Q, K, V):
            if Q.shape[0] > 2:
                raise ValueError("sequence too long")
            return Q
    """)
    code, out, err = run(capsys, SINGLE_HEAD, f"{impl}:attention")
    assert code == 2
    assert "the function raised at N=3, d=1 (the smallest failing binding; it first failed at " \
           "N=3, d=5): ValueError: sequence too long" in err
    with pytest.raises(ValueError, match="sequence too long") as caught:
        assert_conforms(SINGLE_HEAD, load_function(f"{impl}:attention"))
    if sys.version_info >= (3, 11):  # exceptions carry notes from 3.11 on
        assert any("at N=3, d=1" in note for note in caught.value.__notes__)
    with pytest.raises(FunctionFailed):
        conform(SINGLE_HEAD, load_function(f"{impl}:attention"))


@pytest.mark.parametrize(("target", "expected"), [
    ("no_colon", "`no_colon` is not MODULE:FUNCTION"),
    ("no_such_module_here:f", "cannot import `no_such_module_here`"),
    ("{dir}/missing.py:f", "missing.py`: no such file"),
    ("{dir}/broken_import.py:f", "raised ZeroDivisionError: division by zero"),
    ("{dir}/fine.py:g", "`{dir}/fine.py` has no attribute `g`"),
    ("{dir}/fine.py:VALUE", "is a int, not a function"),
    ("{dir}/fine.py:Model", "is a class but not an `nn.Module`; name a function, an"),
])
def test_a_target_that_cannot_be_imported_exits_2(capsys, tmp_path, target, expected):
    module(tmp_path, "broken_import", "x = 1 / 0\n")
    module(tmp_path, "fine", "VALUE = 3\nclass Model:\n    pass\ndef f(Q, K, V):\n    return Q\n")
    code, _, err = run(capsys, SINGLE_HEAD, target.format(dir=tmp_path))
    assert code == 2
    assert expected.format(dir=tmp_path) in err


def test_a_spec_that_does_not_verify_exits_1(capsys, tmp_path):
    impl = module(tmp_path, "np_any", NUMPY_SINGLE)
    code, _, err = run(capsys, EXAMPLES / "broken" / "missing_transpose.attn", f"{impl}:attention")
    assert code == 1 and "error[SC301]" in err and "does not verify" in err
    with pytest.raises(AssertionError, match="SC301"):
        assert_conforms(EXAMPLES / "broken" / "missing_transpose.attn",
                        load_function(f"{impl}:attention"))
    code, _, err = run(capsys, tmp_path / "absent.attn", f"{impl}:attention")
    assert code == 2 and "cannot read" in err


def test_a_module_on_the_current_folder_is_importable(capsys, tmp_path, monkeypatch):
    module(tmp_path, "my_attention_impl", NUMPY_SINGLE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run(capsys, SINGLE_HEAD, "my_attention_impl:attention", "--cases", "2")
    assert code == 0, out + err


@pytest.mark.slow
def test_conform_does_not_import_torch_for_a_numpy_function(tmp_path):
    import subprocess

    impl = module(tmp_path, "np_plain", NUMPY_SINGLE)
    probe = subprocess.run(
        [sys.executable, "-c",
         "import sys; from shapecheck.cli import main\n"
         "try:\n    main(['conform', sys.argv[1], sys.argv[2], '--cases', '1'])\n"
         "except SystemExit as done:\n    print(done.code, 'torch' in sys.modules)",
         str(SINGLE_HEAD), f"{impl}:attention"],
        capture_output=True, text=True, timeout=120, check=False)
    assert probe.stdout.split()[-2:] == ["0", "False"], probe.stdout + probe.stderr
