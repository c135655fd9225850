"""The checked program: what the checker hands to every backend.

Shapes are tuples of dim expressions (opaque here; see :mod:`symbolic`), or
``None`` when unknown (a failed statement). Per-node facts are kept in side
tables keyed by ``id(node)``; the program keeps its syntax tree alive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, ClassVar

from ..records import NamedTuple, Record
from ..syntax import nodes
from ..messages.diagnostics import Diagnostic, Note, Span
from ..symbolic import Dim, DimSystem, shape_text

Shape = tuple[Dim, ...]


class Value(Record, frozen=True, slots=True):
    """The type of an expression: its shape and element type."""

    shape: Shape | None
    is_bool: bool = False
    dim: Dim | None = None  # set when the value is a dim used as a scalar
    # The element type beside bool: "" a real number (float), "int" an integer (token ids,
    # positions, buckets; a dim or an integer literal used as a scalar), "complex".
    element: str = ""

    @property
    def dtype(self) -> str:
        """`bool`, `int`, `complex` or `float`: the element type in one word."""
        return "bool" if self.is_bool else self.element or "float"

    @property
    def known(self) -> bool:
        return self.shape is not None

    @property
    def rank(self) -> int:
        return len(self.shape) if self.shape is not None else -1

    def text(self) -> str:
        text = shape_text(self.shape, self.is_bool)
        return f"{self.element}{text}" if self.element and self.shape is not None else text


UNKNOWN = Value(None)
SCALAR = Value(())


class Tensor(Record, frozen=True, slots=True):
    """A named tensor: declared (input/param) or defined.

    An input the spec uses without declaring it (a sketch; :mod:`shapecheck.infer`) has
    ``inferred`` set, and both spans are its first use.
    """

    name: str
    kind: str  # "input", "param", "defined"
    value: Value
    span: Span  # the statement that declares or defines it
    name_span: Span
    inferred: bool = False


class InferredTensor(NamedTuple):
    """An undeclared tensor, with the shape inference gave it: the most general one
    that makes every statement correct. ``origins`` point at the uses that gave an
    axis its size (a number, or a product such as `H*k`)."""

    name: str
    value: Value
    span: Span  # its first use
    origins: tuple[Note, ...] = ()

    def declaration(self) -> str:
        return f"input {self.name}: {self.value.text()}"


class Inferred(NamedTuple):
    """What inference added to a spec: the dims and input tensors it uses without
    declaring them, in the order of the declarations that state them. (Named tuples,
    not dataclasses: creating a dataclass costs start-up time every `verify` pays.)"""

    dims: tuple[tuple[str, Span], ...]  # each dim and where it is first needed
    tensors: tuple[InferredTensor, ...]

    def declarations(self) -> list[str]:
        """Lines to paste at the top of the spec: `dim N, M, d, e`, `input Q: [N, d]`, ..."""
        lines = [f"dim {', '.join(name for name, _ in self.dims)}"] if self.dims else []
        return lines + [tensor.declaration() for tensor in self.tensors]

    def tensor(self, name: str) -> InferredTensor | None:
        return next((t for t in self.tensors if t.name == name), None)


class CallInfo(Record, frozen=True, slots=True):
    """A builtin call as resolved by the checker, for the backends.

    ``args`` holds the normalised arguments by parameter name: tensors are the
    argument nodes, axes are non-negative ints, shapes are tuples of dims, and
    so on, as each builtin's row says.
    """

    builtin: str
    args: dict[str, Any]


class Take(Record, frozen=True, slots=True):
    """An integer index: axis ``axis`` of the operand is dropped at ``index``
    (normalised: ``0 <= index < size``)."""

    axis: int
    index: Dim


class Range(Record, frozen=True, slots=True):
    """A slice of axis ``axis``: ``start`` and ``stop`` normalised to ``0 .. size``
    (None: the default for the step's direction), ``step`` a non-zero integer dim,
    ``length`` the size of the result's axis."""

    axis: int
    start: Dim | None
    stop: Dim | None
    step: Dim
    length: Dim


class NewAxis(Record, frozen=True, slots=True):
    """`None`: a new axis of size 1."""


class ResolvedSubscript(Record, frozen=True, slots=True):
    """A subscript `x[...]` as resolved by the checker: one entry per axis of the
    operand (`...` and missing trailing entries expanded to whole-axis ranges) and
    per new axis, in order."""

    entries: tuple[Take | Range | NewAxis, ...]

    def source_axes(self) -> tuple[int | None, ...]:
        """For each axis of the result, the operand's axis it comes from (None: new)."""
        return tuple(None if isinstance(e, NewAxis) else e.axis
                     for e in self.entries if not isinstance(e, Take))


class Program(Record):
    source: str
    statements: list[nodes.Stmt]
    dims: DimSystem
    tensors: dict[str, Tensor] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    types: dict[int, Value] = field(default_factory=dict)  # id(expr node) -> Value
    calls: dict[int, CallInfo] = field(default_factory=dict)  # id(Call node) -> CallInfo
    # id(Subscript node) -> how the checker resolved it
    subscripts: dict[int, ResolvedSubscript] = field(default_factory=dict)
    # Names used without a declaration: name -> each use, as (span, role), the role
    # "dim", "value" or "tensor" (see Checker._undefined).
    undeclared: dict[str, list[tuple[Span, str]]] = field(default_factory=dict)
    # What inference supplied (a sketch), and the mode the spec was checked in
    # (`infer=` of api.check_text: None automatic, True / False forced).
    inferred: Inferred | None = None
    infer: bool | None = None
    # Set by the API that checked it: the same parse checked again at other bindings (`at`).
    recheck: Callable[[dict[str, int]], Program] | None = field(default=None, repr=False,
                                                                compare=False)
    # What the axis-meaning pass found (a meaning.Meaning), set by api.check_parsed; the
    # pass stands above this module, so the type is not imported here.
    meaning: Any = None
    # The functions of positions and the claims about them (syntax.nodes.Functions),
    # which the mask model (shapecheck.masks) reads; None when the spec defines none.
    functions: Any = None
    masks: Any = None  # the mask model's findings (shapecheck.masks.MaskModel), when it ran
    # Checks statements again as an edit would change them (Checker._recheck_statements):
    # how shapecheck.fixcheck verifies a suggested fix before it is offered.
    recheck_statements: Callable[..., Any] | None = field(default=None, repr=False,
                                                           compare=False)

    # How a notebook shows a checked program: its verdict and attention cards as HTML. The
    # report stage draws them and stands above this one, so the Python face installs the
    # drawing (api.py) and this stage only calls it.
    html_view: ClassVar[Callable[[Program], str] | None] = None

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    def _repr_html_(self) -> str | None:
        """Jupyter's rich display (None: the plain ``repr``)."""
        return None if Program.html_view is None else Program.html_view(self)

    def at(self, bindings: Mapping[str, int]) -> Program:
        """This spec checked again at these bindings (as ``--dim``): derived dims,
        constraints and divisibility decided at those sizes, without parsing again.

        The bindings replace this program's own; the result is this program when
        they are the same. Backends bind the sizes they run at through this.
        """
        wanted = dict(bindings)
        if wanted == self.dims.bindings:
            return self
        if self.recheck is None:
            raise ValueError("this program was not made by shapecheck.api and cannot be re-checked")
        return self.recheck(wanted)

    def type_of(self, node: nodes.Expr) -> Value:
        return self.types.get(id(node), UNKNOWN)

    def shapes(self) -> dict[str, list[str]]:
        """Each tensor's shape by name; a rebound one's is its last version's
        (:mod:`shapecheck.versions`)."""
        from ..messages.diagnostics import shown
        from ..symbolic import to_text

        return {
            shown(name): [to_text(d) for d in tensor.value.shape]
            for name, tensor in self.tensors.items()
            if tensor.value.shape is not None
        }
