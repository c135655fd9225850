"""Lowering: a `torch.export` graph (ATen operators) -> `.attn` statements with source lines.

One row per operator in :data:`RULES` (an ATen overload's name -> a function writing the
expression), so adding an operator is adding a row. Nodes of one Python statement are
written as one `.attn` statement where their values are used once on that line, and each
statement keeps the Python file and line it comes from (:class:`Location`). An operator
without a row becomes an `input` of its traced shape (everything after it is still
checked) and is recorded in :attr:`Lowered.unknown`.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...check.builtins import BUILTINS
from .errors import Location, python_source
from .sizes import Dims
from .writes import read_back, unread

ATOM, POSTFIX, POWER, UNARY, PRODUCT, SUM, AND, OR, COMPARE = 90, 80, 70, 60, 50, 40, 30, 20, 10
RESERVED = frozenset({"dim", "constraint", "input", "param", "output", "assert", "bool", "inf",
                      "row", "col", "true", "false", "True", "False", "None"}) | frozenset(BUILTINS)


@dataclass
class Val:
    """What a node lowers to: its expression text and precedence, and what kind of value."""

    text: str
    prec: int = ATOM
    kind: str = "tensor"            # tensor, bool, dim, number, list, none, multi
    items: list[Val] = field(default_factory=list)   # a list, or a multi-output's parts
    negation_of: Val | None = None  # a bool that is `~X` of X
    contracted: str | None = None   # a matmul's contracted width (for the scale)
    causal01: bool = False          # a 0/1 float causal buffer, written as its bool mask
    #: a causal mask's top-left corner: (rows, columns, leading size-1 axes)
    causal: tuple[str, str, int] | None = None

    def at(self, prec: int) -> str:
        """The text, parenthesised if it binds looser than ``prec``."""
        return self.text if self.prec >= prec else f"({self.text})"


@dataclass
class Statement:
    text: str
    location: Location | None
    name: str | None = None


@dataclass
class Lowered:
    """The spec's parts, in order, with the Python line of each statement."""

    declarations: list[Statement] = field(default_factory=list)
    statements: list[Statement] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    unknown: list[tuple[str, Location | None, str]] = field(default_factory=list)
    #: spec param name -> the module's state key (``c_attn.weight``), for conformance
    state: dict[str, str] = field(default_factory=dict)
    #: spec input name -> (forward argument, index path into a tuple argument)
    inputs: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    #: positions, among the module's flattened tensor outputs, of the spec's outputs
    output_positions: list[int] = field(default_factory=list)
    #: spec param name -> the tensor a constant param is (one the module keeps outside its
    #: state, as OLMo's rotary sin/cos in a dict): conformance writes its values there
    constants: dict[str, Any] = field(default_factory=dict)
    #: diagnostics the lowering finds at Python lines itself (a FlexAttention function's
    #: read past an axis, SC613), each once
    findings: list[tuple[Location, Any]] = field(default_factory=list)


class Unlowerable(Exception):
    """An operator (or an argument form) without a lowering."""


_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')


def shape_env(placeholders: Any) -> Any:
    """The shape environment a trace's inputs were made in (its guards, its traced sizes);
    None where no input is a tensor."""
    return next((v.fake_mode.shape_env for v in (p.meta.get("val") for p in placeholders)
                 if _is_tensor(v) and getattr(getattr(v, "fake_mode", None), "shape_env",
                                              None) is not None), None)


class Lowering:
    """Walks one exported program; :meth:`run` returns the :class:`Lowered` spec."""

    def __init__(self, program: Any, dims: Dims, torch_dir: str, default: Location | None,
                 dynamic_names: dict[str, dict[int, str]]) -> None:
        self.program = program
        self.dims = dims
        self.torch_dir = torch_dir
        self.default = default
        self.dynamic_names = dynamic_names
        self.values: dict[Any, Val] = {}
        self.names: set[str] = set()
        self.out = Lowered()
        self._targets: dict[Location, list[str] | None] = {}
        self._trees: dict[str, ast.Module | None] = {}
        self._materialise: set[Any] = set()
        self._hinted: dict[int, str] = {}  # a symbolic size's traced value -> its dim name
        self._multiple_of: dict[Any, Any] = {}  # a size -> quotient * divisor (`_multiples`)
        self.taps: dict[tuple[Any, ...], str] = {}  # a window's selection -> its name (`_taps`)
        #: a result's axis written as its rule computes it, where the traced size's name
        #: would be another dim's by coincidence (`x[..., r:]` of width `d - r`, traced 6,
        #: not the 6 heads): node -> axis -> size text
        self.axis_sizes: dict[Any, dict[int, str]] = {}

    # --- the walk -----------------------------------------------------------------------

    def run(self) -> Lowered:
        graph = self.program.graph
        outputs = self._output_nodes()
        self._mark_statements(graph, outputs)
        self._placeholders()
        self._ranges()
        skipped = unread(graph, _operands)
        for node in graph.nodes:
            if node.op != "call_function" or node in skipped:
                continue
            self._lower(node)
        for position, node in outputs:
            value = self.values.get(node)
            if value is None or value.kind not in ("tensor", "bool"):
                continue
            name = value.text if value.prec == ATOM and value.text in self.names else None
            if name is None:
                name = self._statement(node, value, forced=True)
            if name not in self.out.outputs:
                self.out.outputs.append(name)
                self.out.output_positions.append(position)
        return self.out

    def _output_nodes(self) -> list[tuple[int, Any]]:
        node = next(n for n in self.program.graph.nodes if n.op == "output")
        found: list[tuple[int, Any]] = []
        position = 0
        # a buffer's or an input's new value (a cache written in place) is state, not a result
        kinds = [spec.kind.name for spec in getattr(self.program.graph_signature,
                                                     "output_specs", [])]
        for index, arg in enumerate(_flat(node.args[0])):
            if index < len(kinds) and kinds[index] != "USER_OUTPUT":
                continue
            if hasattr(arg, "op") and _is_tensor(arg.meta.get("val")):
                found.append((position, arg))
                position += 1
        return found

    def _mark_statements(self, graph: Any, outputs: list[tuple[int, Any]]) -> None:
        """Which nodes get a statement of their own: used more than once, used on another
        line, feeding a multi-output operator, or an output."""
        output_nodes = {node for _, node in outputs}
        for node in graph.nodes:
            if node.op != "call_function":
                continue
            users = [u for u in node.users if u.op != "output"]
            if node in output_nodes or len(users) != 1:
                self._materialise.add(node)
                continue
            user = users[0]
            if self.location(user) != self.location(node) or _name(user.target) in MULTI:
                self._materialise.add(node)

    def _placeholders(self) -> None:
        signature = self.program.graph_signature
        state = self.program.state_dict
        constants = getattr(self.program, "constants", {})
        nodes = {n.name: n for n in self.program.graph.nodes if n.op == "placeholder"}
        user_inputs = [spec for spec in signature.input_specs if spec.kind.name == "USER_INPUT"]
        paths = _input_paths(self.program, len(user_inputs))
        for spec, path in zip(user_inputs, paths):  # every symbol named before any is written
            node = nodes.get(getattr(spec.arg, "name", ""))
            value = node.meta.get("val") if node is not None else None
            if _is_tensor(value):
                self._name_symbols(value, self.dynamic_names.get(path[0], {}))
        self._multiples(nodes.values())
        for index, spec in enumerate(signature.input_specs):
            node = nodes.get(getattr(spec.arg, "name", ""))
            if node is None:
                continue
            value = node.meta.get("val")
            kind = spec.kind.name
            if not _is_tensor(value):
                self.values[node] = Val("None", kind="none")
                continue
            if _has_empty_axis(value):  # an empty cache before its first write: cat skips it
                self.values[node] = Val("[]", kind="empty")
                continue
            if kind == "USER_INPUT":
                path = paths[user_inputs.index(spec)] if spec in user_inputs else (node.name, ())
                self._name_symbols(value, self.dynamic_names.get(path[0], {}))
                name = self._fresh(node.name)
                self.out.inputs[name] = path
                self._declare("input", name, value)
                self.values[node] = Val(name, kind=_kind(value))
                continue
            target = spec.target or node.name
            tensor = state.get(target) if kind in ("PARAMETER", "BUFFER") else constants.get(target)
            if kind == "BUFFER" and tensor is not None and _causal(tensor):
                name = self._fresh(target.replace(".", "_"))
                n = self.dims.size(int(tensor.shape[-1]))
                lead = [1] * (tensor.dim() - 2)
                mask = f"causal_mask({n})"
                text = mask if not lead else \
                    f"reshape({mask}, [{', '.join([*map(str, lead), n, n])}])"
                self.out.declarations.append(Statement(f"{name} = {text}", self.default, name))
                self.values[node] = Val(name, kind="bool",
                                        causal01=tensor.dtype.is_floating_point,
                                        causal=(n, n, len(lead)))
                continue
            if kind == "CONSTANT_TENSOR" and tensor is not None and tensor.dim() == 0 \
                    and not tensor.dtype.is_complex and _kind(tensor) != "bool":
                # a number the code made a tensor (`torch.tensor(finfo(dtype).min)`): its value
                self.values[node] = number(float(tensor.item()))
                continue
            if kind == "CONSTANT_TENSOR" and tensor is not None and tensor.dim() == 0 \
                    and _kind(tensor) == "bool":
                # a truth value the code made a tensor (Gemma 3's full layers' overlay,
                # `lambda *args: torch.tensor(True)`): its value, so that the function it is
                # or-ed into stays a function of positions (a constant of the graph: no input
                # or state can change it)
                self.values[node] = Val("true" if bool(tensor.item()) else "false", kind="bool")
                continue
            if kind == "CONSTANT_TENSOR" and tensor is not None and tensor.dim() == 1 \
                    and tensor.numel() == 1 and _element(tensor) == "int":
                # one index the code wrote as a tensor (Falcon's `[-2]`): a slice of one
                self.values[node] = Val(str(int(tensor.item())), kind="index1")
                continue
            if kind == "BUFFER" and target.rsplit(".", 1)[-1] == "num_batches_tracked" \
                    and not node.users:  # a batch norm's step count, never read in eval
                continue
            name = self._fresh(target.replace(".", "_"))
            self.out.state[name] = target
            if kind == "CONSTANT_TENSOR" and tensor is not None:
                self.out.constants[name] = tensor
            self._declare("param", name, value)
            self.values[node] = Val(name, kind=_kind(value))

    def _ranges(self) -> None:
        """The least sizes torch found the module needs (`x.topk(3)`: the axis holds at least
        3), as constraints: a size below is no counterexample. An upper bound (a table of 64
        positions sliced to `T`) is not one: past it the module fails, which is what the
        checker reports and torch confirms (docs/torch.md, "No false alarm")."""
        # the sizes the code tests against 1 (`if seqlen > 1:`): torch's floor decided it
        branched = getattr(self.program, "shapecheck_branched_on_one", frozenset())
        for symbol, bounds in getattr(self.program, "range_constraints", {}).items():
            name = self.dims.symbolic.get(str(symbol))
            if name is None:
                continue
            if symbol in self._multiple_of:  # the size is written as a product: `7 * T`
                name = self.sym(str(self._multiple_of[symbol]))
            for value, relation in ((bounds.lower, ">="),):
                if not str(value).lstrip("-").isdigit():  # torch's infinity: no bound
                    continue
                if relation == ">=" and (int(value) < 2 or int(value) == 2
                                         and str(symbol) not in branched):
                    continue  # torch's floor for a symbolic size, which the code never tests
                text = f"constraint {name} {relation} {int(value)}"
                if text not in self.out.constraints:
                    self.out.constraints.append(text)
        for name, least in self._selected():
            text = f"constraint {name} >= {least}"
            if text not in self.out.constraints:
                self.out.constraints.append(text)

    def _selected(self) -> Iterator[tuple[str, int]]:
        """The sizes an index the code wrote reads into (`freqs_cis[..., 1]`, Flux's rotation
        matrices given to the layer as an input): the axis holds at least index + 1. torch
        checks `1 < s` against its floor for a symbolic size (2) and records nothing, so the
        spec must say it, or size 1 reads as an index out of range that the module's input
        never has (a larger index is torch's own range, read above)."""
        for node in self.program.graph.nodes:
            if node.op != "call_function" or _name(node.target) != "select.int" or \
                    not isinstance(node.args[2], int):
                continue
            shape = node.args[0].meta["val"].shape
            size = shape[node.args[1] % len(shape)]
            expression = str(size.node.expr) if hasattr(size, "node") else None
            name = self.dims.symbolic.get(expression) if expression is not None else None
            index = node.args[2]
            least = index + 1 if index >= 0 else -index
            if name is not None and least >= 2:  # index 0 or -1: every size holds it
                yield name, least

    def _declare(self, word: str, name: str, value: Any) -> None:
        shape = self.shape(value)
        self.out.declarations.append(Statement(f"{word} {name}: {shape}", self.default, name))

    def _name_symbols(self, value: Any, axes: dict[int, str]) -> None:
        for axis, size in enumerate(value.shape):
            if isinstance(size, int):
                continue
            expression = str(size.node.expr) if hasattr(size, "node") else str(size)
            if not re.fullmatch(r"[su]\d+", expression) or expression in self.dims.symbolic:
                continue
            hint = getattr(getattr(size, "node", None), "hint", None)
            if hint is not None and hint in self._hinted:
                # A size torch left free that equals another at the traced call (a cached
                # value's length, the keys'): the caller keeps them equal, the module relies on
                # it; one name, so that no caller-side relation reads as a bug in the module.
                self.dims.symbolic[expression] = self._hinted[hint]
                continue
            name = axes.get(axis)
            if name is None:
                name = "B" if axis == 0 and len(value.shape) >= 3 else "T"
            taken = set(self.dims.symbolic.values())
            base, count = name, 1
            while name in taken or name in self.dims.atomic or name in self.dims.derived:
                count += 1
                name = f"{base}{count}" if base != "T" or count > 2 else "S"
            self.dims.symbolic[expression] = name
            if hint is not None:
                self._hinted[hint] = name

    def _lower(self, node: Any) -> None:
        name = _name(node.target)
        rule = RULES.get(name)
        if name in IGNORED:
            return
        if _is_tensor(node.meta.get("val")) and _has_empty_axis(node.meta["val"]):
            # an empty tensor (a cache before its first write): `cat` skips it
            self.values[node] = Val("[]", kind="empty")
            return
        written = read_back(node)  # a view of a tensor written through it (writes.py)
        normalised = _logsumexp_softmax(node)
        try:
            if rule is None:
                raise Unlowerable(name)
            if written is not None:
                value = self.arg(written)
            elif normalised is not None:
                value = Val(f"softmax({_tensor(self.arg(normalised[0])).text}, axis={normalised[1]})")
            else:
                value = _applied(rule, self, node)
        except Unlowerable as reason:
            if str(reason) == "operand":  # it reads an unknown result: that one is reported
                self._unknown(node, name, report=False)
                return
            value = None
        if value is None:
            self._unknown(node, name)
            return
        already_named = value.prec == ATOM and value.text in self.names  # an identity
        truth = value.kind == "bool" and value.text in ("true", "false")  # a literal, copied
        if node in self._materialise and value.kind in ("tensor", "bool") and not already_named \
                and not truth:
            statement_name = self._statement(node, value)
            value = Val(statement_name, kind=value.kind, negation_of=value.negation_of,
                        contracted=value.contracted, causal01=value.causal01)
        self.values[node] = value

    def _unknown(self, node: Any, name: str, *, report: bool = True) -> None:
        value = node.meta.get("val")
        location = self.location(node)
        if not _is_tensor(value):
            # A multi-output or non-tensor result: its users find no value and are unknown too.
            if report:
                targets = self._assigned(location) if location is not None else None
                self.out.unknown.append((name, location, ", ".join(targets or [node.name])))
            self.values[node] = Val("?", kind="unknown")
            return
        spec_name = self._fresh(self._python_name(node) or node.name)
        if report:
            self.out.unknown.append((name, location, spec_name))
        self.out.statements.append(Statement(f"input {spec_name}: {self.shape(value)}", location,
                                             spec_name))
        self.values[node] = Val(spec_name, kind=_kind(value))

    def _statement(self, node: Any, value: Val, forced: bool = False) -> str:
        name = self._fresh(self._python_name(node) or node.name)
        value_meta = node.meta.get("val")
        # An int or complex statement is written without its annotation: the checker keeps
        # an annotated value's shape but not its element type (it would read as real).
        shape = self.shape(value_meta, self.axis_sizes.get(node, {})) \
            if _is_tensor(value_meta) and _element(value_meta) not in ("int", "complex") \
            else None
        annotation = f": {shape}" if shape else ""
        self.out.statements.append(Statement(f"{name}{annotation} = {value.text}",
                                             self.location(node), name))
        return name

    def _fresh(self, wanted: str) -> str:
        base = re.sub(r"\W", "_", wanted) or "t"
        if base[0].isdigit():
            base = f"t_{base}"
        if base in RESERVED or base in self.dims.atomic or base in self.dims.derived \
                or base in self.dims.symbolic.values():
            base = f"{base}_"
        name, count = base, 0
        while name in self.names:
            count += 1
            name = f"{base}_{count}"
        self.names.add(name)
        return name

    # --- arguments, shapes, sizes ------------------------------------------------------

    def arg(self, value: Any) -> Val:
        if hasattr(value, "op"):  # an fx Node
            found = self.values.get(value)
            if found is None or found.kind == "unknown":
                raise Unlowerable("operand")
            return found
        if isinstance(value, (list, tuple)):
            return Val("[...]", kind="list", items=[self.arg(v) for v in value])
        if value is None:
            return Val("None", kind="none")
        if isinstance(value, bool):
            return Val("true" if value else "false", kind="number")
        if isinstance(value, int):
            return Val(str(value), ATOM if value >= 0 else UNARY, kind="number")
        if isinstance(value, float):
            return number(value)
        return Val(repr(value), kind="other")

    def size(self, value: Any) -> str:
        """A size (int or SymInt) as a dim expression."""
        if isinstance(value, int):
            return self.dims.size(value)
        if not hasattr(value, "node"):
            return self.sym(str(value))
        expr = value.node.expr.xreplace(self._multiple_of) if self._multiple_of \
            else value.node.expr
        self._whole_parts(expr)
        return self.sym(str(expr))

    def _whole_parts(self, expr: Any) -> None:
        """A size `T // 7` (windows or patches of a literal size cut from a traced axis:
        `view(B, H // 7, 7, ...)`, einops' `(x w1)` with `w1=7`) is an axis the module has
        only where `T` holds a whole part; below, it is empty, which no spec axis can be.
        The spec says `constraint T >= 7`, as for a convolution's patches: the domain the
        module is written for, not a claim that smaller inputs are fine (issue 29)."""
        if "//" not in str(expr):
            return
        from torch.utils._sympy.functions import FloorDiv

        for part in expr.atoms(FloorDiv):
            base, divisor = part.args
            name = self.dims.symbolic.get(str(base)) if base.is_Symbol else None
            if name is None or not divisor.is_Integer or int(divisor) < 2:
                continue
            text = f"constraint {name} >= {int(divisor)}"
            if text not in self.out.constraints:
                self.out.constraints.append(text)

    def _multiples(self, placeholders: Any) -> None:
        """An input size the module splits by another (Swin's `attn.view(B_ // nW, nW, ...)`,
        the windows of every image by the mask's windows) is a multiple of it: torch's guard
        `Eq(B_, (B_//nW) * (B_//(B_//nW)))` holds for every multiple and for nothing else.
        Such a size is written `B * B2` (the quotient takes its name): the module relies on
        its caller for it, as for sizes the caller keeps equal."""
        from ...symbolic import counted_multiples, literal_multiples, multiples

        env = shape_env(placeholders)
        if env is None:
            return
        names = {str(symbol) for guard in env.guards for symbol in guard.expr.free_symbols
                 if str(symbol) in self.dims.symbolic}
        found = multiples((g.expr for g in env.guards), names)
        # a size cut into windows of a number (einops' `(x w1)`, `w1=7`): `7 * T`
        traced = {symbol: int(value) for symbol, value in env.var_to_val.items()
                  if symbol not in found}
        found.update((size, (quotient, whole)) for size, (quotient, whole)
                     in literal_multiples([g.expr for g in env.guards], traced, names).items()
                     if self._a_number(int(whole.as_coeff_Mul()[0])))
        # a size cut into a count of parts computed from itself (Hiera's windows): `64 * T`
        found.update((size, parts) for size, parts in counted_multiples(
            self._traced_sizes(), traced, set(self.dims.symbolic)).items() if size not in found)
        for size, (quotient, whole) in found.items():
            self._multiple_of[size] = whole
            self.dims.symbolic[quotient] = self.dims.symbolic[str(size)]

    def _traced_sizes(self) -> Iterator[Any]:
        """The symbolic sizes of every tensor the graph computes."""
        for node in self.program.graph.nodes:
            value = node.meta.get("val")
            for size in getattr(value, "shape", ()) if _is_tensor(value) else ():
                if hasattr(size, "node"):
                    yield size.node.expr

    def _a_number(self, number: int) -> bool:
        """Whether the spec writes ``number`` as itself, not as a dim of that size (a window
        the factory sets, `window_size=4`): a size a multiple of such a window keeps its
        quotient form, which the dim reads (ViTDet's and timm's windows)."""
        return self.dims.size(number) == str(number)

    def sym(self, expression: str) -> str:
        def word(match: re.Match[str]) -> str:
            token = match.group(0)
            if token in self.dims.symbolic:
                return self.dims.symbolic[token]
            if token.startswith("**"):  # a power's exponent is a number, never a size
                return " ** " + token[2:].strip()
            if token.isdigit():
                return self.dims.size(int(token)) if int(token) >= 5 else token
            if re.fullmatch(r"u\d+", token):  # a size from data (`x[mask]`): a dim of its own
                return self._unbacked(token)
            raise Unlowerable(f"symbol {token}")
        # `T**2` (torch's size of an einsum's reshaped product) stays a power: spacing
        # the single `*`s must not split it into `T *  * 2`
        text = re.sub(r"\*\*\s*\d+|[A-Za-z_]\w*|\d+", word, expression)
        return re.sub(r"\s*(?<!\*)\*(?!\*)\s*", " * ", text)

    def _unbacked(self, token: str) -> str:
        taken = {*self.dims.symbolic.values(), *self.dims.atomic, *self.dims.derived}
        name, count = "U", 1
        while name in taken:
            count += 1
            name = f"U{count}"
        self.dims.symbolic[token] = name
        return name

    def shape(self, value: Any, written: dict[int, str] | None = None) -> str:
        """A tensor's type; ``written``: axes whose size its rule wrote (`axis_sizes`)."""
        return _element(value) + "[" + ", ".join(
            (written or {}).get(axis) or self.size(s) for axis, s in enumerate(value.shape)) + "]"

    def rank(self, node_arg: Any) -> int:
        return len(node_arg.meta["val"].shape)

    # --- where each node comes from ------------------------------------------------------

    def location(self, node: Any) -> Location | None:
        """The innermost frame of the user's code (every frame is traced: a helper function's
        line is its own); a library's frames (torch, einops) stand for the line calling it."""
        trace = node.meta.get("stack_trace") or ""
        found: Location | None = None
        for match in _FRAME.finditer(trace):
            path = match.group("path")
            if path.startswith(self.torch_dir) or path.startswith(_OWN_DIR) or "<" in path \
                    or self._library(path):  # torch's, shapecheck's stand-ins, a library's
                continue
            resolved = str(Path(path).resolve())
            callers = (*found.callers, found.line) if found is not None \
                and found.path == resolved else ()
            found = Location(resolved, int(match.group("line")), callers)
        return found or self.default

    def _library(self, path: str) -> bool:
        """An installed package other than the one holding the module (einops called from a
        model; transformers' own helpers stay the code of a transformers module)."""
        own = _package(self.default.path) if self.default is not None else None
        package = _package(path)
        return package is not None and package != own

    def _python_name(self, node: Any) -> str | None:
        """The name the Python statement assigns (`q` in `q = q.view(...)`); for the
        parts of `q, k, v = x.split(...)`, the one at the part's index."""
        location = self.location(node)
        if location is None:
            return None
        targets = self._assigned(location)
        if not targets:
            return None
        if _name(node.target) == "getitem" and len(targets) > 1 and isinstance(node.args[1], int):
            index = node.args[1]
            return targets[index] if index < len(targets) else None
        if len(targets) > 1:
            users = [u for u in node.users if _name(u.target) in MULTI]
            if users:
                return "_".join(targets)
            # `q, k, v = f(x), g(x), h(x)`: the line's results, in order, are its targets.
            results = self._results(location)
            if len(results) == len(targets) and node in results:
                return targets[results.index(node)]
            return None
        return targets[0]

    def _results(self, location: Location) -> list[Any]:
        """The nodes of one Python line whose values are used on other lines, in order."""
        found = []
        for node in self.program.graph.nodes:
            if node.op != "call_function" or self.location(node) != location:
                continue
            users = list(node.users)
            if users and all(u.op == "output" or self.location(u) != location for u in users):
                found.append(node)
        return found

    def _assigned(self, location: Location) -> list[str] | None:
        if location in self._targets:
            return self._targets[location]
        tree = self._tree(location.path)
        found: list[str] | None = None
        if tree is not None:
            for statement in ast.walk(tree):
                if not isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign,
                                              ast.Return)):
                    continue
                end = getattr(statement, "end_lineno", statement.lineno) or statement.lineno
                if not statement.lineno <= location.line <= end:
                    continue
                if isinstance(statement, ast.Return):  # `return y` names y; else `out`
                    value = statement.value
                    found = (_target_names(value) if isinstance(value, (ast.Name, ast.Tuple))
                             else None) or ["out"]
                    continue
                target = statement.targets[0] if isinstance(statement, ast.Assign) \
                    else statement.target
                found = _target_names(target)
        self._targets[location] = found
        return found

    def _tree(self, path: str) -> ast.Module | None:
        if path not in self._trees:
            source = python_source(path)
            try:
                self._trees[path] = None if source is None else ast.parse(source)
            except (SyntaxError, ValueError):
                self._trees[path] = None
        return self._trees[path]


#: shapecheck's own files (flex.py's stand-ins run inside a traced forward): never the user's
_OWN_DIR = str(Path(__file__).resolve().parents[2]) + "/"


def _package(path: str) -> str | None:
    """The installed package a file belongs to (``.../site-packages/einops``), or None."""
    parts = Path(path).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts and parts.index(marker) + 1 < len(parts):
            return "/".join(parts[:parts.index(marker) + 2])
    return None


def _target_names(target: ast.expr) -> list[str] | None:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Attribute):
        return [target.attr]
    if isinstance(target, (ast.Tuple, ast.List)):
        names = [_target_names(t) for t in target.elts]
        if all(n is not None and len(n) == 1 for n in names):
            return [n[0] for n in names if n]
    return None


def _input_paths(program: Any, count: int) -> list[tuple[str, tuple[int, ...]]]:
    """The forward argument (and index in a tuple argument) of each user input, in order."""
    spec = getattr(program, "call_spec", None)
    tree = getattr(spec, "in_spec", None)
    paths: list[tuple[str, tuple[int, ...]]] = []
    try:
        import torch.utils._pytree as pytree

        args_spec, kwargs_spec = tree.children_specs  # type: ignore[union-attr]
        for position, child in enumerate(args_spec.children_specs):
            _leaves(child, (f"#{position}",), paths, pytree)
        keys = kwargs_spec.context
        for key, child in zip(keys, kwargs_spec.children_specs):
            _leaves(child, (key,), paths, pytree)
    except Exception:
        return [(f"#{i}", ()) for i in range(count)]
    return [(p[0], tuple(int(i) for i in p[1:])) for p in paths]  # type: ignore[misc]


def _leaves(spec: Any, prefix: tuple[Any, ...], out: list[Any], pytree: Any) -> None:
    if spec.is_leaf():
        out.append(prefix)
        return
    for index, child in enumerate(spec.children_specs):
        _leaves(child, (*prefix, index), out, pytree)


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]


def _applied(rule: Rule, low: Lowering, node: Any) -> Val | None:
    """A rule's value; an argument form it does not know (a size it cannot compare, a
    data-dependent one) is an operator without a lowering, never an internal error."""
    try:
        return rule(low, node, [low.arg(a) for a in node.args],
                    {k: low.arg(v) for k, v in node.kwargs.items()})
    except Unlowerable:
        raise
    except Exception as error:
        raise Unlowerable(f"{type(error).__name__}") from error


def _has_empty_axis(value: Any) -> bool:
    """A tensor with an axis of size 0 (never a guard on a size from data)."""
    return any(isinstance(size, int) and size == 0 for size in value.shape)


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _kind(value: Any) -> str:
    return "bool" if str(getattr(value, "dtype", "")) == "torch.bool" else "tensor"


def _element(value: Any) -> str:
    """The shape's element prefix from the traced dtype: `bool`, `int`, `complex` or none."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return ""
    if str(dtype) == "torch.bool":
        return "bool"
    if getattr(dtype, "is_complex", False):
        return "complex"
    return "" if getattr(dtype, "is_floating_point", True) else "int"


def _causal(tensor: Any) -> bool:
    """A buffer that is a lower-triangular 0/1 (or bool) table: a causal mask."""
    import torch

    if tensor.dim() < 2 or tensor.shape[-1] != tensor.shape[-2] or tensor.shape[-1] < 2:
        return False
    if any(s != 1 for s in tensor.shape[:-2]):
        return False
    table = tensor.reshape(tensor.shape[-2], tensor.shape[-1])
    expected = torch.tril(torch.ones_like(table, dtype=torch.bool))
    return bool(((table != 0) == expected).all())


def _name(target: Any) -> str:
    """``aten.softmax.int`` -> ``softmax.int``; ``operator.getitem`` -> ``getitem``."""
    text = str(target)
    if text.startswith("aten."):
        return text[len("aten."):]
    return getattr(target, "__name__", text)


def number(value: float) -> Val:
    if math.isinf(value):
        return Val("inf" if value > 0 else "-inf", ATOM if value > 0 else UNARY, kind="number")
    if math.isnan(value):
        raise Unlowerable("nan")
    text = repr(value)
    if text.endswith(".0") and abs(value) < 1e15:
        text = text[:-2]
    return Val(text, ATOM if value >= 0 else UNARY, kind="number")


# --- the rules -----------------------------------------------------------------------------

Rule = Callable[[Lowering, Any, list[Val], dict[str, Val]], "Val | None"]
RULES: dict[str, Rule] = {}
#: Multi-output operators: their parts are read with getitem.
MULTI = frozenset({"split.Tensor", "split_with_sizes.default", "chunk.default", "unbind.int",
                   "split.default", "sort.default", "sort.stable", "topk.default", "max.dim",
                   "min.dim", "_native_batch_norm_legit_no_training.default",
                   "adaptive_max_pool1d.default", "adaptive_max_pool2d.default"})
#: Operators that compute nothing the spec needs (asserts, guards).
IGNORED = frozenset({"_assert_tensor_metadata.default", "_assert_scalar.default",
                     "sym_constrain_range_for_size.default", "_assert_async.msg",
                     "sym_constrain_range.default",
                     # comparisons of sizes feed torch's runtime asserts (a size from data >= 0)
                     "ge", "le", "gt", "lt", "eq", "ne"})


def lowers_as_traced(program: Any) -> bool:
    """Whether the graph ``torch.export`` records can be lowered as it is, so that no second
    pass over it is needed (``run_decompositions``, which traces the whole graph again, about
    a third of an export): every operator has a row here, none writes into a tensor or a
    buffer (a write is lowered from the functional form that pass gives it), and no slice
    counts from the end (that form clamps it to the axis). Where it holds, the two forms
    lower to the same spec but for the names of unnamed temporaries (`contiguous`, not
    `clone`)."""
    signature = program.graph_signature
    if getattr(signature, "buffers_to_mutate", None) or \
            getattr(signature, "user_inputs_to_mutate", None):
        return False
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        name = _name(node.target)
        schema = getattr(node.target, "_schema", None)
        if name not in RULES and name not in IGNORED or schema is not None and schema.is_mutable:
            return False
        if name == "slice.Tensor" and any(isinstance(bound, int) and bound < 0
                                          for bound in node.args[2:4]):
            return False  # `x[..., -w:]` as written: the functional form clamps it to the axis
    return True


def rule(*names: str) -> Callable[[Rule], Rule]:
    def register(function: Rule) -> Rule:
        for name in names:
            RULES[name] = function
        return function
    return register


def _tensor(value: Val) -> Val:
    if value.kind not in ("tensor", "bool", "number", "dim"):
        raise Unlowerable(value.kind)
    if value.causal01:  # the float 0/1 buffer used as numbers
        return Val(f"where({value.text}, 1, 0)")
    return value


def _viewed(value: Val) -> Val:
    """An operand of a view (reshape, slice, new axis): a causal buffer stays its mask."""
    if value.kind not in ("tensor", "bool"):
        raise Unlowerable(value.kind)
    return value


def _axis(node: Any, position: int, default: int | None = None) -> int:
    axis = node.args[position] if len(node.args) > position else node.kwargs.get("dim", default)
    if isinstance(axis, (list, tuple)):
        if len(axis) != 1:
            raise Unlowerable("axes")
        axis = axis[0]
    if not isinstance(axis, int):
        raise Unlowerable("axis")
    return axis


@rule("linear.default")
def _linear(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x, weight = _tensor(args[0]), _tensor(args[1])
    bias = args[2] if len(args) > 2 else kw.get("bias", Val("None", kind="none"))
    text = f"{x.at(PRODUCT)} @ {weight.at(POSTFIX)}.T"
    if bias.kind != "none":
        return Val(f"{text} + {_tensor(bias).at(SUM + 1)}", SUM)
    return Val(text, PRODUCT)


@rule("matmul.default", "bmm.default", "mm.default")
def _matmul(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    a, b = _tensor(args[0]), _tensor(args[1])
    shape = node.args[0].meta["val"].shape
    return Val(f"{a.at(PRODUCT)} @ {b.at(PRODUCT + 1)}", PRODUCT, contracted=low.size(shape[-1]))


@rule("addmm.default")
def _addmm(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    bias, a, b = (_tensor(v) for v in args[:3])
    if any(k in node.kwargs for k in ("beta", "alpha")):
        raise Unlowerable("addmm with beta or alpha")
    return Val(f"{a.at(PRODUCT)} @ {b.at(PRODUCT + 1)} + {bias.at(SUM + 1)}", SUM)


@rule("einsum.default")
def _einsum(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    equation = node.args[0]
    operands = ", ".join(_tensor(v).text for v in args[1].items)
    return Val(f'einsum("{equation}", {operands})')


def _binary(symbol: str, prec: int) -> Rule:
    def lower(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
        a, b = _tensor(args[0]), _tensor(args[1])
        if symbol == "*" and "bool" in (a.kind, b.kind) and "number" not in (a.kind, b.kind):
            return _times_mask(a, b)
        alpha = kw.get("alpha")
        if alpha is not None and alpha.text not in ("1", "1.0"):
            b = Val(f"{alpha.at(PRODUCT)} * {b.at(PRODUCT + 1)}", PRODUCT)
        if symbol == "*" and b.kind == "number":
            scaled = _scaled(low, node, a, float(node.args[1]))
            if scaled is not None:
                return scaled
        if symbol == "/" and b.kind == "number":
            divided = _divided(low, node, a, float(node.args[1]))
            if divided is not None:
                return divided
        return Val(f"{a.at(prec)} {symbol} {b.at(prec + 1)}", prec,
                   kind="bool" if symbol in ("&", "|") else "tensor")
    return lower


def _times_mask(a: Val, b: Val) -> Val:
    """A product with a mask: of two masks, both set (`m[..., None] * m2[..., None, :]`,
    torch's `*` of bools is their and); of a tensor, the tensor where the mask is set and 0
    elsewhere (`t * mask[..., None]`: torch reads the bools as 1 and 0, as `.float()` does)."""
    if a.kind == b.kind == "bool":
        return Val(f"{a.at(AND)} & {b.at(AND + 1)}", AND, kind="bool")
    mask, other = (a, b) if a.kind == "bool" else (b, a)
    ones = _as_numbers(mask)
    return Val(f"{other.at(PRODUCT)} * {ones}" if mask is b else f"{ones} * {other.at(PRODUCT + 1)}",
               PRODUCT)


def _as_numbers(mask: Val) -> str:
    """A mask as the numbers torch reads it as: 1 where set, 0 elsewhere."""
    return f"where({mask.text}, 1, 0)"


def _contracted(low: Lowering, node: Any) -> str | None:
    source = node.args[0]
    value = low.values.get(source) if hasattr(source, "op") else None
    return value.contracted if value is not None else None


def _summed_count(low: Lowering, source: Any, divisor: float) -> str | None:
    """`x.sum(axis) / n` where n is the number of entries summed (lucidrains'
    Nyströmformer: its landmarks `reduce(q, '... (n l) d -> ... n d', 'sum', l=l) / l`):
    n as the product of the summed axes' sizes, not a scale read from its number."""
    if not hasattr(source, "target") or "sum.dim_IntList" not in str(source.target):
        return None
    axes = source.args[1] if len(source.args) > 1 else None
    shape = source.args[0].meta["val"].shape
    if not axes or any(not isinstance(axis, int) for axis in axes):
        return None
    sizes = [shape[axis % len(shape)] for axis in axes]
    try:  # a traced size's number (a size known only at run time has none)
        count = math.prod(int(size) for size in sizes)
    except Exception:  # noqa: BLE001 - torch's data-dependent guard errors have no common base
        return None
    return " * ".join(low.size(size) for size in sizes) if count == divisor else None


def _scaled(low: Lowering, node: Any, a: Val, factor: float) -> Val | None:
    root = low.dims.scale(factor, _contracted(low, node))
    if root is None:
        return None
    return Val(f"{a.at(PRODUCT)} / {root}", PRODUCT)


def _divided(low: Lowering, node: Any, a: Val, divisor: float) -> Val | None:
    if divisor <= 1:
        return None
    counted = _summed_count(low, node.args[0], divisor)
    if counted is not None:  # a sum divided by how many it summed: a mean
        shown = counted if re.fullmatch(r"\w+", counted) else f"({counted})"
        return Val(f"{a.at(PRODUCT)} / {shown}", PRODUCT)
    root = low.dims.scale(1.0 / divisor, _contracted(low, node))
    if root is None:
        return None
    return Val(f"{a.at(PRODUCT)} / {root}", PRODUCT)


RULES["add.Tensor"] = _binary("+", SUM)
RULES["sub.Tensor"] = _binary("-", SUM)
RULES["mul.Tensor"] = RULES["multiply.Tensor"] = _binary("*", PRODUCT)  # torch.multiply
RULES["div.Tensor"] = _binary("/", PRODUCT)
# `dim_t // 2` on a float tensor (DETR-style sine positions): the language's `//`
RULES["floor_divide.default"] = RULES["floor_divide.Scalar"] = _binary("//", PRODUCT)


@rule("remainder.Scalar", "remainder.Tensor")
def _remainder(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # a rolling cache's slots, `positions % sliding_window` (Mistral's reference code): an
    # int modulus is a size, written as its dim
    modulus = node.args[1]
    divisor = Val(low.size(modulus)) if isinstance(modulus, int) and modulus > 1 else \
        _tensor(args[1])
    return Val(f"{_tensor(args[0]).at(PRODUCT)} % {divisor.at(PRODUCT + 1)}", PRODUCT)
RULES["logical_and.default"] = RULES["bitwise_and.Tensor"] = RULES["__and__.Tensor"] = \
    _binary("&", AND)
RULES["logical_or.default"] = RULES["bitwise_or.Tensor"] = RULES["__or__.Tensor"] = \
    _binary("|", OR)


@rule("reciprocal.default")
def _reciprocal(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # `1. / torch.einsum(...)`: linear attention's normaliser (Performer's D_inv)
    return Val(f"1 / {_tensor(args[0]).at(PRODUCT + 1)}", PRODUCT)


@rule("rsub.Scalar", "rsub.Tensor")
def _rsub(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    return Val(f"{_tensor(args[1]).at(SUM)} - {_tensor(args[0]).at(SUM + 1)}", SUM)


@rule("pow.Tensor_Scalar")
def _pow(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    exponent = args[1]
    if exponent.kind != "number":
        raise Unlowerable("pow")
    return Val(f"{_tensor(args[0]).at(POSTFIX)} ** {exponent.at(UNARY)}", POWER)


@rule("pow.Scalar")
def _pow_of_number(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # `torch.pow(m_0, torch.arange(1, 1 + n))` (ALiBi's slopes): a positive number raised
    # to each entry, written exp(x * log(base)), which the spec's `**` (a number exponent)
    # does not say
    base = node.args[0]
    if isinstance(base, bool) or not isinstance(base, (int, float)) or base <= 0:
        raise Unlowerable("pow")
    return Val(f"exp({_tensor(args[1]).at(PRODUCT)} * {number(math.log(base)).at(PRODUCT + 1)})")


@rule("neg.default")
def _neg(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    return Val(f"-{_tensor(args[0]).at(UNARY)}", UNARY)


def _function(name: str) -> Rule:
    def lower(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
        return Val(f"{name}({_tensor(args[0]).text})")
    return lower


for _aten, _builtin in {"exp.default": "exp", "log.default": "log", "sqrt.default": "sqrt",
                        "rsqrt.default": "rsqrt", "tanh.default": "tanh",
                        "sigmoid.default": "sigmoid", "relu.default": "relu",
                        "silu.default": "silu", "abs.default": "abs", "cos.default": "cos",
                        "sin.default": "sin", "erf.default": "erf", "square.default": "square",
                        "softplus.default": "softplus", "acos.default": "acos"}.items():
    RULES[_aten] = _function(_builtin)


@rule("gelu.default")
def _gelu(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _tensor(args[0])
    approximate = node.kwargs.get("approximate", "none")
    if approximate == "none":
        return Val(f"gelu({x.text})")
    return Val(f"0.5 * {x.at(PRODUCT)} * (1 + tanh(0.7978845608028654 * ({x.at(SUM)} + "
               f"0.044715 * {x.at(POSTFIX)} ** 3)))", PRODUCT)


@rule("hardswish.default")
def _hardswish(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # x * relu6(x + 3) / 6 (LeViT's attention output, `nn.Hardswish` before its projection)
    x = _tensor(args[0])
    return Val(f"{x.at(PRODUCT)} * minimum(maximum({x.at(SUM)} + 3, 0), 6) / 6", PRODUCT)


@rule("softmax.int", "_softmax.default")
def _softmax(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    return Val(f"softmax({_tensor(args[0]).text}, axis={_axis(node, 1)})")


def _operands(node: Any) -> list[Any]:
    """The nodes a node's lowering reads: what was written, for a view read back; the
    scores, for a softmax written with `logsumexp`; else its inputs."""
    written = read_back(node)
    if written is not None:
        return [written]
    normalised = _logsumexp_softmax(node)
    return [normalised[0]] if normalised is not None else list(node.all_input_nodes)


def _logsumexp_softmax(node: Any) -> tuple[Any, int] | None:
    """`exp(x - logsumexp(x, dim=a, keepdim=True))` (Reformer's attention probabilities, and
    its hashes' weights): `softmax(x, axis=a)`, exactly; its scores node and axis."""
    if _name(node.target) != "exp.default" or not hasattr(node.args[0], "op") \
            or _name(node.args[0].target) != "sub.Tensor" or len(node.args[0].args) != 2:
        return None
    scores, normaliser = node.args[0].args
    if not hasattr(normaliser, "op") or _name(normaliser.target) != "logsumexp.default" \
            or normaliser.args[0] is not scores or node.args[0].kwargs.get("alpha", 1) != 1:
        return None
    axes = normaliser.args[1] if len(normaliser.args) > 1 else normaliser.kwargs.get("dim")
    keep = normaliser.args[2] if len(normaliser.args) > 2 else normaliser.kwargs.get("keepdim")
    if not keep or not isinstance(axes, (list, tuple)) or len(axes) != 1:
        return None
    return scores, axes[0] % len(scores.meta["val"].shape)


@rule("logsumexp.default")
def _logsumexp(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # log(sum(exp(x))) along the axes, as torch defines it (a softmax's normaliser; the
    # softmax itself, `exp(x - logsumexp(x))`, is read as one: `_logsumexp_softmax`)
    x = _tensor(args[0])
    keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    axes = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    rank = low.rank(node.args[0])
    text = f"exp({x.text})"
    for axis in sorted((a % rank for a in axes), reverse=True):
        text = f"sum({text}, axis={axis}{', keepdims=true' if keep else ''})"
    return Val(f"log({text})")


@rule("log_softmax.int", "_log_softmax.default")
def _log_softmax(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    return Val(f"log(softmax({_tensor(args[0]).text}, axis={_axis(node, 1)}))")


def _reduction(name: str) -> Rule:
    def lower(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
        x = _tensor(args[0])
        keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        axes = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        if axes is None:
            return Val(f"{name}({x.text})", kind=kind)
        if isinstance(axes, int):
            axes = [axes]
        text = x.text
        rank = low.rank(node.args[0])
        for axis in sorted((a % rank for a in axes), reverse=True):
            text = f"{name}({text}, axis={axis}{', keepdims=true' if keep else ''})"
        return Val(text, kind=kind)
    kind = "bool" if name in ("any", "all") else "tensor"
    return lower


RULES["mean.dim"] = RULES["mean.default"] = _reduction("mean")
RULES["sum.dim_IntList"] = RULES["sum.default"] = _reduction("sum")
for _word in ("any", "all"):
    for _overload in ("dim", "dims", "default"):
        RULES[f"{_word}.{_overload}"] = _reduction(_word)
RULES["amax.default"] = RULES["max.default"] = _reduction("max")  # `torch.max(x)`: of all
RULES["amin.default"] = RULES["min.default"] = _reduction("min")


@rule("var.correction", "var.dim")
def _var(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _tensor(args[0])
    axis = _axis(node, 1)
    if "correction" in str(node.target):
        keep = node.kwargs.get("keepdim", False)
        correction = node.kwargs.get("correction")
        correction = 1 if correction is None else correction
    else:  # var.dim(x, dim, unbiased=True, keepdim=False)
        unbiased = node.args[2] if len(node.args) > 2 else node.kwargs.get("unbiased", True)
        keep = node.args[3] if len(node.args) > 3 else node.kwargs.get("keepdim", False)
        correction = 1 if unbiased else 0
    centred = f"({x.at(SUM)} - mean({x.text}, axis={axis}, keepdims=true)) ** 2"
    reduced = f"mean({centred}, axis={axis}{', keepdims=true' if keep else ''})"
    if correction:
        n = low.size(node.args[0].meta["val"].shape[axis])
        return Val(f"{reduced} * {n} / ({n} - {correction})", PRODUCT)
    return Val(reduced)


@rule("layer_norm.default")
def _layer_norm(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    shape = node.args[1]
    if len(shape) != 1:
        raise Unlowerable("layer_norm over several axes")
    eps = node.args[4] if len(node.args) > 4 else node.kwargs.get("eps", 1e-5)
    text = f"layernorm({_tensor(args[0]).text}, eps={number(float(eps)).text})"
    return _affine(text, args[2] if len(args) > 2 else None, args[3] if len(args) > 3 else None)


@rule("_native_batch_norm_legit_no_training.default")
def _batch_norm_parts(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # the same, as a second pass decomposes it: its two other results (no statistics
    # saved) are never read
    weight, bias, mean, var = (args[i] if len(args) > i else None for i in (1, 2, 3, 4))
    normed = _by_running_statistics(low, node, _tensor(args[0]), weight, bias, mean, var,
                                    _given(node, 6, "eps", 1e-5))
    unread = Val("?", kind="unknown")
    return Val("parts", kind="multi", items=[normed, unread, unread])


@rule("batch_norm.default")
def _batch_norm(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    """`nn.BatchNorm{1,2,3}d` in eval (CvT's convolutional projection, LeViT's `Linear` then
    `BatchNorm1d`). In training it normalises by the batch's own statistics: not lowered."""
    if _given(node, 5, "training", False):
        raise Unlowerable("batch_norm of the batch's statistics")
    weight, bias, mean, var = (args[i] if len(args) > i else None for i in (1, 2, 3, 4))
    return _by_running_statistics(low, node, _tensor(args[0]), weight, bias, mean, var,
                                  _given(node, 7, "eps", 1e-5))


def _by_running_statistics(low: Lowering, node: Any, x: Val, weight: Val | None,
                           bias: Val | None, mean: Val | None, var: Val | None,
                           eps: Any) -> Val:
    """Each channel (axis 1) less its running mean, over the root of its running variance
    plus eps, then the affine."""
    rank = low.rank(node.args[0])
    if mean is None or var is None or mean.kind == "none" or var.kind == "none" or rank < 2:
        raise Unlowerable("batch_norm without running statistics")
    spread = "[:, " + ", ".join(["None"] * (rank - 2)) + "]" if rank > 2 else ""

    def channel(value: Val | None) -> Val | None:
        if value is None or value.kind == "none" or not spread:
            return value
        return Val(f"{_tensor(value).at(POSTFIX)}{spread}", POSTFIX)

    mean, var = channel(mean), channel(var)
    assert mean is not None and var is not None
    text = f"(({x.at(SUM)} - {mean.at(SUM + 1)}) / sqrt({var.at(SUM)} + " \
        f"{number(float(eps)).text}))"
    return _affine(text, channel(weight), channel(bias))


@rule("group_norm.default")
def _group_norm(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # F.group_norm(x [N, C, *], G, weight [C], bias [C], eps): each group of C / G channels
    # normalised over its channels and positions, which is a layernorm of the group made one
    # axis ([N, G, C / G * H * W]), then the per-channel affine (diffusers' VAE attention)
    shape = list(node.args[0].meta["val"].shape)
    groups = _given(node, 1, "num_groups", None)
    if not isinstance(groups, int) or len(shape) < 3:
        raise Unlowerable("group_norm")
    eps = _given(node, 4, "eps", 1e-5)
    whole = _group_size(shape, groups)
    flat = f"reshape({_tensor(args[0]).text}, [{low.size(shape[0])}, {low.size(groups)}, " \
        f"{low.size(whole)}])"
    normed = f"reshape(layernorm({flat}, eps={number(float(eps)).text}), " \
        f"{_shape_list(low, shape)})"
    ones = ", 1" * (len(shape) - 2)
    weight, bias = (args[i] if len(args) > i else None for i in (2, 3))
    return _affine(normed, *(Val(f"reshape({v.text}, [{low.size(shape[1])}{ones}])")
                             if v is not None and v.kind != "none" else None
                             for v in (weight, bias)))


def _group_size(shape: list[Any], groups: int) -> Any:
    """The number of values in one of ``groups`` groups of channels of [N, C, *]: C / G
    channels times the positions (a size, int or SymInt)."""
    size = shape[1] // groups
    for axis in shape[2:]:
        size = size * axis
    return size


@rule("rms_norm.default")
def _rms_norm(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    shape = node.args[1]
    eps = node.args[3] if len(node.args) > 3 else node.kwargs.get("eps")
    if len(shape) != 1 or eps is None:
        raise Unlowerable("rms_norm")
    text = f"rmsnorm({_tensor(args[0]).text}, eps={number(float(eps)).text})"
    return _affine(text, args[2] if len(args) > 2 else None, None)


def _affine(text: str, weight: Val | None, bias: Val | None) -> Val:
    value = Val(text)
    if weight is not None and weight.kind != "none":
        value = Val(f"{value.text} * {weight.at(PRODUCT + 1)}", PRODUCT)
    if bias is not None and bias.kind != "none":
        value = Val(f"{value.text} + {bias.at(SUM + 1)}", SUM)
    return value


@rule("view.default", "reshape.default", "_unsafe_view.default")
def _reshape(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _viewed(args[0])
    # A -1 as written (the graph as recorded keeps it) is the size the trace computed there.
    result = node.meta.get("val")
    shape = list(result.shape) if _is_tensor(result) else None
    sizes = ", ".join(
        (_index(low, shape[axis]) if shape is not None else "-1") if size == -1
        else _index(low, size) for axis, size in enumerate(node.args[1]))
    return Val(f"reshape({x.text}, [{sizes}])", kind=x.kind, causal01=x.causal01)


@rule("transpose.int")
def _transpose(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _viewed(args[0])
    rank = low.rank(node.args[0])
    a, b = node.args[1] % rank, node.args[2] % rank
    if {a, b} == {rank - 2, rank - 1}:
        return Val(f"{x.at(POSTFIX)}.T", POSTFIX, kind=x.kind)
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return Val(f"transpose({x.text}, {perm})", kind=x.kind)


@rule("t.default")
def _t(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _tensor(args[0])
    return Val(f"{x.at(POSTFIX)}.T", POSTFIX, kind=x.kind)


@rule("permute.default")
def _permute(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _viewed(args[0])
    rank = low.rank(node.args[0])
    perm = [p % rank for p in node.args[1]]
    if perm == list(range(rank)):
        return x
    if perm == [*range(rank - 2), rank - 1, rank - 2]:
        return Val(f"{x.at(POSTFIX)}.T", POSTFIX, kind=x.kind)
    return Val(f"transpose({x.text}, {perm})", kind=x.kind)


@rule("unsqueeze.default")
def _unsqueeze(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _viewed(args[0])
    rank = low.rank(node.args[0])
    axis = node.args[1] % (rank + 1)
    entries = [":"] * axis + ["None"] + ([] if axis == rank else ["..."])
    if axis == rank:
        entries = ["..."] + ["None"]
    return Val(f"{x.at(POSTFIX)}[{', '.join(entries)}]", POSTFIX, kind=x.kind,
               causal01=x.causal01)


@rule("squeeze.dim", "squeeze.dims", "squeeze.default")
def _squeeze(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # `squeeze()` of every axis of 1 too (MRA's `attention_mask.squeeze()`): an axis of a
    # traced size is never 1 (torch traces one of 1 as the number), so the traced shape
    # says which went
    x = _viewed(args[0])
    shape = ", ".join(low.size(s) for s in node.meta["val"].shape)
    return Val(f"reshape({x.text}, [{shape}])", kind=x.kind)


@rule("expand.default")
def _expand(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _viewed(args[0])
    before = node.args[0].meta["val"].shape
    after = node.meta["val"].shape
    offset = len(after) - len(before)
    text = x.text
    if offset:
        text = f"{x.at(POSTFIX)}[{', '.join(['None'] * offset + ['...'])}]"
    for axis, (old, new) in enumerate(zip([1] * offset + list(before), after)):
        if str(old) != str(new):
            text = f"repeat({text}, {low.size(new)}, axis={axis})"
    return Val(text, ATOM if text != x.text else x.prec, kind=x.kind)


@rule("repeat_interleave.self_int")
def _repeat_interleave(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _tensor(args[0])
    axis = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim")
    if axis is None and len(node.args[0].meta["val"].shape) == 1:
        # without dim torch repeats the flattened input: a vector's own axis (Flamingo's
        # `repeat_interleave(arange(num_images), repeats=image_token_length)`)
        axis = 0
    if axis is None:
        raise Unlowerable("repeat_interleave without dim")
    return Val(f"repeat({x.text}, {low.size(node.args[1])}, axis={axis})", kind=x.kind)


@rule("repeat.default")
def _tile(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _tensor(args[0])
    counts = [_traced(count) for count in node.args[1]]
    before = node.args[0].meta["val"].shape
    if len(counts) != len(before) or any(not isinstance(count, int) or count > 8
                                         for b, count in zip(before, counts)
                                         if count != 1 and str(b) != "1"):
        # more counts than axes (new leading axes), or a count traced or large (SEW-D's
        # `pos_query_layer.repeat(B * H // heads, 1, 1)`): NumPy's `tile`, which is
        # torch's `repeat`, leading axes included
        reps = ", ".join(low.size(count) for count in counts)
        return Val(f"tile({x.text}, reps=[{reps}])", kind=x.kind)
    text = x.text
    for axis, count in enumerate(counts):
        if count == 1:
            continue
        if isinstance(before[axis], int) and before[axis] == 1:
            # an axis of one entry repeated is that entry n times, the count traced or not
            # (Mistral's `slots.repeat(bsz, 1, n_kv_heads, head_dim)`)
            text = f"repeat({text}, {low.size(count)}, axis={axis})"
            continue
        if not isinstance(count, int) or count > 8:
            raise Unlowerable("repeat count")
        text = f"concat([{', '.join([text] * count)}], axis={axis})"
    return Val(text, kind=x.kind)


@rule("cat.default")
def _cat(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    kept = [v for v in args[0].items if v.kind != "empty"]
    if len(kept) == 1:
        return kept[0]
    parts = ", ".join(_tensor(v).text for v in kept)
    axis = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    # a concat of masks is a mask (Transformer-XL's memory columns before the causal ones):
    # `mask == 0` of it is then its negation, not arithmetic on a bool (SC403)
    return Val(f"concat([{parts}], axis={axis})", kind=_kind(node.meta.get("val")))


@rule("hstack.default")
def _hstack(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # torch.hstack (Llama's `[zeros((T, start_pos)), mask]`): a concat along axis 1, along
    # axis 0 for vectors
    kept = [v for v in args[0].items if v.kind != "empty"]
    if len(kept) == 1:
        return kept[0]
    axis = 0 if low.rank(node.args[0][0]) == 1 else 1
    return Val(f"concat([{', '.join(_tensor(v).text for v in kept)}], axis={axis})",
               kind=_kind(node.meta.get("val")))


@rule("stack.default")
def _stack(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    parts = ", ".join(_tensor(v).text for v in args[0].items)
    axis = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    return Val(f"stack([{parts}], axis={axis})", kind=_kind(node.meta.get("val")))


_BIG = 2 ** 62


@rule("slice.Tensor")
def _slice(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _viewed(args[0])
    rank = low.rank(node.args[0])
    axis = (node.args[1] if len(node.args) > 1 else 0) % rank
    start = node.args[2] if len(node.args) > 2 else None
    end = node.args[3] if len(node.args) > 3 else None
    step = node.args[4] if len(node.args) > 4 else 1
    size = node.args[0].meta["val"].shape[axis]
    whole_start = start in (None, 0)
    whole_end = end is None or isinstance(end, int) and (end >= _BIG or str(end) == str(size))
    if whole_start and whole_end and step == 1:
        return x
    if step == 1 and str(node.meta["val"].shape[axis]) == str(size) and isinstance(
            start, int) and start < 0:
        # `positions[-window:]` of a sequence torch traced no longer than the window (its
        # guard says so): the whole axis, which a slice counting from the end may not be
        return x
    if whole_start and step == 1 and str(size) == "1" and str(node.meta["val"].shape[axis]) == "1":
        # `mask[..., :T]` of a broadcast axis of 1 (wenet's mask cut to the scores' keys):
        # Python clamps the end, so every end >= 1 keeps the one entry; the spec's `[:T]`
        # would read past it (SC317)
        return x
    bound = ""
    if not whole_start:
        bound = _index(low, start)
    bound += ":"
    if not whole_end:
        bound += _index(low, end)
    if step != 1:
        bound += f":{step}"
    if not whole_end and (not isinstance(end, int) or end > 1):
        # the module reads that far into the axis (`[:T]`, `[..., :2]`): the spec says so
        _constraint(low, _index(low, end), low.size(size))
    if step == 1 and not whole_start:
        _sliced_size(low, node, axis, _index(low, start),
                     low.size(size) if whole_end else _index(low, end))
    if not whole_start and _traced_at(start) is not None and _traced_at(start) >= 0:
        # a start the sizes move (Transformer-XL's `table[P - k:P + q]`), traced counting
        # from the start of the axis: the spec says it stays there (one traced negative,
        # `x[:, -k:]`, counts from the end, as written)
        text = f"constraint {_index(low, start)} >= 0"
        if text not in low.out.constraints:
            low.out.constraints.append(text)
    entries = [":"] * axis + [bound]
    if axis == rank - 1 and axis > 0:
        entries = ["...", bound]
    corner = _corner(x, axis, rank, whole_start, step, bound)
    if corner is not None and corner[0] == corner[1]:
        # tril(ones)[:T, :T] is the causal mask of T: written so, the meaning pass follows it
        mask = f"causal_mask({corner[0]})"
        lead = [1] * corner[2]
        text = mask if not lead else \
            f"reshape({mask}, [{', '.join([*map(str, lead), corner[0], corner[0]])}])"
        return Val(text, kind=x.kind, causal01=x.causal01, causal=corner)
    return Val(f"{x.at(POSTFIX)}[{', '.join(entries)}]", POSTFIX, kind=x.kind,
               causal01=x.causal01, causal=corner)


def _sliced_size(low: Lowering, node: Any, axis: int, start: str, end: str) -> None:
    """The width of `x[..., a:b]` as `b - a` where the traced width's name is another dim's
    (GPT-NeoX-Japanese's `query[..., rotary_ndims:]`, `head_size - rotary_ndims`, traced 6
    as its 6 heads are): two dims equal at the traced sizes only, which the annotation
    would assert for every size (a false SC303)."""
    traced = node.meta["val"].shape[axis]
    if not isinstance(traced, int) or start.startswith("-") or end.startswith("-"):
        return
    width = f"{end} - {_factor(start)}"
    named = low.size(traced)
    at_trace = {**low.dims.atomic, **{n: low.dims.value(n) for n in low.dims.derived}}
    if _tables.size_at(width, at_trace) != traced or _values(low, width) == _values(low, named) \
            or None in _values(low, width):
        return
    low.axis_sizes.setdefault(node, {})[axis] = width
    # the spec has no empty axis: it holds where the slice keeps some of the axis, as at
    # the traced sizes (an empty pass-through, `rotary_ndims == head_size`, is another form)
    text = f"constraint {start} < {end}"
    if text not in low.out.constraints:
        low.out.constraints.append(text)


def _corner(x: Val, axis: int, rank: int, from_start: bool, step: Any,
            bound: str) -> tuple[str, str, int] | None:
    """The corner of a causal mask that slicing its rows or columns from 0 keeps."""
    if x.causal is None or not from_start or step != 1 or axis < rank - 2:
        return None
    end = bound.lstrip(":")
    rows, columns, lead = x.causal
    return (end, columns, lead) if axis == rank - 2 else (rows, end, lead)


def _traced_at(value: Any) -> int | None:
    """A symbolic size's value at the traced call (an FX node of one, or a SymInt); None
    for a number or where torch kept no hint."""
    if hasattr(value, "op"):
        value = value.meta.get("val")
    hint = getattr(getattr(value, "node", None), "hint", None)
    return int(hint) if isinstance(hint, int) else None


def _constraint(low: Lowering, bound: str, size: str) -> None:
    """A slice `[:T]` of an axis of a fixed size: the spec says `T <= size`."""
    if bound != size and not size.isdigit():
        text = f"constraint {bound} <= {size}"
        if text not in low.out.constraints:
            low.out.constraints.append(text)


def _index(low: Lowering, value: Any) -> str:
    if hasattr(value, "op"):
        found = low.values.get(value)
        if found is None or found.kind != "dim":
            raise Unlowerable("index")
        return found.text
    if isinstance(value, int):
        return str(value) if value < 0 else low.size(value)
    return low.size(value)


@rule("select.int")
def _select(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _viewed(args[0])
    rank = low.rank(node.args[0])
    axis = node.args[1] % rank
    index = node.args[2]
    # an entry below 5 is a number, as `sym` writes one: `qkv[2]` of a packed q, k, v is the
    # third, not `qkv[heads]` where a factory's heads are 2 (Hiera's)
    entry = str(index) if isinstance(index, int) and 0 <= index < 5 else _index(low, index)
    entries = [":"] * axis + [entry]
    return Val(f"{x.at(POSTFIX)}[{', '.join(entries)}]", POSTFIX, kind=x.kind)


@rule("split.Tensor", "split.default", "split_with_sizes.default", "chunk.default")
def _split(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _tensor(args[0])
    rank = low.rank(node.args[0])
    axis = (node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)) % rank
    parts = node.meta["val"]
    items: list[Val] = []
    start: Any = 0  # an int, or torch's symbolic size where a part's size is one
    for part in parts:
        stop = start + part.shape[axis]
        begin = "" if isinstance(start, int) and start == 0 else low.size(start)
        entries = [":"] * axis + [f"{begin}:{low.size(stop)}"]
        if axis == rank - 1 and axis > 0:
            entries = ["...", f"{begin}:{low.size(stop)}"]
        items.append(Val(f"{x.at(POSTFIX)}[{', '.join(entries)}]", POSTFIX, kind=x.kind))
        start = stop
    return Val("parts", kind="multi", items=items)


@rule("unbind.int")
def _unbind(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _tensor(args[0])
    rank = low.rank(node.args[0])
    axis = (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) % rank
    count = node.args[0].meta["val"].shape[axis]
    if not isinstance(count, int):
        raise Unlowerable("unbind")
    lead = [":"] * axis if axis < rank - 1 or axis == 0 else ["..."]
    items = [Val(f"{x.at(POSTFIX)}[{', '.join([*lead, str(i)])}]", POSTFIX, kind=x.kind)
             for i in range(count)]
    return Val("parts", kind="multi", items=items)


@rule("getitem")
def _getitem(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    whole, index = args[0], node.args[1]
    if whole.kind != "multi" or not isinstance(index, int) or index >= len(whole.items):
        raise Unlowerable("getitem")
    if whole.items[index].kind == "unknown":  # a part without a lowering (a pooling's indices)
        raise Unlowerable("getitem")
    return whole.items[index]


@rule("masked_fill.Scalar", "masked_fill.Tensor")
def _masked_fill(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x, mask, fill = _tensor(args[0]), args[1], args[2]
    if mask.kind != "bool":
        raise Unlowerable("mask")
    if mask.negation_of is not None:  # masked_fill(S, ~keep, v) keeps S where keep
        return Val(f"where({mask.negation_of.text}, {x.text}, {fill.text})")
    return Val(f"where({mask.text}, {fill.text}, {x.text})")


@rule("where.self", "where.ScalarOther", "where.ScalarSelf", "where.Scalar")
def _where(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    condition = args[0]
    if condition.kind != "bool":
        raise Unlowerable("condition")
    return Val(f"where({condition.text}, {_tensor(args[1]).text}, {_tensor(args[2]).text})")


def _compare(symbol: str, negate: str | None) -> Rule:
    def lower(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
        a, b = args[0], args[1]
        if a.causal01 and b.kind == "number" and b.text in ("0", "1"):
            equal_zero = (symbol == "==") == (b.text == "0")
            if equal_zero:
                return Val(f"~{a.at(UNARY)}", UNARY, kind="bool", negation_of=a)
            return Val(a.text, a.prec, kind="bool")
        if a.kind == "bool" and b.kind == "number" and b.text in ("0", "false") \
                and symbol == "==":
            return Val(f"~{a.at(UNARY)}", UNARY, kind="bool", negation_of=a)
        return Val(f"{_tensor(a).at(SUM)} {symbol} {_tensor(b).at(SUM)}", COMPARE, kind="bool")
    return lower


for _suffix in ("Scalar", "Tensor"):
    RULES[f"eq.{_suffix}"] = _compare("==", "!=")
    RULES[f"ne.{_suffix}"] = _compare("!=", "==")
    RULES[f"lt.{_suffix}"] = _compare("<", None)
    RULES[f"le.{_suffix}"] = _compare("<=", None)
    RULES[f"gt.{_suffix}"] = _compare(">", None)
    RULES[f"ge.{_suffix}"] = _compare(">=", None)


@rule("logical_not.default", "bitwise_not.default")
def _not(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = args[0]
    if x.kind != "bool":
        raise Unlowerable("not")
    if x.negation_of is not None:
        return x.negation_of
    return Val(f"~{x.at(UNARY)}", UNARY, kind="bool", negation_of=x)


def _same(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = args[0]
    if x.kind in ("number", "index1"):  # a constant made a tensor and copied
        return x
    if x.kind not in ("tensor", "bool"):
        raise Unlowerable("identity")
    result = node.meta.get("val")
    if _kind(result) != x.kind and x.kind != "bool":
        return Val(f"{x.at(COMPARE + 1)} != 0", COMPARE, kind="bool")  # numbers to bool
    source = _element(node.args[0].meta.get("val")) if hasattr(node.args[0], "meta") else ""
    if _element(result) == "int" and source != "int":
        return Val(f"long({x.text})")  # a mask or reals to integers (`.to(torch.long)`)
    if x.kind == "bool" and _kind(result) != "bool":  # a mask turned into numbers
        return Val(_as_numbers(x))
    return x


for _aten in ("clone.default", "contiguous.default", "alias.default", "detach.default",
              "_to_copy.default", "to.dtype", "to.dtype_layout", "to.device", "type_as.default",
              "lift_fresh_copy.default", "dropout.default", "feature_dropout.default",
              "alpha_dropout.default", "native_dropout.default", "float.default"):
    RULES[_aten] = _same


@rule("sym_size.int")
def _sym_size(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    return Val(low.size(node.meta["val"]), PRODUCT, kind="dim")


def _sym_binary(symbol: str) -> Rule:
    def lower(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
        value = node.meta.get("val")
        if value is not None:
            return Val(low.size(value), PRODUCT, kind="dim")
        raise Unlowerable("sym")
    return lower


for _operator in ("mul", "add", "sub", "floordiv", "truediv", "mod", "neg", "sym_float",
                  "sym_int", "sym_max", "sym_min"):
    RULES[_operator] = _sym_binary(_operator)


def _shape_list(low: Lowering, value: Any) -> str:
    return "[" + ", ".join(_index(low, s) for s in value) + "]"


@rule("ones.default", "zeros.default")
def _ones(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    word = "ones" if "ones" in str(node.target) else "zeros"
    kind = _kind(node.meta["val"])
    if not len(node.args[0]) and _element(node.meta["val"]) == "":
        # a number the code made a tensor (HF's eager mask: `where(m, zeros(()), min)`),
        # as a constant tensor of no axes is: the meaning pass reads which branch keeps
        return number(1.0 if word == "ones" else 0.0)
    text = f"{word}({_shape_list(low, node.args[0])})"
    if kind == "bool":
        text = f"{text} > 0"
        return Val(text, COMPARE, kind="bool")
    return Val(_integer(text, node))


def _integer(text: str, node: Any) -> str:
    """A table of ones or zeros of an integer dtype stays integers (`long(zeros([T, T]))`):
    T5's `min(relative_position, zeros_like(relative_position))` indexes a table."""
    return f"long({text})" if _element(node.meta["val"]) == "int" else text


@rule("new_ones.default")
def _new_ones(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # `x.new_ones(size)` is `ones(size)` of x's dtype (BigBird's block-sparse padding of its
    # masks, `to_mask.new_ones([B, 1, 1, r * b])`): what x holds is never read
    text = f"ones({_shape_list(low, node.meta['val'].shape)})"
    if _kind(node.meta["val"]) == "bool":
        return Val(f"{text} > 0", COMPARE, kind="bool")
    if _element(node.meta["val"]) == "complex":
        raise Unlowerable("new_ones of complex")
    return Val(_integer(text, node))


@rule("ones_like.default", "zeros_like.default")
def _ones_like(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    word = "ones" if "ones" in str(node.target) else "zeros"
    if _element(node.meta["val"]) in ("bool", "complex"):
        raise Unlowerable(f"{word}_like")
    return Val(_integer(f"{word}({_shape_list(low, node.meta['val'].shape)})", node))


@rule("full.default")
def _full(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    return _filled(low, node, node.args[0], args[1])


@rule("new_full.default")
def _new_full(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # `x.new_full(size, fill)` is `full(size, fill)` of x's dtype (timm's causal bias,
    # `attn.new_full((N, N), -inf).triu_(1)`): what x holds is never read
    return _filled(low, node, node.args[1], args[2])


def _filled(low: Lowering, node: Any, shape: Any, fill: Val) -> Val:
    if fill.kind != "number" or _kind(node.meta["val"]) == "bool":
        raise Unlowerable("full")
    if not len(shape) and _element(node.meta["val"]) == "":
        # a number the code made a tensor of no axes (audiocraft's causal bias,
        # `where(valid, zeros([]), full([], -inf))`): the number, as `zeros(())` is
        return fill
    return Val(f"{fill.at(PRODUCT)} * ones({_shape_list(low, shape)})", PRODUCT)


@rule("upsample_linear1d.vec")
def _linear_resize(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # `F.interpolate(t, size=n, mode="linear")` (ViTDet's and SAM's relative position
    # tables, get_rel_pos): each output j reads the inputs around its centre
    # src_j = (j + 0.5) * n_in / n_out - 0.5, held in [0, n_in - 1], with the tent weights
    # max(1 - |src_j - i|, 0) -- torch's definition, checked by conformance
    align = node.args[2] if len(node.args) > 2 else node.kwargs.get("align_corners", False)
    scales = node.args[3] if len(node.args) > 3 else node.kwargs.get("scale_factors")
    if align or (scales is not None and any(s is not None for s in scales)):
        raise Unlowerable("upsample_linear1d with align_corners or scale factors")
    size_in = node.args[0].meta["val"].shape[-1]
    size_out = node.meta["val"].shape[-1]
    n_in, n_out = low.size(size_in), low.size(size_out)
    centres = f"clamp((arange({n_out}) + 0.5) * ({n_in}) / ({n_out}) - 0.5, min=0, " \
        f"max={n_in} - 1)"
    weights = f"maximum(1 - abs({centres}[:, None] - arange({n_in})[None, :]), 0)"
    return Val(f'einsum("...i,ji->...j", {_tensor(args[0]).text}, {weights})')


@rule("tril.default", "triu.default")
def _triangle(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    word = "tril" if "tril" in str(node.target) else "triu"
    x = _tensor(args[0])
    offset = node.args[1] if len(node.args) > 1 else 0
    # a traced diagonal (`tril(diagonal=T_k - T)`, a cache's bottom-right) is its dims
    shown = offset if isinstance(offset, int) else _index(low, offset)
    suffix = f", {shown}" if offset != 0 else ""
    return Val(f"{word}({x.text}{suffix})", kind=x.kind)


@rule("eye.default", "eye.m")
def _eye(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # `torch.eye(n)` (Nyströmformer's pseudo-inverse): 1 where the two indices are equal,
    # written with the tent `_taps` uses
    rows, columns = node.meta["val"].shape
    if _element(node.meta["val"]) in ("bool", "complex"):
        raise Unlowerable("eye")
    return Val(f"maximum(1 - abs(arange({low.size(rows)})[:, None] - "
               f"arange({low.size(columns)})[None, :]), 0)")


@rule("arange.default", "arange.start", "arange.start_step")
def _arange(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    if len(node.args) == 1:
        return Val(f"arange({_index(low, node.args[0])})")
    start = node.args[0]
    step = node.args[2] if len(node.args) > 2 else 1
    if not isinstance(step, int) or step < 1 or not isinstance(start, int) \
            and not hasattr(start, "op"):
        raise Unlowerable("arange")
    # a traced start (OpenNMT's `torch.arange(-length + 1, 1, 1)`) is its dims; a step
    # (Flux's rotary `arange(0, dim, 2)`) multiplies the count's positions
    first = str(start) if isinstance(start, int) else f"({_index(low, start)})"
    count = node.meta["val"].shape[0]
    stepped = f"arange({low.size(count)})" + (f" * {step}" if step != 1 else "")
    return Val(stepped if first == "0" else f"{first} + {stepped}", SUM)


@rule("scaled_dot_product_attention.default")
def _sdpa(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    q, k, v = (_tensor(a) for a in args[:3])
    options = dict(zip(("attn_mask", "dropout_p", "is_causal", "scale"), node.args[3:7]))
    options.update(node.kwargs)
    q_shape, k_shape = node.args[0].meta["val"].shape, node.args[1].meta["val"].shape
    if options.get("enable_gqa") and len(k_shape) >= 3 and q_shape[-3] != k_shape[-3]:
        # each key/value head serves a group of query heads, in order (repeat_interleave)
        group = q_shape[-3] // k_shape[-3]
        k, v = (Val(f"repeat({x.text}, {low.size(group)}, axis=-3)") for x in (k, v))
    width = low.size(q_shape[-1])
    scale = options.get("scale")
    if scale is None:
        scores = f"{q.at(PRODUCT)} @ {k.at(POSTFIX)}.T / sqrt({width})"
    else:
        root = low.dims.scale(float(scale), width)
        scores = f"{q.at(PRODUCT)} @ {k.at(POSTFIX)}.T " + \
            (f"/ {root}" if root else f"* {number(float(scale)).at(PRODUCT + 1)}")
    mask = options.get("attn_mask")
    if mask is not None:
        m = low.arg(mask)
        if m.kind == "bool":
            scores = f"where({m.text}, {scores}, -inf)"
        else:
            scores = f"{scores} + {_tensor(m).at(SUM + 1)}"
    if options.get("is_causal"):
        n_q, n_k = low.size(q_shape[-2]), low.size(k_shape[-2])
        if n_q != n_k:
            raise Unlowerable("is_causal with queries and keys of different lengths")
        scores = f"where(causal_mask({n_q}), {scores}, -inf)"
    return Val(f"softmax({scores}, axis=-1) @ {v.at(PRODUCT + 1)}", PRODUCT)


# --- gathers, running sums, bounds, complex numbers (the language's §6.1) ------------------


def _ids(value: Val) -> Val:
    """An index operand: a tensor (its element type is the traced one, `int`)."""
    if value.kind != "tensor":
        raise Unlowerable("index operand")
    return value


@rule("embedding.default")
def _embedding(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse): the forward is a
    # gather of the table's rows whatever the other arguments (they change the gradient)
    weight, ids = _tensor(args[0]), _ids(args[1])
    return Val(f"take({weight.text}, {ids.text}, axis=0)")


@rule("index.Tensor")
def _index_tensor(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _viewed(args[0])
    entries = args[1].items
    given = [i for i, entry in enumerate(entries) if entry.kind != "none"]
    if len(given) != 1:
        raise Unlowerable("index by several tensors")
    axis = given[0]
    index = node.args[1][axis]
    if entries[axis].kind == "index1":  # x[:, :, [v]] is x[:, :, v:v+1]
        at = int(entries[axis].text)
        end = "" if at == -1 else str(at + 1)
        return Val(f"{x.at(POSTFIX)}[{':, ' * axis}{at}:{end}]", kind=x.kind)
    if _element(index.meta.get("val")) != "int":
        raise Unlowerable("index by a mask")
    return Val(f"take({x.text}, {_ids(entries[axis]).text}, axis={axis})", kind=x.kind)


@rule("index_select.default")
def _index_select(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _viewed(args[0])
    axis = node.args[1] % low.rank(node.args[0])
    count = _leading_count(node.args[2])
    if count is not None:
        # the first `count` entries (XLNet's `index_select(x, 3, arange(klen))`, its
        # `x[:, :, :, :klen]`): a slice, which reads that far into the axis (the spec says so)
        size = node.args[0].meta["val"].shape[axis]
        _constraint(low, _index(low, count), low.size(size))
        rank = low.rank(node.args[0])
        entries = ["...", f":{_index(low, count)}"] if axis == rank - 1 and axis > 0 else \
            [":"] * axis + [f":{_index(low, count)}"]
        return Val(f"{x.at(POSTFIX)}[{', '.join(entries)}]", POSTFIX, kind=x.kind)
    return Val(f"index_select({x.text}, {axis}, {_ids(args[2]).text})", kind=x.kind)


def _leading_count(index: Any) -> Any:
    """``n`` where an index operand is ``arange(n)`` (from 0, step 1); None otherwise."""
    if not hasattr(index, "op") or index.op != "call_function":
        return None
    name = _name(index.target)
    if name == "arange.default" and len(index.args) == 1:
        return index.args[0]
    if name in ("arange.start", "arange.start_step") and index.args[0] == 0 and (
            len(index.args) < 3 or index.args[2] == 1):
        return index.args[1]
    return None


@rule("scatter.src", "index_copy.default")
def _written_at(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # `cache.scatter_(dim=1, index=slots, src=xk)`: Mistral's rolling cache written at
    # `positions % sliding_window`; `cache.index_copy_(1, positions, xk)`: Gemma's write into
    # the cache it is given. Each is the builtin of its name.
    builtin = _name(node.target).split(".")[0]
    x = _viewed(args[0])
    axis = node.args[1] % low.rank(node.args[0])
    return Val(f"{builtin}({x.text}, {axis}, {_ids(args[2]).text}, {_tensor(args[3]).text})",
               kind=x.kind)


@rule("roll.default")
def _roll(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # Swin's cyclic shift `torch.roll(x, shifts=(-s, -s), dims=(1, 2))`: along each axis the
    # last `shift` entries come first, a concat of the axis's two slices
    shifts = node.args[1] if len(node.args) > 1 else node.kwargs.get("shifts")
    axes = node.args[2] if len(node.args) > 2 else node.kwargs.get("dims", ())
    shifts = list(shifts) if isinstance(shifts, (list, tuple)) else [shifts]
    axes = list(axes) if isinstance(axes, (list, tuple)) else [axes]
    if not axes or len(axes) != len(shifts) or not all(isinstance(s, int) for s in shifts):
        raise Unlowerable("roll of the flattened tensor or by a traced amount")
    value, shape = _viewed(args[0]), node.args[0].meta["val"].shape
    for shift, axis in zip(shifts, axes):
        axis %= len(shape)
        size = shape[axis]
        if isinstance(size, int):
            shift %= size
        if shift == 0:
            continue
        whole, amount = low.size(size), low.size(abs(shift))
        cut = amount if shift < 0 else low.size(size - shift) if isinstance(size, int) \
            else f"{whole} - {amount}"
        if not isinstance(size, int):
            # the slices are the roll only where the shift is shorter than the axis (torch
            # wraps it modulo a shorter one, which slices cannot say): the spec says so
            text = f"constraint {amount} < {whole}"
            if text not in low.out.constraints:
                low.out.constraints.append(text)
        lead = ":, " * axis
        value = Val(f"concat([{value.at(POSTFIX)}[{lead}{cut}:], "
                    f"{value.at(POSTFIX)}[{lead}:{cut}]], axis={axis})", kind=value.kind)
    return value


@rule("gather.default")
def _gather(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _viewed(args[0])
    if low.rank(node.args[0]) != low.rank(node.args[2]):
        raise Unlowerable("gather of another rank")
    axis = node.args[1] % low.rank(node.args[0])
    return Val(f"take_along_axis({x.text}, {_ids(args[2]).text}, axis={axis})", kind=x.kind)


@rule("cumsum.default")
def _cumsum(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    axis = node.args[1] % max(low.rank(node.args[0]), 1)
    return Val(f"cumsum({_tensor(args[0]).text}, axis={axis})")


@rule("minimum.default", "maximum.default")
def _extremum(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    word = "minimum" if "minimum" in str(node.target) else "maximum"
    return Val(f"{word}({_tensor(args[0]).text}, {_tensor(args[1]).text})")


@rule("clamp.default", "clamp.Tensor", "clamp_min.default", "clamp_max.default",
      "clip.default", "clip.Tensor")
def _clamp(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    name = str(node.target)
    if "clamp_min" in name:
        bounds = {"min": args[1]}
    elif "clamp_max" in name:
        bounds = {"max": args[1]}
    else:
        bounds = {"min": args[1] if len(args) > 1 else kw.get("min", Val("None", kind="none")),
                  "max": args[2] if len(args) > 2 else kw.get("max", Val("None", kind="none"))}
    given = [f"{word}={_tensor(bound).text}" for word, bound in bounds.items()
             if bound.kind != "none"]
    if not given:
        raise Unlowerable("clamp without bounds")
    return Val(f"clamp({_tensor(args[0]).text}, {', '.join(given)})")


for _aten, _builtin in {"view_as_complex.default": "view_as_complex",
                        "view_as_real.default": "view_as_real", "real.default": "real",
                        "imag.default": "imag", "conj.default": "conj",
                        "_conj.default": "conj", "conj_physical.default": "conj"}.items():
    RULES[_aten] = _function(_builtin)


@rule("polar.default")
def _polar(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    return Val(f"polar({_tensor(args[0]).text}, {_tensor(args[1]).text})")


def _pairwise(name: str) -> Rule:
    def lower(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
        return Val(f"{name}({_tensor(args[0]).text}, {_tensor(args[1]).text})")
    return lower


RULES["maximum.default"] = RULES["max.other"] = RULES["fmax.default"] = _pairwise("maximum")
RULES["minimum.default"] = RULES["min.other"] = RULES["fmin.default"] = _pairwise("minimum")


@rule("new_empty.default", "new_zeros.default", "empty.memory_format")
def _empty(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # What an empty tensor holds is never read before it is written (copy, slice_scatter):
    # its shape is what the spec needs.
    if _element(node.meta["val"]) in ("bool", "complex"):
        raise Unlowerable("empty of bool or complex")
    return Val(f"zeros({_shape_list(low, node.meta['val'].shape)})")


@rule("copy.default")
def _copy(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # copy(self, src) is src broadcast to self's shape (the functional `self.copy_(src)`)
    target, source = node.args[0].meta["val"].shape, node.args[1].meta["val"].shape
    if tuple(target) != tuple(source):
        raise Unlowerable("copy that broadcasts")
    return _tensor(args[1])


@rule("slice_scatter.default")
def _slice_scatter(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # `x[..., a:b] = src` as the parts of x around the written slice and src, concatenated
    x, source = _tensor(args[0]), _tensor(args[1])
    rank = low.rank(node.args[0])
    axis = (node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)) % rank
    size = node.args[0].meta["val"].shape[axis]
    start = _traced(node.args[3] if len(node.args) > 3 else node.kwargs.get("start"))
    end = _traced(node.args[4] if len(node.args) > 4 else node.kwargs.get("end"))
    step = node.args[5] if len(node.args) > 5 else node.kwargs.get("step", 1)
    if step != 1:
        raise Unlowerable("slice_scatter with a step")
    if start is None:  # `cache[:bsz]`: torch records the open start as None
        start = 0
    if end is None or isinstance(end, int) and (end >= _BIG or isinstance(size, int)
                                                 and end >= size):
        end = size
    whole = low.size(size)
    first, last = low.size(start), low.size(end)
    if isinstance(size, int) and not isinstance(end, int):
        # `cache[:bsz] = x` in a buffer of a fixed size: the part after the write is empty
        # at the largest batch, which a slice may not be; the positions written instead
        positions = f"arange({last})" if first == "0" else f"arange({first}, {last})"
        return Val(f"index_copy({x.text}, {axis}, {positions}, {source.text})")
    lead = ":, " * axis
    parts = ([f"{x.at(POSTFIX)}[{lead}:{first}]"] if first != "0" else []) + \
        [source.text] + ([f"{x.at(POSTFIX)}[{lead}{last}:]"] if last != whole else [])
    return source if len(parts) == 1 else Val(f"concat([{', '.join(parts)}], axis={axis})")


@rule("select_scatter.default")
def _select_scatter(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # `x[:, :, i] = src` (BigBird's block-sparse scores, written block by block): the parts
    # of x around entry i and src given that axis back, concatenated
    x, source = _tensor(args[0]), _tensor(args[1])
    rank = low.rank(node.args[0])
    axis = (node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)) % rank
    index = node.args[3] if len(node.args) > 3 else node.kwargs.get("index")
    size = node.args[0].meta["val"].shape[axis]
    if not isinstance(index, int):
        raise Unlowerable("select_scatter at a traced index")
    if index < 0 and isinstance(size, int):
        index += size
    lead = ":, " * axis
    written = f"{source.at(POSTFIX)}[{lead}None]"
    if index == -1:  # the last entry of an axis of any length
        return Val(f"concat([{x.at(POSTFIX)}[{lead}:-1], {written}], axis={axis})")
    if index < 0:
        raise Unlowerable("select_scatter counting from the end")
    parts = ([f"{x.at(POSTFIX)}[{lead}:{index}]"] if index else []) + [written] + \
        ([f"{x.at(POSTFIX)}[{lead}{index + 1}:]"] if not isinstance(size, int)
         or index + 1 < size else [])
    return Val(f"concat([{', '.join(parts)}], axis={axis})")


def _traced(value: Any) -> Any:
    """A size argument as traced: a graph node (``x.shape[1]``) stands for its SymInt."""
    return value.meta.get("val") if hasattr(value, "meta") else value


@rule("baddbmm.default", "addbmm.default", "addmm.default")
def _baddbmm(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # beta * input + alpha * (batch1 @ batch2), as Bloom's ALiBi scores are written
    base, left, right = (_tensor(a) for a in args[:3])
    if "addbmm" in str(node.target) and "baddbmm" not in str(node.target):
        raise Unlowerable("addbmm sums over the batch")
    beta, alpha = (node.kwargs.get(word, 1) for word in ("beta", "alpha"))
    if not all(isinstance(v, (int, float)) for v in (beta, alpha)):
        raise Unlowerable("baddbmm scale")
    product = f"{left.at(PRODUCT)} @ {right.at(PRODUCT + 1)}"
    if alpha != 1:
        product = _alpha_scaled(low, node, product, float(alpha))
    if beta == 0:
        return Val(product, PRODUCT)
    scaled = base if beta == 1 else Val(f"{number(float(beta)).at(PRODUCT)} * "
                                        f"{base.at(PRODUCT + 1)}", PRODUCT)
    return Val(f"{scaled.at(SUM)} + {product}", SUM)


def _alpha_scaled(low: Lowering, node: Any, product: str, alpha: float) -> str:
    """``alpha * (batch1 @ batch2)``, a scale recovered as the dim it divides by where it is
    one (diffusers' `baddbmm(..., alpha=self.scale)`: `/ sqrt(dim_head)`, the contracted
    width's), else the number."""
    width = low.size(node.args[1].meta["val"].shape[-1])
    root = low.dims.scale(alpha, width)
    if root is None:
        return f"{number(alpha).at(PRODUCT)} * ({product})"
    return f"({product}) / {root}"


@rule("full_like.default")
def _full_like(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x, fill = _tensor(args[0]), args[1]
    if fill.kind != "number" or _element(node.meta["val"]) in ("bool", "complex"):
        raise Unlowerable("full_like")
    return Val(f"full_like({x.text}, {fill.text})")


# --- order, norms, masked writes (issue 29) ---------------------------------------------------


def _given(node: Any, position: int, word: str, default: Any) -> Any:
    """An ATen argument by position, else by keyword, else its default."""
    return node.args[position] if len(node.args) > position else node.kwargs.get(word, default)


@rule("argmax.default", "argmin.default")
def _arg_extreme(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    word = "argmax" if "argmax" in str(node.target) else "argmin"
    x = _tensor(args[0])
    axis, keep = _given(node, 1, "dim", None), _given(node, 2, "keepdim", False)
    given = "" if axis is None else f", axis={axis % max(low.rank(node.args[0]), 1)}"
    return Val(f"{word}({x.text}{given}{', keepdims=true' if keep else ''})")


def _ordered(x: Val, axis: int, descending: bool) -> tuple[str, str]:
    """`sort` and `argsort` of x along axis: the values and their positions."""
    options = f"axis={axis}{', descending=true' if descending else ''}"
    return f"sort({x.text}, {options})", f"argsort({x.text}, {options})"


@rule("sort.default", "sort.stable")
def _sort(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    values, positions = _ordered(_tensor(args[0]), *_order(low, node))
    return Val("parts", kind="multi", items=[Val(values), Val(positions)])


def _order(low: Lowering, node: Any) -> tuple[int, bool]:
    """sort's and argsort's axis and direction (the `.stable` overloads take keywords only)."""
    stable = "stable" in str(node.target)
    axis = node.kwargs.get("dim", -1) if stable else _given(node, 1, "dim", -1)
    descending = node.kwargs.get("descending", False) if stable else \
        _given(node, 2, "descending", False)
    return axis % max(low.rank(node.args[0]), 1), bool(descending)


@rule("argsort.default", "argsort.stable")
def _argsort(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    return Val(_ordered(_tensor(args[0]), *_order(low, node))[1])


@rule("topk.default")
def _topk(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # topk(x, k, dim=-1, largest=True, sorted=True): the first k of x in order along dim
    x = _tensor(args[0])
    rank = max(low.rank(node.args[0]), 1)
    axis = _given(node, 2, "dim", -1) % rank
    largest = _given(node, 3, "largest", True)
    k = _index(low, node.args[1])
    lead = ["..."] if axis == rank - 1 and axis > 0 else [":"] * axis
    part = f"[{', '.join([*lead, f':{k}'])}]"
    values, positions = _ordered(x, axis, bool(largest))
    return Val("parts", kind="multi", items=[Val(f"{values}{part}", POSTFIX),
                                             Val(f"{positions}{part}", POSTFIX)])


@rule("max.dim", "min.dim")
def _extreme_at(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # x.max(dim) is (values, indices)
    word = "max" if "max" in str(node.target) else "min"
    x = _tensor(args[0])
    axis = _given(node, 1, "dim", 0) % max(low.rank(node.args[0]), 1)
    keep = ", keepdims=true" if _given(node, 2, "keepdim", False) else ""
    return Val("parts", kind="multi", items=[Val(f"{word}({x.text}, axis={axis}{keep})"),
                                             Val(f"arg{word}({x.text}, axis={axis}{keep})")])


@rule("flip.default")
def _flip(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    x = _viewed(args[0])
    rank = max(low.rank(node.args[0]), 1)
    axes = sorted({a % rank for a in node.args[1]})
    if not axes:
        return x
    axis = str(axes[0]) if len(axes) == 1 else f"({', '.join(map(str, axes))})"
    return Val(f"flip({x.text}, axis={axis})", kind=x.kind)


@rule("linalg_vector_norm.default")
def _vector_norm(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # F.normalize's and x.norm(dim)'s norm: the 2-norm (1, inf) of x along the axes
    x = _tensor(args[0])
    order = _given(node, 1, "ord", 2)
    axes = _given(node, 2, "dim", None)
    keep = _given(node, 3, "keepdim", False)
    rank = max(low.rank(node.args[0]), 1)
    named = "" if axes is None else ", axis=" + (
        str(axes % rank) if isinstance(axes, int) else
        str(axes[0] % rank) if len(axes) == 1 else f"({', '.join(str(a % rank) for a in axes)})")
    options = f"{named}{', keepdims=true' if keep else ''}"
    if order == 2:
        return Val(f"sqrt(sum({x.at(POSTFIX)} ** 2{options}))")
    if order == 1:
        return Val(f"sum(abs({x.text}){options})")
    if order == math.inf:
        return Val(f"max(abs({x.text}){options})")
    raise Unlowerable("norm of this order")


@rule("index_put.default", "index_put_.default")
def _index_put(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # `x[..., mask] = v` (no accumulation): v where the mask is true, x elsewhere, the mask
    # covering x's last axes (`where` broadcasts it over the leading ones)
    x, values = _tensor(args[0]), _tensor(args[2])
    accumulate = _given(node, 3, "accumulate", False)
    entries = args[1].items
    given = [i for i, entry in enumerate(entries) if entry.kind != "none"]
    if accumulate or len(given) != 1:
        raise Unlowerable("index_put")
    axis = given[0]
    if entries[axis].kind != "bool":
        return _put_at_positions(low, node, x, axis, entries[axis], values)
    mask = node.args[1][axis].meta["val"]
    source = node.args[2].meta["val"]
    if _is_tensor(source) and len(source.shape) > 0 and math.prod(
            int(s) if isinstance(s, int) else 2 for s in source.shape) != 1:
        raise Unlowerable("index_put of a tensor of values")
    # a mask of leading axes (torchaudio's `x[mask] = 0.0`, mask [B, T] of x [B, T, C]) is
    # widened by an axis of one for each axis after it
    after = low.rank(node.args[0]) - axis - len(mask.shape)
    widened = entries[axis].text if after == 0 else \
        f"{entries[axis].at(POSTFIX)}[{', '.join([':'] * len(mask.shape) + ['None'] * after)}]"
    return Val(f"where({widened}, {values.text}, {x.text})")


@rule("_weight_norm.default")
def _weight_norm(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # `weight_norm`'s parametrization (wav2vec2's positional convolution, dim=2): v times
    # g over v's 2-norm along every axis but `dim` (dim -1: along every axis)
    v, g = _tensor(args[0]), _tensor(args[1])
    rank = low.rank(node.args[0])
    dim = _given(node, 2, "dim", 0)
    axes = [a for a in range(rank) if dim == -1 or a != dim % rank]
    if not axes:
        raise Unlowerable("weight norm of a vector along its axis")
    named = str(axes[0]) if len(axes) == 1 else f"({', '.join(str(a) for a in axes)})"
    norm = f"sqrt(sum({v.at(POSTFIX)} ** 2, axis={named}, keepdims=true))"
    return Val(f"{v.at(POSTFIX)} * ({g.text} / {norm})")


def _put_at_positions(low: Lowering, node: Any, x: Val, axis: int, positions: Val,
                      values: Val) -> Val:
    # `k_cache[:, :, input_pos] = k_val` (gpt-fast's KVCache): one axis indexed by a vector
    # of positions, the values of x's shape with that axis as long as the vector, is
    # `index_copy(x, axis, positions, values)`; a broadcast value or a table of
    # positions is not lowered
    index = node.args[1][axis].meta.get("val")
    source = node.args[2].meta.get("val")
    target = node.args[0].meta.get("val")
    if _element(index) != "int" or len(index.shape) != 1 or not _is_tensor(source):
        raise Unlowerable("index_put at positions")
    expected = list(target.shape)
    expected[axis] = index.shape[0]
    if len(source.shape) != len(expected) or any(
            str(a) != str(b) for a, b in zip(source.shape, expected)):
        raise Unlowerable("index_put of broadcast values")
    return Val(f"index_copy({x.text}, {axis}, {_ids(positions).text}, {values.text})",
               kind=x.kind)


@rule("pad.default", "constant_pad_nd.default")
def _pad(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    # F.pad(x, (left, right, top, bottom, ...), value=v): the last axis first, each side a
    # constant block joined on (only the constant mode; a negative pad crops: not lowered)
    x = _tensor(args[0])
    amounts = list(node.args[1])
    constant = "constant_pad_nd" in str(node.target)
    mode = "constant" if constant else _given(node, 2, "mode", "constant")
    fill = _given(node, 2 if constant else 3, "value", None)
    if mode != "constant" or not isinstance(fill, (int, float, type(None))):
        raise Unlowerable("pad mode")
    value = number(float(fill or 0))
    # a bool tensor padded stays bool (x-transformers' pad_at_dim of a key mask for memory
    # key/values, value=True): its blocks are a comparison, not numbers joined to it
    flag = " > 0" if _kind(node.meta["val"]) == "bool" else ""
    shape = [low.size(s) for s in node.args[0].meta["val"].shape]
    text = x.text
    for pair in range(len(amounts) // 2):
        axis = len(shape) - 1 - pair
        sides = [_pad_amount(low, a) for a in amounts[2 * pair:2 * pair + 2]]
        parts = [text]
        for side, amount in zip((0, 1), sides):
            if amount == "0":
                continue
            block = f"full([{', '.join([*shape[:axis], amount, *shape[axis + 1:]])}], " \
                f"{value.text}){flag}"
            parts.insert(0 if side == 0 else len(parts), block)
        if len(parts) > 1:
            text = f"concat([{', '.join(parts)}], axis={axis})"
            shape[axis] = " + ".join(p for p in (sides[0], shape[axis], sides[1]) if p != "0")
    return Val(text, kind="bool") if flag and text != x.text else Val(text)


def _pad_amount(low: Lowering, amount: Any) -> str:
    traced = _traced(amount)
    if isinstance(traced, int) and traced < 0:
        raise Unlowerable("pad that crops")
    return "0" if traced == 0 else _index(low, amount)


# --- convolutions that are products (issue 29) ------------------------------------------------


@rule("conv1d.default", "conv2d.default", "conv3d.default", "conv1d.padding", "conv2d.padding",
      "conv3d.padding", "convolution.default")
def _convolution(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    """A convolution whose kernel equals its stride (no padding, no dilation, one group) reads
    each input position once, in non-overlapping patches: PVT v2's and SegFormer's spatial
    reduction `Conv2d(C, C, sr, stride=sr)`, a ViT's patch embedding, and (kernel 1) a
    product over the channels. It is the patches (`reshape` of each spatial axis into
    `[n, k]`, the kernel's axes moved beside the channels) times the weight as a matrix
    `[O, C * k...]`, plus the bias, where the spec can count the patches (:func:`_patched`:
    they cover each axis, or a remainder torch drops is sliced off where the checker can
    prove the slice). Every other one (padded, overlapping, dilated, grouped or depthwise,
    `'same'`) is one einsum of the input, a selection of taps per spatial axis and the
    weight (:func:`_by_taps`); a transposed one stays SC602."""
    x, weight = _tensor(args[0]), _tensor(args[1])
    convolution = _name(node.target) == "convolution.default"
    stride = _given(node, 3, "stride", 1)
    padding = _given(node, 4, "padding", 0)
    dilation = _given(node, 5, "dilation", 1)
    groups = _given(node, 8 if convolution else 6, "groups", 1)
    if convolution and _given(node, 6, "transposed", False):
        return _transposed(low, node, args, kw, dilation=_given(node, 5, "dilation", 1))
    kernel = list(node.args[1].meta["val"].shape[2:])
    spatial = len(kernel)
    if not all(isinstance(k, int) for k in kernel):
        raise Unlowerable("a traced kernel size")

    def each(value: Any) -> list[Any]:
        return list(value) * (spatial if len(value) == 1 else 1) \
            if isinstance(value, (list, tuple)) else [value] * spatial

    bias = args[2] if len(args) > 2 else kw.get("bias", Val("None", kind="none"))
    before = list(node.args[0].meta["val"].shape)
    after = list(node.meta["val"].shape)
    lead = len(before) - spatial - 1  # a batch axis, or none (an unbatched input)
    if lead not in (0, 1):
        raise Unlowerable("input rank")
    if groups != 1 or each(stride) != kernel or each(dilation) != [1] * spatial or \
            (padding != "valid" and each(padding) != [0] * spatial):
        pads = _left_pads(kernel, padding, each(dilation), each)
        return _by_taps(low, node, x, weight, bias, groups, _windows(
            low, before[-spatial:], after[-spatial:], kernel, each(stride), pads, each(dilation)))
    inputs = [low.size(s) for s in before]
    outputs = [low.size(s) for s in after[lead + 1:]]
    kernels = [low.size(k) for k in kernel]
    cut = [_patched(low, size, out, k)
           for size, out, k in zip(inputs[lead + 1:], outputs, kernels)]
    if any(c is None for c in cut):  # read by its taps, as an overlapping one is
        return _by_taps(low, node, x, weight, bias, groups, _windows(
            low, before[-spatial:], after[-spatial:], kernel, kernel, [0] * spatial,
            [1] * spatial))
    if any(cut):  # the rows and columns past the last whole patch, which torch drops
        for size, k, c in zip(inputs[lead + 1:], kernels, cut):
            # the module runs only where the axis holds a patch (torch's floor is 2)
            text = f"constraint {size} >= {k}"
            if c and size in low.dims.symbolic.values() and text not in low.out.constraints:
                low.out.constraints.append(text)
        entries = [":"] * (lead + 1) + [f":{c}" if c else ":" for c in cut]
        x = Val(f"{x.at(POSTFIX)}[{', '.join(entries)}]", POSTFIX)
        inputs[lead + 1:] = [c or size for size, c in zip(inputs[lead + 1:], cut)]
    width = " * ".join([inputs[lead], *(k for k in kernels if k != "1")])
    matrix = f"reshape({weight.text}, [{low.size(after[lead])}, {width}]).T"
    batch = list(range(lead))
    if all(k == 1 for k in kernel):  # a product over the channels: channels last and back
        patches = _moved(x, [*batch, *range(lead + 1, lead + 1 + spatial), lead])
    else:
        split = [*inputs[:lead + 1], *(part for pair in zip(outputs, kernels) for part in pair)]
        order = [*batch, *(lead + 1 + 2 * i for i in range(spatial)), lead,
                 *(lead + 2 + 2 * i for i in range(spatial))]
        moved = _moved(Val(f"reshape({x.text}, [{', '.join(split)}])"), order)
        patches = Val(f"reshape({moved.text}, [{', '.join([*inputs[:lead], *outputs, width])}])")
    product = Val(f"{patches.at(PRODUCT)} @ {matrix}", PRODUCT)
    if bias.kind != "none":
        product = Val(f"{product.text} + {_tensor(bias).at(SUM + 1)}", SUM)
    return _moved(product, [*batch, lead + spatial, *range(lead, lead + spatial)])


def _moved(x: Val, order: list[int]) -> Val:
    """``x`` with its axes in ``order`` (the last two swapped is `.T`)."""
    rank = len(order)
    if order == list(range(rank)):
        return x
    if order == [*range(rank - 2), rank - 1, rank - 2]:
        return Val(f"{x.at(POSTFIX)}.T", POSTFIX)
    return Val(f"transpose({x.text}, {order})")


def _patched(low: Lowering, size: str, out: str, kernel: str) -> str | None:
    """How the spec cuts an input axis of ``size`` into ``out`` patches of ``kernel``: ""
    where they cover it (``size`` is ``out * kernel`` whatever the free dims are), the end
    of the slice that keeps them where torch drops a remainder (``out`` is ``size //
    kernel`` and the checker can prove the slice in range: a kernel the spec fixes, of an
    axis that is a dim of its own or fixed too), else None."""
    if _same(low, size, f"{_factor(out)} * {_factor(kernel)}"):
        return ""
    if _fixed(low, kernel) and (size in low.dims.symbolic.values() or _fixed(low, size)) \
            and _same(low, out, f"{_factor(size)} // {_factor(kernel)}"):
        return f"{_factor(out)} * {_factor(kernel)}"
    return None


def _same(low: Lowering, a: str, b: str) -> bool:
    """Two sizes the checker reads as one: equal at both bindings of :func:`_values`."""
    found = _values(low, a)
    return found != (None,) and found == _values(low, b)


def _fixed(low: Lowering, size: str) -> bool:
    """A size the spec fixes: a number, or dims declared at their sizes."""
    found = _values(low, size)
    return found != (None,) and len(set(found)) == 1


def _factor(size: str) -> str:
    """A size as a factor of a product (parenthesised unless a name or a number)."""
    return size if re.fullmatch(r"\w+", size) else f"({size})"


#: Unrelated sizes for the free dims when two written sizes are compared (:func:`_values`).
_PRIMES = [n for n in range(1009, 4000) if all(n % d for d in range(2, int(n ** 0.5) + 1))]


def _values(low: Lowering, size: str) -> tuple[int | None, ...]:
    """A size as the spec writes it at two bindings of its free dims to unrelated primes
    (the symbolic axes, and the atomic dims unless they are declared at their sizes): two
    sizes equal at both are one size for the checker too; a size that does not change is
    fixed. None where the text holds anything else."""
    free = [*dict.fromkeys(low.dims.symbolic.values())]
    if not low.dims.fixed:
        free = [*low.dims.atomic, *free]
    found: list[int | None] = []
    for start in (0, len(free)):
        bindings = {**low.dims.atomic, **dict(zip(free, _PRIMES[start:]))}
        bindings.update({name: low.dims.value_at(name, bindings) for name in low.dims.derived})
        found.append(_tables.size_at(size, bindings))
    return tuple(found) if None not in found else (None,)



# --- convolutions and poolings by their taps (issue 29) ---------------------------------------


@dataclass(frozen=True)
class _Window:
    """One spatial axis of a convolution, a pooling or an unfold: output ``o`` reads the
    inputs ``o * stride - pad + j * dilation`` of the taps ``j < kernel``; those outside
    ``[0, size)`` are the zero padding, and read nothing."""

    size: str      # the input axis, as the spec writes it
    out: str       # the output axis (its traced size)
    kernel: str    # the number of taps, as the weight's shape writes it (else the number)
    taps: int      # the number of taps
    stride: int
    pad: int
    dilation: int

    @property
    def identity(self) -> bool:
        """Each output reads its own input (a kernel of 1): no selection is needed."""
        return self.taps == 1 and self.stride == 1 and self.pad == 0 and self.size == self.out


#: The einsum letters of 1, 2 and 3 spatial axes: the input's, the output's, the taps'.
_LETTERS = {1: ("h", "y", "j"), 2: ("hw", "yx", "jk"), 3: ("dhw", "zyx", "ijk")}


def _windows(low: Lowering, sizes: list[Any], outs: list[Any], kernel: list[Any],
             stride: list[Any], pads: list[Any], dilation: list[Any],
             weighted: bool = True) -> list[_Window]:
    """The windows of each spatial axis, from the traced sizes and the operator's numbers;
    the kernel written as the weight's shape writes it (``weighted``), else as a number (a
    pooling's, an unfold's: no size of the module)."""
    numbers = [*kernel, *stride, *pads, *dilation]
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers) or \
            any(n < 0 for n in pads) or any(n < 1 for n in [*kernel, *stride, *dilation]):
        raise Unlowerable("a window of traced or negative numbers")
    return [_Window(low.size(n), low.size(o), low.size(k) if weighted else str(k), k, s, p, d)
            for n, o, k, s, p, d in zip(sizes, outs, kernel, stride, pads, dilation)]


def _left_pads(kernel: list[Any], padding: Any, dilation: list[Any],
               each: Callable[[Any], list[Any]]) -> list[Any]:
    """The zeros before each spatial axis: `'valid'` none, `'same'` as torch splits them
    (half the dilated kernel's reach before, the rest after), else the numbers given."""
    if padding == "valid":
        return [0] * len(kernel)
    if padding == "same":
        return [d * (k - 1) // 2 for k, d in zip(kernel, dilation)]
    if isinstance(padding, str):
        raise Unlowerable(f"padding {padding!r}")
    return each(padding)


def _taps(low: Lowering, node: Any, window: _Window) -> str:
    """The name of a window's selection `int[out, kernel, size]`, one where input ``i`` is
    tap ``j`` of output ``o`` (``i == o * stride - pad + j * dilation``), zero elsewhere:
    written from `arange` with the tent `maximum(1 - abs(a - b), 0)` (1 where two
    integers are equal, else 0), as `_linear_resize` weighs its inputs. A tap in the zero
    padding equals no input and selects nothing. One statement for each window, at the
    line of the first operator that reads it."""
    key = (window.size, window.out, window.kernel, window.stride, window.pad, window.dilation)
    if key in low.taps:
        return low.taps[key]
    first = f"arange({window.out})[:, None, None]" + \
        (f" * {window.stride}" if window.stride != 1 else "") + \
        (f" - {window.pad}" if window.pad else "")
    tap = f"arange({window.kernel})[None, :, None]" + \
        (f" * {window.dilation}" if window.dilation != 1 else "")
    text = f"maximum(1 - abs(arange({window.size})[None, None, :] - ({first} + {tap})), 0)"
    name = low._fresh("taps")
    low.out.statements.append(Statement(f"{name} = {text}", low.location(node), name))
    low.taps[key] = name
    return name


def _selected(low: Lowering, node: Any, windows: list[_Window], transposed: bool = False) \
        -> tuple[str, str, str, list[str], list[str]]:
    """Each spatial axis's letters as an einsum reads them: the input's, the output's (the
    input's own where the window is the identity), the taps', and the selections' terms
    (`yjh`; `hjy` for a transposed conv, whose windows run from the output to the input)
    and names."""
    inputs, outputs, taps = _LETTERS[len(windows)]
    outs, terms, names = "", [], []
    for window, i, o, t in zip(windows, inputs, outputs, taps):
        if window.identity:
            outs += i
            continue
        outs += o
        terms.append(f"{i}{t}{o}" if transposed else f"{o}{t}{i}")
        names.append(_taps(low, node, window))
    return inputs, outs, taps, terms, names


def _by_taps(low: Lowering, node: Any, x: Val, weight: Val, bias: Val, groups: Any,
             windows: list[_Window], transposed: bool = False) -> Val:
    """A convolution as one einsum of its input, each spatial axis's selection of taps and
    the weight: `einsum("...chw,yjh,xkw,ocjk->...oyx", x, taps, taps_1, w)`; depthwise
    (`groups` = channels, one filter each) `w[:, 0]` over `c` kept; other groups with the
    channels split `[groups, C / groups]`, and the result's groups and filters merged. A
    transposed one (its weight `[C, O / groups, k...]`) reads each selection the other way
    round: input ``i``'s tap ``j`` adds to output ``o`` where ``o == i * s - p + j * d``."""
    if not isinstance(groups, int) or groups < 1:
        raise Unlowerable("traced groups")
    before = list(node.args[0].meta["val"].shape)
    after = list(node.meta["val"].shape)
    filters = list(node.args[1].meta["val"].shape)
    spatial = len(windows)
    lead = before[:len(before) - spatial - 1]
    channels, out_channels = before[len(lead)], after[len(lead)]
    inputs, outs, taps, terms, names = _selected(low, node, windows, transposed)
    w = weight
    # a filter per channel: the weight's second axis is 1, as many groups as channels
    depthwise = filters[1] == 1 and (channels if transposed else out_channels) == groups
    if groups == 1:
        x_term, w_term, result = "c", "co" if transposed else "oc", "o"
    elif depthwise:
        x_term, w_term, result = "c", "c", "c"
        w = Val(f"{weight.at(POSTFIX)}[:, 0]", POSTFIX)
    else:
        x_term, w_term, result = "gc", "gco" if transposed else "goc", "go"
        shape = [*(low.size(s) for s in lead), low.size(groups),
                 low.size(channels // groups), *(low.size(s) for s in before[-spatial:])]
        x = Val(f"reshape({x.text}, [{', '.join(shape)}])")
        split = [low.size(groups), low.size(filters[0] // groups),
                 *(low.size(f) for f in filters[1:])]
        w = Val(f"reshape({weight.text}, [{', '.join(split)}])")
    subscripts = f"...{x_term}{inputs},{','.join(terms) + ',' if terms else ''}" \
        f"{w_term}{taps}->...{result}{outs}"
    operands = ", ".join([x.text, *names, w.text])
    value = Val(f'einsum("{subscripts}", {operands})')
    if result == "go":
        value = Val(f"reshape({value.text}, [{', '.join(low.size(s) for s in after)}])")
    if bias.kind != "none":
        value = Val(f"{value.text} + {_tensor(bias).at(POSTFIX)}[:{', None' * spatial}]", SUM)
    return value


@rule("conv_transpose1d.default", "conv_transpose2d.input", "conv_transpose3d.input")
def _transposed_convolution(low: Lowering, node: Any, args: list[Val],
                            kw: dict[str, Val]) -> Val:
    """`nn.ConvTranspose{1,2,3}d`: its windows run from the output to the input, so each is
    the selection of a convolution from the output's size to the input's (`output_padding`
    only lengthens the output, which is traced), read the other way round (:func:`_by_taps`)."""
    return _transposed(low, node, args, kw, dilation=_given(node, 7, "dilation", 1))


def _transposed(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val],
                dilation: Any) -> Val:
    """A transposed convolution, `conv_transpose*d` or `convolution(..., transposed=True)`
    (whose groups are its 9th argument, not its 7th)."""
    kernel = list(node.args[1].meta["val"].shape[2:])
    spatial = len(kernel)
    convolution = _name(node.target) == "convolution.default"
    stride, padding = _spatial(_given(node, 3, "stride", 1), spatial), \
        _spatial(_given(node, 4, "padding", 0), spatial)
    groups = _given(node, 8 if convolution else 6, "groups", 1)
    before, after = node.args[0].meta["val"].shape, node.meta["val"].shape
    if len(before) - spatial - 1 not in (0, 1):
        raise Unlowerable("input rank")
    bias = args[2] if len(args) > 2 else kw.get("bias", Val("None", kind="none"))
    windows = _windows(low, list(after[-spatial:]), list(before[-spatial:]), kernel, stride,
                       padding, _spatial(dilation, spatial))
    return _by_taps(low, node, _tensor(args[0]), _tensor(args[1]), bias, groups, windows,
                    transposed=True)


@rule("avg_pool1d.default", "avg_pool2d.default", "avg_pool3d.default")
def _average_pool(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    """`nn.AvgPool{1,2,3}d` (`F.avg_pool*`): the taps' sum (an einsum of the selections,
    :func:`_taps`) over their number: the kernel's, its part inside the padded axis where
    `ceil_mode` lets the last window past it (`count_include_pad`), the real inputs' (an
    einsum of the selections alone) where the padding is not counted, or the divisor the
    code gives."""
    x = _tensor(args[0])
    spatial = int(_name(node.target)[len("avg_pool")])
    kernel = _spatial(_given(node, 1, "kernel_size", None), spatial)
    stride = _spatial(_given(node, 2, "stride", None) or kernel, spatial)
    pads = _spatial(_given(node, 3, "padding", 0), spatial)
    ceil, include = _given(node, 4, "ceil_mode", False), _given(node, 5, "count_include_pad", True)
    override = _given(node, 6, "divisor_override", None) if spatial > 1 else None
    before, after = node.args[0].meta["val"].shape, node.meta["val"].shape
    windows = _windows(low, list(before[-spatial:]), list(after[-spatial:]), kernel, stride,
                       pads, [1] * spatial, weighted=False)
    inputs, outs, _, terms, names = _selected(low, node, windows)
    if not terms:  # every window the identity: each output its own input
        return Val(f"{x.at(PRODUCT)} / {override}", PRODUCT) if override else x
    total = f'einsum("...{inputs},{",".join(terms)}->...{outs}", {", ".join([x.text, *names])})'
    if override:
        divisor = str(override)
    elif include and not ceil or not any(w.pad for w in windows) and not ceil:
        divisor = str(math.prod(kernel))
    elif include:  # the last window may pass the padding: only its part inside is counted
        parts = [f"minimum({w.size} + {2 * w.pad} - arange({w.out}) * {w.stride}, {w.taps})"
                 if not w.identity else "1" for w in windows]
        divisor = "(" + " * ".join(_broadcast(part, axis, spatial)
                                   for axis, part in enumerate(parts) if part != "1") + ")"
    else:
        counted = "".join(o for o, i in zip(outs, inputs) if o != i)
        divisor = f'einsum("{",".join(terms)}->{counted}", {", ".join(names)})' + \
            _kept_axes([w.identity for w in windows])
    return Val(f"{total} / {divisor}", PRODUCT)


def _kept_axes(identity: list[bool]) -> str:
    """The index that broadcasts a count over the windowed axes against every spatial axis
    (`[:, None]` where the second axis's window is the identity), else nothing."""
    if not any(identity):
        return ""
    return "[" + ", ".join("None" if same else ":" for same in identity) + "]"


def _spatial(value: Any, spatial: int) -> list[Any]:
    """A number or a list of numbers (one, or one per spatial axis) as one per axis."""
    if isinstance(value, (list, tuple)):
        return list(value) * (spatial if len(value) == 1 else 1)
    return [value] * spatial


def _broadcast(vector: str, axis: int, spatial: int) -> str:
    """A vector along spatial axis ``axis`` of ``spatial``, indexed to broadcast."""
    if spatial == 1:
        return vector
    index = ", ".join(":" if a == axis else "None" for a in range(spatial))
    return f"{vector}[{index}]"


@rule("max_pool1d.default", "max_pool2d.default", "max_pool3d.default")
def _max_pool(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    """`nn.MaxPool{1,2,3}d` (MViT's pooled keys and values): each window's inputs gathered by
    an index from `arange` (`take` of ``o * stride - pad + j * dilation``, held in the axis),
    the padding's taps set to `-inf` (torch's implicit padding) where any window reaches
    it, and the maximum over the taps."""
    x = _tensor(args[0])
    spatial = int(_name(node.target)[len("max_pool")])
    kernel = _spatial(_given(node, 1, "kernel_size", None), spatial)
    stride = _spatial(_given(node, 2, "stride", None) or kernel, spatial)
    pads = _spatial(_given(node, 3, "padding", 0), spatial)
    dilation = _spatial(_given(node, 4, "dilation", 1), spatial)
    before, after = node.args[0].meta["val"].shape, node.meta["val"].shape
    windows = _windows(low, list(before[-spatial:]), list(after[-spatial:]), kernel, stride,
                       pads, dilation, weighted=False)
    lead = len(before) - spatial
    past = bool(_given(node, 5, "ceil_mode", False))  # the last window may pass the axis
    kept = [a for a in range(spatial) if not windows[a].identity]
    if not kept:
        return x
    gathered, valid = x.text, []
    for axis in reversed(kept):  # the last first: the earlier axes keep their place
        w = windows[axis]
        index = f"arange({w.out})[:, None]" + (f" * {w.stride}" if w.stride != 1 else "") + \
            (f" - {w.pad}" if w.pad else "") + f" + arange({w.kernel})[None, :]" + \
            (f" * {w.dilation}" if w.dilation != 1 else "")
        name = low._fresh("window")
        low.out.statements.append(Statement(f"{name} = {index}", low.location(node), name))
        if w.pad or past:
            gathered = f"take({gathered}, clamp({name}, min=0, max={w.size} - 1), " \
                f"axis={lead + axis})"
            valid.insert(0, (axis, f"({name} >= 0) & ({name} < {w.size})"))
        else:
            gathered = f"take({gathered}, {name}, axis={lead + axis})"
    # each kept axis is now two, [out, taps]: where each spatial axis sits after the gathers
    place = {a: sum(1 if windows[b].identity else 2 for b in range(a)) for a in range(spatial)}
    width = place[spatial - 1] + (1 if windows[-1].identity else 2)
    if valid:
        masks = []
        for axis, text in valid:
            index = ", ".join(":" if i in (place[axis], place[axis] + 1) else "None"
                              for i in range(width))
            masks.append(f"({text})[{index}]" if width > 2 else f"({text})")
        gathered = f"where({' & '.join(masks)}, {gathered}, -inf)"
    taps = ", ".join(str(lead + place[a] + 1) for a in kept)
    return Val(f"amax({gathered}, axis={taps if len(kept) == 1 else f'({taps})'})")


@rule("adaptive_avg_pool1d.default", "adaptive_avg_pool2d.default", "_adaptive_avg_pool2d.default")
def _adaptive_pool(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    """`nn.AdaptiveAvgPool{1,2}d(out)` (PVT v2's linear reduction, `AdaptiveAvgPool2d(7)`):
    output ``o`` of an axis of ``n`` averages the inputs ``[floor(o * n / out),
    ceil((o + 1) * n / out))`` (torch's bins, which may overlap): a `[out, n]` matrix of
    ones in each bin, from `arange`, summed with the inputs and divided by its own sums; a
    global pooling (`out` 1) is the mean."""
    x = _tensor(args[0])
    spatial = 1 if "1d" in _name(node.target) else 2
    before, after = node.args[0].meta["val"].shape, node.meta["val"].shape
    sizes = [low.size(s) for s in before[-spatial:]]
    outs = [low.size(s) for s in after[-spatial:]]
    if all(o == "1" for o in outs):
        axes = ", ".join(str(a) for a in range(-spatial, 0))
        return Val(f"mean({x.text}, axis={axes if spatial == 1 else f'({axes})'}, keepdims=true)")
    inputs, outputs, _ = _LETTERS[spatial]
    terms, names, letters = [], [], ""
    for size, out, i, o in zip(sizes, outs, inputs, outputs):
        if size == out:
            letters += i
            continue
        letters += o
        terms.append(f"{o}{i}")
        names.append(_bins(low, node, size, out))
    if not terms:
        return x
    total = f'einsum("...{inputs},{",".join(terms)}->...{letters}", {", ".join([x.text, *names])})'
    counted = "".join(t[0] for t in terms)
    kept = _kept_axes([size == out for size, out in zip(sizes, outs)])
    return Val(f'{total} / einsum("{",".join(terms)}->{counted}", {", ".join(names)}){kept}',
               PRODUCT)


@rule("adaptive_max_pool1d.default", "adaptive_max_pool2d.default")
def _adaptive_max_pool(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    """`nn.AdaptiveMaxPool{1,2}d(out)`: output ``o`` of an axis is the maximum of torch's
    bin ``o`` (:func:`_bins`): the input given a new axis per output axis, `-inf` outside
    each bin, and the maximum over the input's axes; a global pooling (`out` 1) is the
    maximum. Its indices (`return_indices`) stay unlowered."""
    x = _tensor(args[0])
    spatial = 1 if "1d" in _name(node.target) else 2
    before, after = node.args[0].meta["val"].shape, node.meta["val"][0].shape
    lead = len(before) - spatial
    sizes = [low.size(s) for s in before[-spatial:]]
    outs = [low.size(s) for s in after[-spatial:]]
    unknown = Val("?", kind="unknown")
    if all(o == "1" for o in outs):
        axes = ", ".join(str(lead + a) for a in range(spatial))
        text = f"max({x.text}, axis={axes if spatial == 1 else f'({axes})'}, keepdims=true)"
        return Val("parts", kind="multi", items=[Val(text), unknown])
    # x as [..., 1, H, 1, W]: a new axis for each output axis, before its input axis
    spread = ", ".join([":"] * lead + ["None", ":"] * spatial)
    masks = []
    for axis, (size, out) in enumerate(zip(sizes, outs)):
        index = ", ".join(":, :" if a == axis else "None, None" for a in range(spatial))
        bins = _bins(low, node, size, out)
        masks.append(f"({bins} > 0)" if spatial == 1 else f"({bins} > 0)[{index}]")
    inputs = ", ".join(str(lead + 2 * a + 1) for a in range(spatial))
    text = f"amax(where({' & '.join(masks)}, {x.at(POSTFIX)}[{spread}], -inf), " \
        f"axis={inputs if spatial == 1 else f'({inputs})'})"
    return Val("parts", kind="multi", items=[Val(text), unknown])


def _bins(low: Lowering, node: Any, size: str, out: str) -> str:
    """The name of an adaptive pooling's `int[out, size]`: 1 where input ``i`` is in bin
    ``o``, from ``o * size // out`` to ``((o + 1) * size + out - 1) // out`` (torch's floor
    and ceiling), else 0."""
    key = ("bins", size, out)
    if key in low.taps:
        return low.taps[key]
    i, o = f"arange({size})[None, :]", f"arange({out})[:, None]"
    text = f"where(({i} >= {o} * {_factor(size)} // {_factor(out)}) & " \
        f"({i} < (({o} + 1) * {_factor(size)} + {out} - 1) // {_factor(out)}), 1, 0)"
    name = low._fresh("bins")
    low.out.statements.append(Statement(f"{name} = {text}", low.location(node), name))
    low.taps[key] = name
    return name


@rule("im2col.default")
def _unfold(low: Lowering, node: Any, args: list[Val], kw: dict[str, Val]) -> Val:
    """`nn.Unfold` (`F.unfold`; ConvBERT's span-based dynamic convolution, HaloNet): each
    window's taps, channel-major, as a column, `[..., C * kh * kw, L]`: the input's taps
    (an einsum with the selections, :func:`_taps`), the channels and taps merged, and the
    windows."""
    x = _tensor(args[0])
    kernel, dilation, pads, stride = (_spatial(_given(node, i, word, None), 2) for i, word in
                                      ((1, "kernel_size"), (2, "dilation"), (3, "padding"),
                                       (4, "stride")))
    before, after = node.args[0].meta["val"].shape, node.meta["val"].shape
    sizes = list(before[-2:])
    # torch's count of windows on each axis (the result holds only their product)
    # torch's count of windows, `1 + (n + 2p - d(k - 1) - 1) // s`, written as one floor as
    # torch simplifies it (`(S + 1)//2`), so that the checker proves their product the result's
    outs = [(n + 2 * p - d * (k - 1) - 1 + s) // s
            for n, k, d, p, s in zip(sizes, kernel, dilation, pads, stride)]
    windows = _windows(low, sizes, outs, kernel, stride, pads, dilation, weighted=False)
    inputs, outs_letters, taps, terms, names = _selected(low, node, windows)
    kept = "".join(t for w, t in zip(windows, taps) if not w.identity)
    columns = f'einsum("...c{inputs},{",".join(terms)}->...c{kept}{outs_letters}", ' \
        f'{", ".join([x.text, *names])})' if terms else x.text
    return Val(f"reshape({columns}, [{', '.join(low.size(s) for s in after)}])")


# FlexAttention: the stand-in operator `pytorch/front/flex.py` leaves in the graph
from . import flex as _flex  # noqa: E402

RULES["flex_attention.default"] = _flex.lower
# Hugging Face's eager and SDPA mask tables, as their functions (`pytorch/front/tables.py`)
from . import tables as _tables  # noqa: E402

RULES["mask_table.default"] = _tables.lower
