"""Whole models: every attention layer of a model checked in one run (docs/torch.md,
"Whole models").

One entry point, :func:`analyse` (a built target -> :class:`WholeModel`, or None when the
target is not a model holding attention layers below itself): the layers are found and
captured in runs of the model (:mod:`.layers`), the layers traced alike are traced once
(the first of them, called as the model called it) and checked with every pass, and the
masks the model built for them are checked against the layer that reads them.
:func:`check_model` is what ``verify`` reports: each diagnostic once, at its Python line,
with the layers it covers.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...messages import codes
from ...messages.diagnostics import Diagnostic, FileResult, Note, Span
from . import Extraction, ExtractError, Untraceable, extract, extract_built
from .errors import MESSAGES, Location, python_source
from .layers import Group, Layer, find, group, span_of_names
from .sourcemap import Results, Traced, check_extraction

#: where in the line that built a mask SC610 and SC611 point
_MASK_ANCHORS = ("triu", "tril", "masked_fill", "where", "ones", "=")
#: where in the line that numbered the positions SC612 points
_POSITION_ANCHORS = ("arange", "=")
#: an additive mask's dropped entries are at most this (HF's `finfo.min`, `-1e9`, `-inf`)
_DROPPED = -1e4


@dataclass
class Checked:
    """One group of layers, traced once and checked."""

    group: Group
    traced: Traced
    extraction: Extraction | None = None


@dataclass
class WholeModel:
    """A model's attention layers checked, and what else it is made of."""

    target: str
    checked: list[Checked]
    #: the rest of the model by kind ("embeddings", "MLPs", "norms", "heads"): module names
    others: dict[str, list[str]] = field(default_factory=dict)
    #: the model's masks that a layer reads as letting a query see later keys (SC610) or as
    #: leaving a query no key (SC611); its positions numbering new tokens from 0 (SC612)
    mask_findings: list[tuple[Location, Diagnostic]] = field(default_factory=list)


def analyse(built: Any, target: str, bindings: Mapping[str, int] | None = None,
            ignore: Collection[str] = (), found: list[Layer] | None = None
            ) -> WholeModel | None:
    """Find (unless ``found`` is given), capture, group and check the attention layers of
    the model ``built`` holds."""
    found = find(built.module, built.inputs) if found is None else found
    if found is None:
        return None
    groups = group(found)
    checked = [_check_group(g, target, bindings, ignore) for g in groups]
    whole = WholeModel(target, checked, _others(built.module, found))
    whole.mask_findings = [(location, diagnostic) for location, diagnostic
                           in [*_mask_findings(checked), *_position_findings(checked)]
                           if diagnostic.code not in ignore]
    return whole


def check_model(built: Any, target: str, bindings: Mapping[str, int] | None = None,
                ignore: Collection[str] = ()) -> Traced | None:
    """``verify`` of a whole model: each diagnostic once, at its Python line, with a note
    naming the layers it was found in; None when ``built`` is not a whole model. A block
    (one attention layer with the code around it) is checked as one module where it can be
    (:func:`_block`)."""
    found = find(built.module, built.inputs)
    if found is None:
        return None
    if len(found) == 1:
        block = _block(built, target, bindings, ignore)
        if block is not None:
            return block
    whole = analyse(built, target, bindings, ignore, found)
    if whole is None:
        return None
    shapes = {}  # the editor's hover: each line's traced shapes, from the layer traced there
    for item in whole.checked:
        shapes.update(item.traced.shapes)
    return Traced(results(whole), shapes)


#: what a trace of a whole block may end in that a trace of its attention layer avoids
_NOT_A_BLOCK = frozenset({"SC601", "SC602", "SC603"})


def _block(built: Any, target: str, bindings: Mapping[str, int] | None,
           ignore: Collection[str]) -> Traced | None:
    """A module holding one attention layer (a transformer block: the layer with its norms,
    MLP and residuals; a Swin block cutting the image into the windows its attention reads)
    traced whole, as one module, so that the code around the attention is checked too: a
    window partition without its permute is a bug of the block, not of its attention. None
    when the block cannot be traced or lowered whole, or its trace says what PyTorch cannot
    confirm (PaLM's block, traceable only once its runs registered a buffer: unconfirmed
    size notes where its layer is SC601): its attention layer is then checked as a whole
    model's."""
    try:
        traced = check_extraction(extract(target, (), built), target, bindings, ignore)
    except (ExtractError, Untraceable):
        return None
    if traced.contradicted or traced.unconfirmed or any(
            d.code in _NOT_A_BLOCK for r in traced.results for d in r.diagnostics):
        return None  # a block PyTorch cannot confirm (a module its runs changed): its layer
    return traced


def results(whole: WholeModel) -> list[FileResult]:
    """A whole model's diagnostics at their Python lines, each once, with the layers it
    was found in; the target's own file first."""
    target = whole.target
    main = str(Path(target.rpartition(":")[0]).resolve()) if target.rpartition(":")[0] \
        .endswith(".py") else None
    seen: dict[tuple[str, str, Span, str], list[Group]] = {}
    kept: dict[tuple[str, str, Span, str], tuple[str, str | None, Diagnostic]] = {}
    for item in whole.checked:
        for result in item.traced.results:
            for diagnostic in result.diagnostics:
                key = (result.path, diagnostic.code, diagnostic.span, diagnostic.message)
                seen.setdefault(key, []).append(item.group)
                kept.setdefault(key, (result.path, result.source, diagnostic))
    by_file: dict[str, FileResult] = {}
    if main is not None:
        from . import display

        by_file[display(main)] = FileResult(display(main), python_source(main), [])
    for key, (path, source, diagnostic) in kept.items():
        note = Note(_in_layers(seen[key]))
        result = by_file.setdefault(path, FileResult(path, source, []))
        result.diagnostics.append(replace(diagnostic, notes=(*diagnostic.notes, note)))
    results = Results(main or "")
    for location, diagnostic in whole.mask_findings:
        results.add(location, diagnostic,
                    _POSITION_ANCHORS if diagnostic.code == "SC612" else _MASK_ANCHORS, None)
    for result in results.finish():
        if result.diagnostics:
            by_file.setdefault(result.path, FileResult(result.path, result.source, []))
            by_file[result.path].diagnostics.extend(result.diagnostics)
    for result in by_file.values():
        result.diagnostics.sort(key=lambda d: (d.span.line, d.span.column))
    found = list(by_file.values())
    if found:
        found[0].covered = covered(whole)
    return found


def covered(whole: WholeModel) -> str:
    """One sentence: the attention layers checked, in their groups, and the rest of the
    model by kind (not traced: docs/torch.md, "Whole models")."""
    groups = [item.group for item in whole.checked]
    count = sum(len(g.layers) for g in groups)
    layers = MESSAGES["covered_layers"].format(count=count) if count != 1 \
        else MESSAGES["covered_layer"]
    traced = MESSAGES["covered_group"].format(label=groups[0].label) if len(groups) == 1 \
        else MESSAGES["covered_groups"].format(count=len(groups),
                                               labels="; ".join(g.label for g in groups))
    kinds = ", ".join(MESSAGES["covered_kind"].format(kind=MESSAGES[f"kind_{kind}"],
                                                      modules=names_label(names))
                      for kind, names in whole.others.items())
    rest = MESSAGES["covered_rest"].format(kinds=kinds) if kinds else ""
    return MESSAGES["covered"].format(target=whole.target, layers=layers, groups=traced,
                                      rest=rest)


def report(whole: WholeModel, dtype: str = "float64") -> Any:
    """The page of a whole model (:class:`shapecheck.report.ModelReport`)."""
    from ...report import build_model_report
    from . import display

    sections = []
    for item in whole.checked:
        if item.traced.program is None or item.extraction is None:
            continue
        layer = item.group.first
        sections.append((item.group.label, type(layer.module).__name__,
                         len(item.group.layers), _lines_of(item.extraction, display),
                         item.traced.program))
    found = results(whole)
    problems = [d for r in found for d in r.diagnostics]
    framed = [f"{r.path}:{d.span.line}: {d.severity.value}[{d.code}]: {d.message}"
              for r in found for d in r.diagnostics]
    others = [(kind, names_label(names)) for kind, names in whole.others.items()]
    return build_model_report(whole.target, sections, others, problems, framed, dtype)


def _lines_of(extraction: Extraction, display: Any) -> str:
    """``modeling_llama.py:232–270``: the Python lines a layer's traced spec comes from."""
    by_file: dict[str, list[int]] = {}
    for location in extraction.lines.values():
        by_file.setdefault(location.path, []).append(location.line)
    return ", ".join(f"{display(path)}:{min(lines)}–{max(lines)}"
                     for path, lines in by_file.items())


def _in_layers(groups: list[Group]) -> str:
    count = sum(len(g.layers) for g in groups)
    labels = "; ".join(g.label for g in groups)
    return MESSAGES["in_layer" if count == 1 else "in_layers"].format(layers=labels, count=count)


def _check_group(chosen: Group, target: str, bindings: Mapping[str, int] | None,
                 ignore: Collection[str]) -> Checked:
    from .target import from_call

    layer = chosen.first
    label = f"{target} ({layer.name})"
    try:
        # A model's own sizes (35 = 5 heads of 7, the 7 nowhere an attribute): the layer's
        # dims are declared at them, so that a literal width and a dim agree.
        extraction = extract_built(from_call(layer.module, layer.call, label, fixed=True))
    except ExtractError as error:
        return Checked(chosen, Traced([FileResult(target.rpartition(":")[0], None, [
            codes.TARGET_FAILED.diag(Span(1, 1, 1, 1), target=label, reason=str(error))])]))
    except Untraceable as failed:
        results = Results(failed.location.path if failed.location else "")
        results.add(failed.location, codes.UNTRACEABLE.diag(
            Span(1, 1, 1, 1), target=label, reason=failed.reason), (), None)
        return Checked(chosen, Traced(results.finish()))
    return Checked(chosen, check_extraction(extraction, label, bindings, ignore), extraction)


# --- the model's masks --------------------------------------------------------------------


@dataclass(frozen=True)
class _MaskFinding:
    """What is wrong with a mask the model built: SC610 (``key`` is the later key a query
    sees) or SC611 (``key`` is None: the query sees nothing)."""

    query: int
    key: int | None
    reason: str
    help: str | None


def _mask_findings(checked: list[Checked]) -> list[tuple[Location, Diagnostic]]:
    """SC610 and SC611: a mask the model built (at a line of its own) that a layer reads as
    letting a query see the keys after it, or as leaving a query no key at all — once per
    line, naming every layer it was passed to, with a note at each line of the file that
    built it where a layer reads it."""
    found: dict[tuple[Location, str], tuple[_MaskFinding, list[str]]] = {}
    reads: dict[tuple[Location, str], list[int]] = {}
    for item in checked:
        for argument, location in item.group.first.made_at.items():
            finding = _judge(item, argument)
            if finding is None:
                continue
            found.setdefault((location, argument), (finding, []))[1].append(item.group.label)
            read = _read_at(item, argument)
            lines = reads.setdefault((location, argument), [])
            if read is not None and read.path == location.path and read.line not in lines:
                lines.append(read.line)
    return [(location, replace(_diagnostic(argument, finding, "; ".join(labels)), notes=tuple(
        Note(MESSAGES["mask_read_here"], Span(line, 1, line, 1))
        for line in reads[(location, argument)])))
        for (location, argument), (finding, labels) in found.items()]


def _diagnostic(argument: str, finding: _MaskFinding, layers: str) -> Diagnostic:
    span = Span(1, 1, 1, 1)
    if finding.key is None:
        diagnostic = codes.MODEL_MASK_EMPTY.diag(span, argument=argument, layers=layers,
                                                 query=finding.query, reason=finding.reason)
    else:
        diagnostic = codes.MODEL_MASK_LEAKS.diag(span, argument=argument, layers=layers,
                                                 query=finding.query, key=finding.key,
                                                 reason=finding.reason)
    return replace(diagnostic, help=(finding.help,) if finding.help else ())


def _read_at(item: Checked, argument: str) -> Location | None:
    """The Python line where the layer first reads the mask passed as ``argument``: which
    of its values keep a score is decided there as much as where it was built (a
    `masked_fill(mask, ...)` of a `tril` hides the past)."""
    if item.extraction is None:
        return None
    names = [n for n, (arg, path) in item.extraction.lowered.inputs.items()
             if arg == argument and not path]
    statements = item.extraction.text.splitlines()
    for number, text in enumerate(statements, 1):
        code = text.split("  # ")[0]
        if code.lstrip().startswith(("input ", "param ", "dim ", "constraint ")):
            continue
        if any(re.search(rf"\b{re.escape(name)}\b", code) for name in names):
            location = item.extraction.lines.get(number)
            if location is not None:
                return location
    return None


def _judge(item: Checked, argument: str) -> _MaskFinding | None:
    """What is wrong with the mask passed as ``argument``, when that is confirmed by its
    contents, read as the layer reads it: a causal mask transposed or shifted past the
    diagonal (a query sees later keys), one without its diagonal, or one hiding every key of
    every sequence. A prefix seen both ways, a window, padding: no opinion."""
    import torch

    layer = item.group.first
    value = layer.call.get(argument)
    queries = _query_length(layer)
    if not isinstance(value, torch.Tensor) or value.dim() < 2 or queries is None \
            or value.shape[-2] != queries or queries < 2:
        return None
    polarity = _bool_polarity(item, argument)
    keep = _keeps(value, polarity)
    if keep is None:
        return None
    table = keep.reshape(-1, *keep.shape[-2:])
    rows, keys = table.shape[-2:]
    offset = keys - rows
    if offset < 0:
        return None
    if not bool(table.any()):
        return _MaskFinding(0, None, MESSAGES["mask_hides_all"], None)
    position = torch.arange(rows)[:, None] + offset
    columns = torch.arange(keys)[None, :]
    if bool((table == (columns < position)).all()):
        return _MaskFinding(0, None, MESSAGES["mask_no_diagonal"],
                            codes.TORCH_HELPS["SC611 diagonal"])
    partial = ~table.all(dim=-1, keepdim=True)
    leaks = (table & (columns > position) & partial).nonzero()
    if leaks.numel() == 0:
        return None
    _, query, key = (int(v) for v in leaks[0])
    if _upper_triangle(table, offset):
        # a `tril` the layer drops (hides the scores where the mask is true): building it
        # with `tril` is no fix
        drops = value.dtype == torch.bool and polarity is False
        return _MaskFinding(query, key, MESSAGES["mask_transposed"],
                            None if drops else codes.TORCH_HELPS["SC610"])
    shift = _shift(table, offset)
    if shift is not None:
        return _MaskFinding(query, key, MESSAGES["mask_shifted"].format(shift=shift),
                            codes.TORCH_HELPS["SC610 shifted"])
    return None


# --- the model's positions ----------------------------------------------------------------


def _position_findings(checked: list[Checked]) -> list[tuple[Location, Diagnostic]]:
    """SC612: the positions a model numbered at one `arange` line reach a layer as rotary
    tables whose row for the first new token is position 0, while the layer puts its new
    keys after cached ones (:class:`shapecheck.meaning.RotatedCache`) — once per line,
    naming every layer."""
    from ...meaning import analyse
    from .confirm import leaf

    found: dict[Location, tuple[int, list[str]]] = {}
    for item in checked:
        program, extraction = item.traced.program, item.extraction
        if program is None or extraction is None:
            continue
        layer = item.group.first
        queries = _query_length(layer)
        if not layer.positions_from or queries is None:
            continue  # no argument computed from positions the model numbered
        for record in analyse(program).rotated_caches:
            cached = sum(_length(leaf(extraction.example.get(argument), path), record.axis)
                         for argument, path in (extraction.lowered.inputs[name]
                                                for name in record.cache))
            if not cached:
                continue
            for name in record.tables:
                argument, path = extraction.lowered.inputs[name]
                lines = layer.positions_from.get(argument, ())
                if len(lines) == 1 and _from_zero(leaf(extraction.example.get(argument), path),
                                                  queries):
                    labels = found.setdefault(lines[0], (cached, []))[1]
                    if item.group.label not in labels:
                        labels.append(item.group.label)
    return [(location, codes.MODEL_POSITIONS_RESTART.diag(
        Span(1, 1, 1, 1), layers="; ".join(labels), cached=cached,
        help=[codes.TORCH_HELPS["SC420"]]))
        for location, (cached, labels) in found.items()]


def _length(value: Any, axis: int) -> int:
    import torch

    return int(value.shape[axis]) if isinstance(value, torch.Tensor) and value.dim() > axis else 0


def _from_zero(table: Any, queries: int) -> bool:
    """A rotary table of the new tokens (one row each, the rows its next-to-last axis)
    whose first row is position 0: a sine table's row all zeros, a complex table's all
    real (angle 0 for every frequency; at a later position p the angles p * f are not 0,
    and a floating-point sine is 0 only at 0)."""
    import torch

    if not isinstance(table, torch.Tensor) or table.dim() < 2 or table.shape[-2] != queries \
            or table.shape[-1] < 2:
        return False
    row = table.select(-2, 0)
    values = row.imag if table.is_complex() else row
    return values.numel() > 0 and bool((values == 0).all())


def _query_length(layer: Layer) -> int | None:
    """The query length of a layer's call: the sequence axis of its first 3-D or 4-D
    floating tensor argument (the hidden states)."""
    import torch

    for value in layer.call.values():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dim() in (3, 4):
            return int(value.shape[-2])
    return None


def _keeps(mask: Any, bool_keeps: bool | None) -> Any:
    """Which scores a mask keeps: an additive mask's zeros; a boolean mask's true entries
    or false ones, as the layer reads it (None when its reading is not known)."""
    import torch

    if mask.dtype == torch.bool:
        return None if bool_keeps is None else (mask if bool_keeps else ~mask)
    if not mask.is_floating_point():
        return None
    values = torch.unique(mask)
    if not bool(((values == 0) | (values <= _DROPPED)).all()):
        return None
    return mask == 0


def _bool_polarity(item: Checked, argument: str) -> bool | None:
    """Whether the layer's attention keeps a score where the boolean input ``argument`` is
    true (False: where it is false); None when its spec does not read it as a mask."""
    from ...masks.polarity import against
    from ...syntax import nodes

    program = item.traced.program
    if item.extraction is None or program is None:
        return None
    names = [n for n, (arg, path) in item.extraction.lowered.inputs.items()
             if arg == argument and not path]
    declarations = {s.name.name: s for s in program.statements
                    if isinstance(s, nodes.TensorDecl)}
    for name in names:
        if name not in declarations:
            continue
        for stated in (True, False):
            if any(True for _ in against(program, {name: (stated, declarations[name])})):
                return not stated
    return None


def _upper_triangle(table: Any, offset: int) -> bool:
    """Every table keeps exactly the keys at or after its query (or strictly after), apart
    from keys no query sees and queries that see nothing (padding): a causal mask
    transposed."""
    import torch

    rows, keys = table.shape[-2:]
    position = torch.arange(rows)[:, None] + offset
    columns = torch.arange(keys)[None, :]
    padding = ~table.any(dim=-2, keepdim=True) | ~table.any(dim=-1, keepdim=True)
    return any(bool(((table == (columns >= position + d)) | padding).all()) for d in (0, 1))


def _shift(table: Any, offset: int) -> int | None:
    """``d`` when every table keeps exactly the keys up to ``d`` after each query (``d >= 1``:
    `torch.tril(..., diagonal=1)`), apart from keys no query sees and queries that see
    nothing (padding): a causal mask shifted past its diagonal."""
    import torch

    rows, keys = table.shape[-2:]
    position = torch.arange(rows)[:, None] + offset
    columns = torch.arange(keys)[None, :]
    padding = ~table.any(dim=-2, keepdim=True) | ~table.any(dim=-1, keepdim=True)
    return next((d for d in range(1, keys - offset - 1)
                 if bool(((table == (columns <= position + d)) | padding).all())), None)


# --- the rest of the model ----------------------------------------------------------------

_KINDS = (
    ("embeddings", re.compile(r"Embed"), re.compile(r"(^|\.)(wte|wpe|embed\w*)$")),
    ("norms", re.compile(r"Norm"), re.compile(r"(^|\.)(ln_\w+|\w*norm\w*)$")),
    ("MLPs", re.compile(r"MLP|Mlp|FeedForward|FFN|Intermediate|Expert|MoE|Moe"),
     re.compile(r"(^|\.)(mlp|ffn|feed_forward|ff)$")),
    ("heads", re.compile(r"Head|Pooler|Classifier"),
     re.compile(r"(^|\.)(lm_head|head|classifier|pooler|proj_out)$")),
)


def _others(model: Any, found: list[Layer]) -> dict[str, list[str]]:
    """The model's other parts by kind (the outermost module of each kind, outside the
    attention layers)."""
    inside = tuple(f"{layer.name}." for layer in found)
    attention = {layer.name for layer in found}
    taken: list[str] = []
    out: dict[str, list[str]] = {}
    for name, module in model.named_modules():
        if not name or name in attention or name.startswith(inside) or \
                any(name.startswith(f"{t}.") for t in taken) or \
                any(a.startswith(f"{name}.") for a in attention):  # a block holding attention
            continue
        kind = next((k for k, by_class, by_name in _KINDS
                     if by_class.search(type(module).__name__) or by_name.search(name)), None)
        if kind is not None:
            out.setdefault(kind, []).append(name)
            taken.append(name)
    return out


def names_label(names: list[str]) -> str:
    """Names shortened where they differ in one number (``model.layers.0–3.mlp``)."""
    buckets: dict[str, list[str]] = {}
    for name in names:
        buckets.setdefault(re.sub(r"(^|\.)\d+(\.|$)", r"\1#\2", name), []).append(name)
    return ", ".join(span_of_names(bucket) for bucket in buckets.values())
