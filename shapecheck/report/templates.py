"""Every piece of text the report shows, in one place.

A template is a ``str.format`` pattern. :func:`rich` fills it with fields that may be
plain text or styled segments (names as code, shapes, formulas, check marks), so the
HTML and Markdown renderers style the same words the same way; :func:`text` fills it
with plain strings.
"""

from __future__ import annotations

import re
from string import Formatter
from typing import Union

from ..formats.source import printable_line
from ..i18n import Table

TEXT: Table = Table("report", "TEXT", {
    # --- page ---------------------------------------------------------------------------
    "html_lang": "en",
    "title": "Shape report: {path}",
    "generator": "shapecheck {version}",
    "verdict_ok": "verifies",
    "verdict_ok_warnings": "verifies, with {warnings}",
    "verdict_errors": "does not verify: {errors}, {warnings}",
    "bindings": "Concrete sizes: {bindings}.",
    "no_bindings": "No concrete sizes: shapes and costs are symbolic (give `--dim NAME=INT` to "
    "evaluate them).",
    "dtype": "Bytes are counted at {dtype} ({size} bytes per element; bool: 1).",
    "footer": "Written by shapecheck {version}. The same spec and options give the same file.",
    "contents": "Contents",
    "model_title": "Shape report of a whole model: {target}",
    "sec_layers": "Attention layers",
    "intro_layers": "Each attention layer is checked as the model calls it. Layers that share "
    "code, settings and the form of their call are traced once and listed together.",
    "sec_rest": "The rest of the model",
    "intro_rest": "Not attention: named here by kind, not traced (only the attention layers "
    "and the masks the model builds for them are checked).",
    "layer_detail": "{kind}, {count} layer(s); {where}",
    # --- sections -----------------------------------------------------------------------
    "sec_problems": "Problems",
    "sec_source": "Annotated source",
    "sec_dims": "Dims and constraints",
    "sec_cards": "Cheat cards",
    "sec_masks": "Masks",
    "intro_masks": "Each mask and score change the spec defines as a function of positions, "
    "as written, then drawn: N queries × N keys give a table, one row per query; the mask "
    "decides which keys each query may see.",
    "mask_lengths": "queries: {queries}, keys: {keys}",
    "mask_drawn": "drawn at {sizes}",
    "mask_explained": "Row i is query i, column j key j. {seen}: query i may see key j (its "
    "score is kept); {hidden}: key j is hidden from query i (its weight after the softmax "
    "along the row is 0); {depends}: the inputs' values decide.",
    "mask_score_explained": "A score change: it rewrites each score of query i against key j "
    "before the softmax along the row.",
    "mask_row": "query {query} may see keys {keys}",
    "mask_row_depends": "query {query} may see keys {keys}, as the inputs decide",
    "mask_row_none": "query {query} sees no key: its softmax row has nothing to weigh",
    "mask_proved": "proved",
    "mask_refuted": "refuted",
    "mask_undetermined": "undetermined",
    "sec_cost": "Cost",
    "sec_reasoning": "Reasoning",
    "sec_graph": "Dataflow",
    "intro_source": "Every statement with its symbolic shape{concrete}; problems are shown "
    "where they occur, as `shapecheck verify` prints them.",
    "intro_source_concrete": " and its shape at the concrete sizes",
    "intro_cards": "The notes' one-line cheat card, filled in for each attention pattern "
    "found (`softmax(scores) @ values`). Database analogy: Q is the query, K the index (key), "
    "V the content (value); QKᵀ scores the query against every key, softmax turns the scores "
    "into weights, and multiplying by V reads the content out by weight.",
    "no_cards": "No attention pattern (`softmax(…) @ values`) was found in this spec.",
    "unfilled_cards": "An attention pattern on line {lines} has shapes that are unknown "
    "because of the errors above: its card is left out.",
    "intro_cost": "Floating-point operations per statement and the bytes of each result, "
    "as expressions in the spec's dims{evaluated}. Conventions: a matmul [a, b] @ [b, c] costs "
    "2·a·b·c (batch axes multiply); elementwise operations and functions (comparisons and "
    "& | ~ included) 1 per element; softmax 5 per element (max, subtract, exp, sum, divide); "
    "layernorm 5 and rmsnorm 3 per element; a reduction 1 per input element; einsum 2 per "
    "term of its sum; data movement (reshapes, transposes, heads, repeat, concat, stack, "
    "indexing and slicing, where, masks, tril/triu, arange) and constants 0; operations on "
    "scalars are not counted.",
    "intro_cost_evaluated": ", evaluated at the concrete sizes",
    "intro_reasoning": "Don't memorise, reason: for each `@`, the notes' 30-second self-check "
    "(the operand shapes, the inner dimensions that must agree and why they do, the index "
    "form); for each softmax, the axis and what sums to 1; for each reshape, the element "
    "counts and what they needed.",
    "intro_graph": "Inputs and params on the left, each statement in the column after "
    "everything it reads, outputs on the right; every edge carries the shape that flows "
    "along it.",
    "link_picture": "in the picture",
    "link_card": "card {number}",
    "link_line": "line {line}",
    # --- tables -------------------------------------------------------------------------
    "col_line": "line",
    "col_source": "source",
    "col_shape": "shape",
    "col_concrete": "at the sizes",
    "col_dim": "dim",
    "col_kind": "kind",
    "col_definition": "definition or binding",
    "col_value": "value",
    "col_constraint": "constraint",
    "col_status": "status",
    "col_used": "used as a proof",
    "col_role": "role",
    "col_tensor": "tensor",
    "col_meaning": "what it is",
    "col_statement": "statement",
    "col_flops": "FLOPs",
    "col_bytes": "bytes of the result",
    "col_ops": "operations",
    "total": "total",
    "total_partial": "total (statements with errors left out)",
    "unknown": "unknown",
    "none": "—",
    # --- source annotations ------------------------------------------------------------
    "ann_dim_free": "free",
    "ann_dim_bound": "{name} = {value}",
    "ann_constraint": "constraint",
    "ann_output": "output",
    "ann_assert": "assert",
    "ann_broken": "does not parse",
    "ann_failed": "failed",
    # --- dims and constraints ----------------------------------------------------------
    "kind_free": "free",
    "kind_derived": "derived",
    "kind_fixed": "fixed",
    "kind_determined": "determined",
    "dim_free": "any positive integer",
    "dim_inferred": "any positive integer; not declared: inferred from the uses",
    "dim_bound": "bound: {binding}",
    "dim_derived": "{name} = {definition}",
    "dim_fixed": "{name} = {value}",
    "dim_eliminated": "determined by {constraint} (line {line}): {name} = {value}",
    "status_violated": "violated: {message}",
    "status_trivial": "holds trivially (it adds nothing)",
    "status_holds": "holds at the concrete sizes: {left} = {right}",
    "status_holds_ineq": "holds at the concrete sizes",
    "status_assumed": "assumed for every size (it eliminates {name})",
    "status_relation": "assumed for every size (used by the checker's algebra)",
    "status_bound": "assumed: a lower bound",
    "status_failed": "not checked: it has an error",
    "used_at": "line {line} ({what})",
    "never_used": "not needed by any check of this spec",
    "no_constraints": "The spec declares no constraints.",
    "no_dims": "The spec declares no dims.",
    "identity_lead": "Multi-head identity {identity}: {status}",
    "identity_other": "Multi-head: {status}",
    # --- proofs ------------------------------------------------------------------------
    "how_algebra": "(by algebra)",
    "how_definition": "by the definition of {names}",
    "how_constraint": "by {constraints}",
    "how_bindings": "at the concrete sizes {bound}",
    "how_bindings_with": "at the concrete sizes {bound}, with {constraints}",
    "how_relations": "by the declared constraints",
    "constraint_ref": "{constraint} (line {line})",
    "and": " and ",
    "see_problem": "see {code} on line {line}",
    # --- identity ------------------------------------------------------------------------
    "identity_proved": "holds {how}",
    "identity_bindings": "holds at the concrete sizes: {left} = {right}",
    "identity_violated": "violated at the concrete sizes: {left} ≠ {right}",
    "identity_unproved": "not proved: nothing in the spec says so",
    "identity_single": "one head: the notes' recipe as it is",
    "identity_given": "Q is given directly (an input), not projected from a model width",
    "identity_untraced": "not traced: the report cannot follow Q back to a projection of a model "
    "width",
    "identity_unknown": "not known: Q's shape is unknown",
    "identity_trivial": "holds trivially: the spec writes the model width as {value} itself",
    # --- cards ---------------------------------------------------------------------------
    "card_title": "Attention {number}: {statement} (line {line})",
    "card_line": "Q/K/V: {qkv} · scores S = QKᵀ: {scores} · weights P = softmax(S): {weights} "
    "({axis}) · output O = PV: {output} · multi-head: {identity}",
    "card_qkv_differ": "Q {q}, K {k}, V {v}",
    "role_query": "Q: query",
    "role_key": "K: index (key)",
    "role_value": "V: content (value)",
    "role_scores": "S = QKᵀ: scores",
    "role_weights": "P = softmax(S): weights",
    "role_output": "O = PV: output",
    "role_core": "cost of the core",
    "mean_query": "what each of the {queries} queries looks for: one {d}-vector per query",
    "mean_key": "what each of the {keys} keys is found by; its inner size {d} must equal the "
    "query's",
    "mean_value": "the content read out: one {dv}-vector per key",
    "mean_scores": "{queries} queries × {keys} keys: a table of match scores{per}",
    "mean_scores_per": ", one table for each {heads}",
    "mean_weights": "softmax along {axis}: {sums}",
    "mean_weights_keys": "each query's weights over the {keys} keys sum to 1",
    "mean_weights_wrong": "this axis is not the keys' axis: each query's weights do not sum to 1",
    "mean_weights_wrong_warned": "this axis is not the keys' axis: each query's weights do not "
    "sum to 1 (see the warning)",
    "mean_output": "each query's weighted sum of the values: one {dv}-vector per query; "
    "attention mixes tokens, it does not change each token's vector size",
    "mean_output_then": "; then {statement} gives {name} {shape}",
    "mean_core": "QKᵀ and PV together",
    "keys_given_transposed": "{text} (the keys, given already transposed)",
    "axis_row": "row (the last axis)",
    "axis_col": "col (the second-to-last axis)",
    "axis_int": "axis {axis}",
    "step_failed_because": "failed: {problem}",
    "step_unknown": "unknown",
    # --- the card's checks: the notes' 30-second self-check, the axes, the scale -------------
    "checks": "30-second self-check",
    "check_inner": "1. inner dims of QKᵀ",
    "check_inner_ok": "inner {left} = {right}",
    "check_inner_bad": "inner {left} ≠ {right}",
    "check_fix": " → {fix}",
    "check_inner_einsum": "the contracted letters agree: {d}",
    "check_no_scores": "no scores product before the softmax: {problem}",
    "check_no_scores_found": "no scores product (`Q @ K.T`) was found before the softmax",
    "check_cannot": "cannot be checked: {problem}",
    "check_unknown": "unknown",
    "check_output": "2. output N×d",
    "check_output_ok": "{output}: one {width}-vector for each of the {rows} queries",
    "check_output_shape": "{output}",
    "check_output_final": "; then the output {name} is {shape}",
    "check_output_after": "{output}: one {width}-vector for each of the {rows} queries, but what "
    "follows fails: {statement}",
    "check_output_annotation": "{message}",
    "check_axes": "axes",
    "check_axes_ok": "the queries ({queries}) are axis {query_axis}, the keys ({keys}) axis {axis}; "
    "softmax normalises over the keys, axis {axis}; {output} sums over the same axis",
    "check_axes_bad": "softmax normalises axis {normalised} of its scores, but {output} sums over "
    "axis {summed} of them: each output row is a sum that is not a weighted average of the values",
    "check_axes_bad_unknown": "{output} does not sum over the axis the softmax normalises",
    "check_axes_unknown": "the axes cannot be followed here",
    "check_cannot_axes": "cannot be checked: the shapes are unknown",
    "check_scale": "scale",
    "check_scale_none": "none: the notes' one-line formula leaves it out; models usually divide "
    "by sqrt(d)",
    "check_scale_other": "{scale}: not of the form 1/sqrt(X), no opinion",
    "check_scale_ok": "{scale} is 1/sqrt({size}), and the scores sum over {d}",
    "check_scale_bad": "{scale} is 1/sqrt({size}), but the scores sum over {d}",
    "check_scale_inverted": "{scale} multiplies by sqrt({d}) where the notes divide by it",
    "scale_on": " (on {operand}, before the product)",
    "check_mask": "mask",
    "check_mask_ok": "{mask}, applied to the scores before the softmax",
    "check_mask_bad": "{mask}",
    "check_mask_causal": "{mask}: query i sees the keys {keys}",
    "check_mask_aligned": "{mask}: causal, each query sees the keys up to its own position",
    "check_mask_transposed": "{mask}: each query sees the keys after it, not the ones before it",
    "check_mask_after": "{mask} is applied after the softmax: the weights no longer sum to 1",
    "check_weights": "weights",
    "check_changed": "{change} changes the weights after the softmax: they no longer sum to 1",
    "by_row": "by row",
    "by_axis": "by {axis}",
    # --- cost ----------------------------------------------------------------------------
    "largest": "Largest intermediate: {name} {shape}, {elements} elements = {bytes} bytes{at}.",
    "largest_at": " ({value} at the concrete sizes)",
    "largest_growth": "It grows as {growth} with the sequence lengths.",
    "largest_growth_square": "It grows as {growth}: quadratically with the sequence length.",
    "largest_table": "It is the notes' {rows}×{cols} table of match scores.",
    "blank_failed": "failed",
    "unbound": "{names} unbound",
    "unbound_dim": "unbound",
    "no_largest": "No intermediate has a known shape.",
    "op_matmul": "matmul",
    "op_elementwise": "elementwise",
    "op_einsum": "einsum",
    "op_reduce": "reduction",
    "op_move": "data movement",
    "op_softmax": "softmax",
    "op_layernorm": "layernorm",
    "op_rmsnorm": "rmsnorm",
    "op_count": "{count}× {op}",
    # --- reasoning -------------------------------------------------------------------------
    "step_matmul": "{left} {lshape} @ {right} {rshape}: inner {inner_left} = {inner_right} "
    "{mark} {how}→ {result}",
    "step_matmul_batch": "; batch axes {lbatch} and {rbatch} → {batch} {mark} {how}",
    "step_matmul_failed": "{left} {lshape} @ {right} {rshape}: inner {inner_left} vs "
    "{inner_right} {mark} {problem}",
    "step_softmax": "softmax({x}) along {axis} of {shape} (size {size}): {sums}",
    "step_softmax_sums": "Σ_{index} {name}[{indices}] = 1 for every {others}",
    "step_softmax_sums_all": "Σ_{index} {name}[{indices}] = 1",
    "step_reshape": "reshape {x} {source} → {target}: {source_count} = {target_count} elements "
    "{mark} {how}",
    "step_reshape_inferred": "reshape {x} {source} → {target}: the −1 is {inferred}; "
    "{denominator} divides {numerator} {mark} {how}",
    "step_split": "split_heads {x} {source} → {result}: last axis {last} = {heads} heads × "
    "{per_head} {mark} {how}",
    "step_merge": "merge_heads {x} {source} → {result}: the {heads} heads of {per_head} side "
    "by side, {width} per token",
    "step_einsum": "einsum {subscripts} of {operands} → {result}{letters}",
    "step_einsum_letters": ": {checks}",
    "step_einsum_letter": "{letter}: {sizes} {mark} {how}",
    "step_where": "where({condition}, {x}, {y}): {cshape}, {xshape} and {yshape} broadcast to "
    "{result} {mark} {how}",
    "step_repeat": "repeat {x} {source} {times} along axis {axis} → {result}",
    "step_transpose": "transpose {x} {source} by {perm} → {result}",
    "step_concat": "concat along axis {axis}: {parts} → {result}",
    "step_broadcast": "{left} {lshape} {op} {right} {rshape} broadcast to {result} {mark} {how}",
    "step_annotation": "{what} {name}: {declared} = computed {actual} {mark} {how}",
    "step_annotation_failed": "{what} {name}: {declared}, but computed {actual} {mark} {problem}",
    "step_failed": "{what} {mark} {problem}",
    "what_annotation": "annotation",
    "what_assert": "assert",
    "what_output": "output",
    "index_form": "index form: {formula}",
    # --- dataflow ------------------------------------------------------------------------
    "graph_title": "Dataflow of {path}",
    "legend_input": "input",
    "legend_param": "param",
    "legend_defined": "statement",
    "legend_output": "output",
    "legend_failed": "failed (an error, or an unknown shape)",
    "no_tensors": "The spec has no tensors to draw.",
    "no_graph": "The picture is left out: {count} tensors are too many to draw readably.",
    "no_steps": "No operation to reason about.",
})

Seg = tuple[str, str]
"""A styled piece of text: (style, text). Styles: text, code, shape, math, ok, bad.

In a template, a `backquoted` word is code; fields are inserted as they are given."""

Rich = tuple[Seg, ...]
Field = Union[str, Seg, Rich]

_FORMATTER = Formatter()


def text(key: str, **fields: object) -> str:
    return TEXT[key].format(**fields)


def rich(key: str, **fields: Field) -> Rich:
    """The template ``key`` with each field inserted as text or as styled segments."""
    out: list[Seg] = []
    for literal, name, _, _ in _FORMATTER.parse(TEXT[key]):
        # `backquoted` words of a template are code (an odd number of ` is a typo in TEXT).
        for index, part in enumerate(literal.split("`")):
            out.append(("code" if index % 2 else "text", part))
        if name is not None:
            out.extend(as_rich(fields[name]))
    # An empty field leaves its spaces behind: tidy them.
    tidy = [(style, re.sub(" {2,}", " ", value)) if style == "text" else (style, value)
            for style, value in join(out)]
    if tidy and tidy[-1][0] == "text":
        tidy[-1] = ("text", tidy[-1][1].rstrip())
    return join(tidy)


def as_rich(value: Field | int) -> Rich:
    if isinstance(value, int):
        value = str(value)
    if isinstance(value, str):  # user text may be in it: invisible characters are shown
        return (("text", printable_line(value)),) if value else ()
    if value and isinstance(value[0], str):
        return (value,)  # type: ignore[return-value]
    return value  # type: ignore[return-value]


def join(parts: list[Seg] | Rich, *more: Field) -> Rich:
    """Concatenate segments, merging neighbouring plain text."""
    out: list[Seg] = []
    for seg in list(parts) + [s for m in more for s in as_rich(m)]:
        if not seg[1]:
            continue
        if out and seg[0] == "text" and out[-1][0] == "text":
            out[-1] = ("text", out[-1][1] + seg[1])
        else:
            out.append(seg)
    return tuple(out)


def code(value: str) -> Seg:
    return ("code", printable_line(value))


def shape(value: str) -> Seg:
    return ("shape", printable_line(value))


def math(value: str) -> Seg:
    return ("math", printable_line(value))


def mark(ok: bool) -> Seg:
    return ("ok", "✓") if ok else ("bad", "✗")


def inline(value: str) -> Rich:
    """A message as the registry writes it: its `backquoted` parts are code."""
    parts = value.split("`")
    if len(parts) % 2 == 0:  # an unpaired backquote: all of it is text
        return as_rich(value)
    return join([code(part) if index % 2 else ("text", printable_line(part))
                 for index, part in enumerate(parts)])


def formula_terms(value: str) -> list[tuple[str, str]]:
    """A printed formula as (operator, term) pairs: `2·N²·d + N²` -> [("", "2·N²·d"), ("+", "N²")],
    so a renderer keeps each term whole and lets the sum wrap between terms."""
    pieces = re.split(r" ([+−-]) ", value)
    return [("", pieces[0])] + [(pieces[i], pieces[i + 1]) for i in range(1, len(pieces) - 1, 2)]


def plain(value: Field) -> str:
    return "".join(seg[1] for seg in as_rich(value))


def listing(items: list[Rich], separator: str = ", ") -> Rich:
    out: list[Seg] = []
    for index, item in enumerate(items):
        if index:
            out.append(("text", separator))
        out.extend(item)
    return join(out)
