"""The generated differential corpus: attention specs whose every variant must agree.

Each spec is one attention, written the many ways codebases write it: the scale on the
scores, on Q, on K or on both, inline or in a statement of its own, as a divisor, a power
or a named scalar; a soft-cap; a bias named or inline, added or subtracted; a mask named,
negated, sliced, transposed, combined with a padding mask, turned into an additive bias,
or filled with a finite value; masks and biases as functions of positions (`def f(q, k)`:
causal, a window, a document mask looking up an input, a relative bias) applied through
`where` or by `flex_attention` (with a score change); in several layouts (``[N, d]``, batched, heads first,
heads second through ``transpose``, ``einsum``, keys stored transposed), with several
choices of letters, and inputs reshaped or transposed through size-1 axes.

:func:`corpus` yields ``(label, text)`` pairs from a seed, so a spec is reproducible
from its label. ``tests/test_plan_differential.py`` runs a fixed part of it in CI; this
script runs a larger sweep::

    python tools/plan_corpus.py --count 2000 --bindings 3     # prints figures and failures
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LETTERS = [("Q", "K", "V"), ("query", "key", "value"), ("xq", "xk", "xv")]
DIM_LETTERS = [("N", "M", "d", "e", "B", "H"), ("T", "Sk", "D", "E", "Bt", "Hd"),
               ("n", "m", "k_dim", "v_dim", "b", "h")]
LAYOUTS = ["nd", "bnd", "bhnd", "bnhd", "einsum", "keys_t", "size1"]
SCALES = ["none", "scores_div", "scores_pow", "named_q", "named_k", "both", "inline_q",
          "named_scalar", "next_statement", "split"]
BIASES = ["none", "inline", "named", "subtract", "positions", "function"]
MASKS = ["none", "causal", "named", "negated", "additive", "padding", "sliced", "finite",
         "transposed", "positions", "function", "window", "document", "flex"]


@dataclass(frozen=True)
class Choice:
    layout: str
    scale: str
    bias: str
    mask: str
    softcap: bool
    cross: bool
    named_scores: bool
    named_weights: bool
    letters: int
    dims: int

    @property
    def label(self) -> str:
        return (f"{self.layout}-{self.scale}-{self.bias}-{self.mask}"
                f"{'-cap' if self.softcap else ''}{'-cross' if self.cross else ''}"
                f"{'-S' if self.named_scores else ''}{'-P' if self.named_weights else ''}"
                f"-L{self.letters}{self.dims}")


def corpus(seed: int, count: int) -> Iterator[tuple[str, str]]:
    """``count`` specs as (label, text)."""
    rng = random.Random(f"corpus:{seed}")
    for number in range(count):
        choice = Choice(rng.choice(LAYOUTS), rng.choice(SCALES), rng.choice(BIASES),
                        rng.choice(MASKS), rng.random() < 0.15, rng.random() < 0.3,
                        rng.random() < 0.5, rng.random() < 0.5, rng.randrange(len(LETTERS)),
                        rng.randrange(len(DIM_LETTERS)))
        if number < len(LAYOUTS) * 2:  # the first specs cover every option at least once
            choice = Choice(LAYOUTS[number % len(LAYOUTS)], SCALES[number % len(SCALES)],
                            BIASES[number % len(BIASES)], MASKS[number % len(MASKS)],
                            number % 5 == 4, number % 3 == 2, number % 2 == 0, number % 4 < 2,
                            number % len(LETTERS), number % len(DIM_LETTERS))
        yield choice.label, Writer(choice).text()


class Writer:
    """One spec's text from a :class:`Choice`."""

    def __init__(self, choice: Choice) -> None:
        self.c = choice
        self.q, self.k, self.v = LETTERS[choice.letters]
        n, m, d, e, b, h = DIM_LETTERS[choice.dims]
        self.n, self.m, self.d, self.e, self.b, self.h = n, (m if choice.cross else n), d, e, b, h
        self.lines: list[str] = []
        self.scale_text = f"sqrt({d})"

    # the axes in front of the [rows, features] of each tensor
    def batch(self) -> list[str]:
        return {"nd": [], "keys_t": [], "size1": [], "bnd": [self.b], "bhnd": [self.b, self.h],
                "bnhd": [self.b, self.h], "einsum": [self.h]}[self.c.layout]

    def shape(self, rows: str, cols: str) -> str:
        return "[" + ", ".join([*self.batch(), rows, cols]) + "]"

    def text(self) -> str:
        c, n, m, d, e = self.c, self.n, self.m, self.d, self.e
        dims = sorted({n, m, d, e, *self.batch()}, key=[n, m, d, e, self.b, self.h].index)
        self.lines.append("dim " + ", ".join(dims))
        if c.mask == "flex":
            return self.flex()
        self.inputs()
        query, key = self.scaled_parts()
        scores = self.product(query, key)
        scores = self.scores_scale(scores)
        if c.softcap:
            self.lines.append(f"capped = 30.0 * tanh(({scores}) / 30.0)")
            scores = "capped"
        scores = self.biased(scores)
        scores = self.masked(scores)
        if c.named_scores:
            self.lines.append(f"S = {scores}")
            scores = "S"
        weights = f"softmax({scores})"
        if c.named_weights:
            self.lines.append(f"P = {weights}")
            weights = "P"
        self.lines.append(f"output O = {self.contract(weights)}")
        return "\n".join(self.lines) + "\n"

    def inputs(self) -> None:
        q, k, v, n, m, d, e = self.q, self.k, self.v, self.n, self.m, self.d, self.e
        layout = self.c.layout
        if layout == "bnhd":  # stored [B, N, H, d], moved heads first (a view)
            b, h = self.b, self.h
            for name, rows, cols in ((q, n, d), (k, m, d), (v, m, e)):
                self.lines.append(f"input {name}_in: [{b}, {rows}, {h}, {cols}]")
            for name in (q, k, v):
                self.lines.append(f"{name} = transpose({name}_in, [0, 2, 1, 3])")
            return
        if layout == "size1":  # stored with a size-1 axis, reshaped (or transposed) away
            self.lines.append(f"input {q}_in: [{n}, 1, {d}]")
            self.lines.append(f"input {k}_in: [{d}, {m}]")
            self.lines.append(f"input {v}_in: [1, {m}, {e}]")
            self.lines.append(f"{q} = reshape({q}_in, [{n}, {d}])")
            self.lines.append(f"{k} = reshape({k}_in.T, [{m}, {d}])")
            self.lines.append(f"{v} = reshape({v}_in, [{m}, {e}])")
            return
        if layout == "keys_t":
            self.lines.append(f"input {q}: [{n}, {d}]")
            self.lines.append(f"input {k}_t: [{d}, {m}]")
            self.lines.append(f"input {v}: [{m}, {e}]")
            self.lines.append(f"{k} = {k}_t.T")
            return
        if layout == "einsum":
            h = self.h
            self.lines.append(f"input {q}: [{n}, {h}, {d}]")
            self.lines.append(f"input {k}: [{m}, {h}, {d}]")
            self.lines.append(f"input {v}: [{m}, {h}, {e}]")
            return
        self.lines.append(f"input {q}: {self.shape(n, d)}")
        self.lines.append(f"input {k}: {self.shape(m, d)}")
        self.lines.append(f"input {v}: {self.shape(m, e)}")

    def scaled_parts(self) -> tuple[str, str]:
        q, k, d, scale = self.q, self.k, self.d, self.c.scale
        if scale == "named_q":
            self.lines.append(f"qs = {q} * {d} ** -0.5")
            return "qs", k
        if scale == "named_k":
            self.lines.append(f"ks = {k} / sqrt({d})")
            return q, "ks"
        if scale == "both":
            self.lines.append(f"qs = {q} * {d} ** -0.25")
            self.lines.append(f"ks = {k} * {d} ** -0.25")
            return "qs", "ks"
        if scale == "split":  # half on the named queries, half on the scores
            self.lines.append(f"qs = {q} * {d} ** -0.25")
            return "qs", k
        if scale == "inline_q":
            return f"({q} / sqrt({d}))", k
        return q, k

    def product(self, query: str, key: str) -> str:
        if self.c.layout == "einsum":
            return f'einsum("nhd,mhd->hnm", {query}, {key})'
        return f"{query} @ {key}.T"

    def scores_scale(self, scores: str) -> str:
        d, scale = self.d, self.c.scale
        if scale == "scores_div":
            return f"{scores} / sqrt({d})"
        if scale in ("scores_pow", "split"):
            return f"{scores} * {d} ** -{0.5 if scale == 'scores_pow' else 0.25}"
        if scale == "named_scalar":
            self.lines.append(f"scale = 1 / sqrt({d})")
            return f"({scores}) * scale"
        if scale == "next_statement":
            self.lines.append(f"raw = {scores}")
            return f"raw / sqrt({self.d})"
        return scores

    def table(self) -> str:
        """The shape of a bias over the scores: per head where there are heads."""
        rows = [self.h] if self.c.layout in ("bhnd", "bnhd", "einsum") else []
        return "[" + ", ".join([*rows, self.n, self.m]) + "]"

    def biased(self, scores: str) -> str:
        kind = self.c.bias
        if kind == "none":
            return scores
        if kind == "positions":
            self.lines.append(f"distance = arange({self.m})[None, :] - arange({self.n})[:, None]")
            self.lines.append("bias = 0.125 * distance")
            return f"({scores}) + bias"
        if kind == "function":
            self.lines.append(f"def distance(q, k) = k - q - {self.m} + {self.n}")
            i, j = self.positions()
            return f"({scores}) + 0.125 * distance({i}, {j})"
        self.lines.insert(1, f"input bias: {self.table()}")
        if kind == "inline":
            return f"({scores}) + bias"
        if kind == "subtract":
            return f"({scores}) - bias"
        self.lines.append(f"biased = {scores} + bias")
        return "biased"

    def mask_call(self) -> str:
        return (f"causal_mask({self.n})" if self.n == self.m
                else f"causal_mask({self.n}, {self.m})")

    def masked(self, scores: str) -> str:
        kind, n, m = self.c.mask, self.n, self.m
        if kind == "none":
            return scores
        if kind == "causal":
            return f"where({self.mask_call()}, {scores}, -inf)"
        if kind == "named":
            self.lines.append(f"band = {self.mask_call()}")
            return f"where(band, {scores}, -inf)"
        if kind == "negated":
            self.lines.append(f"band = {self.mask_call()}")
            return f"where(~band, -inf, {scores})"
        if kind == "additive":
            self.lines.append(f"band = {self.mask_call()}")
            self.lines.append("hide = where(band, 0.0, -inf)")
            return f"({scores}) + hide"
        if kind == "padding":
            self.lines.insert(1, f"input keep: bool[{m}]")
            self.lines.append(f"allowed = {self.mask_call()} & keep[None, :]")
            return f"where(allowed, {scores}, -inf)"
        if kind == "sliced":
            self.lines.append(f"big = causal_mask({n} + 2, {m} + 2)")
            self.lines.append(f"band = big[2:, 2:]")
            return f"where(band, {scores}, -inf)"
        if kind == "finite":
            return f"where({self.mask_call()}, {scores}, -1e9)"
        if kind == "transposed":  # the key-major mask, read the right way round
            rows = f"causal_mask({m}, {n})" if n != m else f"causal_mask({n})"
            self.lines.append(f"mt = {rows}.T")
            return f"where(mt, -inf, {scores})"
        if kind in ("function", "window", "document"):
            return self.mask_function(kind, scores)
        # positions compared
        self.lines.append(f"i = arange({n})[:, None]")
        self.lines.append(f"j = arange({m})[None, :]")
        return f"where(j <= i, {scores}, -inf)"

    def positions(self) -> tuple[str, str]:
        """The query and key positions, as `flex_attention` writes them."""
        return f"arange({self.n})[:, None]", f"arange({self.m})[None, :]"

    def flex(self) -> str:
        """The whole attention as one `flex_attention` call: a mask function (causal, with
        a document lookup or a window), a score change (a relative bias, or none)."""
        q, k, v, n, m, d, e = self.q, self.k, self.v, self.n, self.m, self.d, self.e
        batch = [] if self.c.layout in ("nd", "keys_t", "size1", "einsum") else self.batch()
        for name, rows, cols in ((q, n, d), (k, m, d), (v, m, e)):
            self.lines.append(f"input {name}: [{', '.join([*batch, rows, cols])}]")
        body = f"k <= q + {m} - {n}"
        if self.c.bias in ("named", "inline"):
            self.lines.insert(1, f"input doc_q: int[{n}]")
            self.lines.insert(2, f"input doc_k: int[{m}]")
            body = f"({body}) & ((doc_q[q] == doc_k[k]) | (k == 0))"
        elif self.c.bias in ("subtract", "positions"):
            body = f"({body}) & (q + {m} - {n} - k < 3)"
        self.lines.append(f"def visible(q, k) = {body}")
        keywords = "mask=visible"
        if self.c.scale != "none":
            self.lines.append("def relative(s, q, k) = s - 0.125 * (q + " + f"{m} - {n} - k)")
            keywords += ", score=relative"
        self.lines.append(f"output O = flex_attention({q}, {k}, {v}, {keywords})")
        return "\n".join(self.lines) + "\n"

    def mask_function(self, kind: str, scores: str) -> str:
        """A mask defined as a function of positions, called on the positions."""
        n, m = self.n, self.m
        self.lines.append(f"def seen(q, k) = k <= q + {m} - {n}")
        name = "seen"
        if kind == "window":
            self.lines.append(f"def band(q, k) = seen(q, k) & (q + {m} - {n} - k < 4)")
            name = "band"
        if kind == "document":
            self.lines.insert(1, f"input doc: int[{m}]")
            self.lines.append(f"def same(q, k) = seen(q, k) & ((doc[q + {m} - {n}] == doc[k]) | (k == 0))")
            name = "same"
        i, j = self.positions()
        if kind == "window":  # named positions, as a spec reads them
            self.lines.append(f"i = {i}")
            self.lines.append(f"j = {j}")
            i, j = "i", "j"
        return f"where({name}({i}, {j}), {scores}, -inf)"

    def contract(self, weights: str) -> str:
        if self.c.layout == "einsum":
            return f'einsum("hnm,mhe->nhe", {weights}, {self.v})'
        return f"{weights} @ {self.v}"


def sweep(seed: int, count: int, bindings: int, backends: tuple[str, ...]) -> int:
    """Run ``count`` specs at ``bindings`` admissible bindings each; print the figures."""
    from shapecheck.api import admissible_bindings, check_text
    from shapecheck.backend.differential import disagreements

    started, checked, runs, failures = time.process_time(), 0, 0, 0
    for label, text in corpus(seed, count):
        program = check_text(text)
        if not program.ok:
            print(f"{label}: does not verify\n{text}")
            failures += 1
            continue
        checked += 1
        for index, bound in enumerate(admissible_bindings(program, bindings, seed=seed)):
            runs += 1
            try:
                problems = disagreements(bound, seed=index, backends=backends)
            except Exception:  # a bug in a plan: reported with its traceback, the sweep goes on
                problems = [traceback.format_exc()]
            if problems:
                failures += 1
                print(f"{label} at {bound.dims.bindings}:\n{text}" + "\n".join(problems))
    print(f"{count} specs ({checked} verify), {runs} bindings, {failures} failures, "
          f"{time.process_time() - started:.1f} s CPU")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--bindings", type=int, default=3)
    parser.add_argument("--backends", default="numpy,torch")
    parser.add_argument("--show", action="store_true", help="print the specs, run nothing")
    args = parser.parse_args(argv)
    if args.show:
        for label, text in corpus(args.seed, args.count):
            print(f"# {label}\n{text}")
        return 0
    return sweep(args.seed, args.count, args.bindings, tuple(args.backends.split(",")))


if __name__ == "__main__":
    sys.exit(main())
