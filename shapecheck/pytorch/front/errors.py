"""The front end's usage errors (a TARGET that cannot be built or traced as asked: exit 2)
and their texts, in the one table the command line prints them from."""

from __future__ import annotations

import linecache
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...i18n import Table


@dataclass(frozen=True)
class Location:
    """A Python source line: the file (absolute) and its 1-based line. ``callers``: the
    lines of the same file that called the function holding it, outermost first (a
    helper's `q_embed = ...` called from `forward`'s `q, k = apply_rotary_pos_emb(...)`);
    not part of what the location is."""

    path: str
    line: int
    callers: tuple[int, ...] = field(default=(), compare=False, hash=False)


def python_source(path: str) -> str | None:
    """The text of the Python file a location names. A notebook's cell is no file on disk:
    IPython keeps its text in :mod:`linecache` under the cell's file name."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        lines = linecache.getlines(path)
        return "".join(lines) if lines else None


MESSAGES: Table = Table("torchfront", "MESSAGES", {
    "target_syntax": "`{target}` is not FILE.py:NAME or MODULE:NAME (for example "
    "`model.py:CausalSelfAttention` or `model.py:make`)",
    "cannot_load": "cannot load `{target}`: {reason}",
    "no_attribute": "`{target}` has no attribute `{name}`",
    "instance": "`{target}` is a module instance; name its class, a factory taking its dims, or a "
    "factory without parameters returning (module, inputs)",
    "not_callable": "`{target}` is not a class or a function",
    "build_failed": "building `{target}` raised {error}",
    "not_a_module": "`{target}` returned a {type}, not an nn.Module",
    "factory_inputs": "`{target}` returned a module without inputs, and no linear layer or layer "
    "norm of it says how wide its input is; return (module, inputs), inputs a dict with every "
    "forward argument by name",
    "factory_returns": "`{target}` returned a {type}; a factory without parameters returns "
    "(module, inputs), inputs a dict with every forward argument by name",
    "init_syntax": "`--init {value}` is not NAME=SIZE, NAME=DIM (with a dim's convention after "
    "it if any) or NAME=[SHAPE] (for example `n_head=4`, `n_head=H`, `window=W window "
    "inclusive` or `query=[B, H, T, d_k]`)",
    "init_unknown": "`--init` names {names}, which the target does not take (its parameters: "
    "{parameters})",
    "no_width": "cannot tell the width of the module's inputs; annotate forward's arguments "
    "(jaxtyping) or use a factory that returns (module, inputs)",
    "config_unknown": "`{target}` takes a config object `{name}` whose class shapecheck cannot "
    "tell; annotate it (`{name}: ModelConfig`, a dataclass or a PretrainedConfig), or name a "
    "factory without parameters: `def make(): return {target}(ModelConfig(...)), "
    "{{\"x\": torch.randn(2, 8, 64)}}`",
    "no_torch": "checking a Python target needs PyTorch: python -m pip install torch",
    "not_configured": "`{path}` is a Python file: name a module in it (`{path}:ClassName` or "
    "`{path}:make`), or list its targets in [tool.shapecheck] `modules` (docs/torch.md)",
    "written": "Wrote {path} ({statements} statements from {target}).",
    "traced_from": "traced from {target} by `shapecheck extract`; each statement names the "
    "Python line it comes from",
    "apart_note": "the factory's sizes coincide ({sizes}); traced again at sizes that do not, "
    "so that no size is read as another",
    "coincide_note": "the factory's sizes coincide ({sizes}) and the module could not be traced "
    "at sizes that do not: the dims are declared at their sizes; merging sizes that are equal "
    "at the call can hide a bug where two sizes only coincide",
    "scale_note": "the scale 1/sqrt({size}) is read as 1/sqrt({chosen}), the contracted width; "
    "{others} has that size too",
    "unknown_operator_input": "stands for the result of `{operator}`, which shapecheck does not "
    "lower",
    "in_layer": "in {layers}",
    "in_layers": "in {layers}: {count} layers that share code, traced once as the first of them",
    "covered": "`{target}`: {layers} checked ({groups}){rest}",
    "covered_layers": "{count} attention layers",
    "covered_layer": "1 attention layer",
    "covered_group": "{label}, traced once",
    "covered_groups": "{count} groups traced once each: {labels}",
    "covered_rest": "; not traced: {kinds}",
    "covered_kind": "{kind} ({modules})",
    "kind_embeddings": "embeddings",
    "kind_norms": "norms",
    "kind_MLPs": "MLPs",
    "kind_heads": "heads",
    "mask_transposed": "it keeps the keys at or after each query and hides those before, a "
    "causal mask transposed",
    "mask_shifted": "it keeps the keys up to {shift} after each query, a causal mask shifted by "
    "{shift}",
    "mask_no_diagonal": "it hides each query's own key, a causal mask without its diagonal",
    "mask_hides_all": "it hides every key from every query of every sequence in the batch",
    "mask_read_here": "the layer applies it here",
    "documented_tiled": "its docstring says it is `{documented}`; run on key/value heads {heads} "
    "with n_rep = 2 it gives {got}, where that gives {want}",
})


class ExtractError(Exception):
    """A TARGET that cannot be loaded, built or traced as asked (a usage error)."""

    def __init__(self, key: str, **fields: object) -> None:
        self.key, self.fields = key, fields
        super().__init__(MESSAGES[key].format(**fields))


def traceback_locations(error: BaseException) -> Iterator[Location]:
    """Every frame of an error's traceback, outermost first, through the errors it was
    raised from or during (each chained error once)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            yield Location(str(Path(tb.tb_frame.f_code.co_filename).resolve()), tb.tb_lineno)
            tb = tb.tb_next
        current = current.__cause__ or current.__context__
