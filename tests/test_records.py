"""`shapecheck.records.dataclass` behaves as `dataclasses.dataclass` (issue 36).

Each kind of record shapecheck declares is declared twice, once with each decorator, and
every behaviour code relies on is compared: construction (defaults, factories, init=False,
__post_init__), equality, hashing, repr, frozen-ness, slots, `fields`/`replace`/`is_dataclass`,
`__match_args__`, copy and pickle, and the generated docstring.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import typing
from dataclasses import field
from typing import Any

import pytest

from shapecheck import records


def _kinds(decorate: Any) -> dict[str, type]:
    @decorate(slots=True)
    class Node:
        name: str
        depth: int = 1

    @decorate(slots=True)
    class Sub(Node):
        extra: tuple[int, ...] = ()

    @decorate(frozen=True)
    class Frozen:
        """A frozen record."""

        code: str
        items: list[int] = field(default_factory=list)
        note: Any = field(default=None, repr=False, compare=False)

    @decorate(frozen=True, slots=True)
    class FrozenSlots:
        a: int
        b: float

    @decorate
    class Mutable:
        values: dict[str, int] = field(default_factory=dict)
        derived: int = field(init=False)
        seen: list[str] = field(default_factory=list, repr=False)

        def __post_init__(self) -> None:
            self.derived = len(self.values)

    @decorate(frozen=True)
    class Empty:
        pass

    @decorate(frozen=True)
    class Own:
        x: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Own)

        __hash__ = None  # type: ignore[assignment]

    return {kind.__name__: kind for kind in (Node, Sub, Frozen, FrozenSlots, Mutable, Empty, Own)}


def _record_kinds() -> dict[str, type]:
    """The same records as ``_kinds``, declared with the ``Record`` base instead."""
    Record = records.Record

    class Node(Record, slots=True):
        name: str
        depth: int = 1

    class Sub(Node, slots=True):
        extra: tuple[int, ...] = ()

    class Frozen(Record, frozen=True):
        """A frozen record."""

        code: str
        items: list[int] = field(default_factory=list)
        note: Any = field(default=None, repr=False, compare=False)

    class FrozenSlots(Record, frozen=True, slots=True):
        a: int
        b: float

    class Mutable(Record):
        values: dict[str, int] = field(default_factory=dict)
        derived: int = field(init=False)
        seen: list[str] = field(default_factory=list, repr=False)

        def __post_init__(self) -> None:
            self.derived = len(self.values)

    class Empty(Record, frozen=True):
        pass

    class Own(Record, frozen=True):
        x: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Own)

        __hash__ = None  # type: ignore[assignment]

    return {kind.__name__: kind for kind in (Node, Sub, Frozen, FrozenSlots, Mutable, Empty, Own)}


STDLIB, DECORATED, BASED = _kinds(dataclasses.dataclass), _kinds(records.dataclass), _record_kinds()
OURS = DECORATED
FORMS = pytest.mark.parametrize("ours_form", ["decorator", "base"])


def _ours(form: str) -> dict[str, type]:
    return DECORATED if form == "decorator" else BASED

SAMPLES: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "Node": (("n",), {}), "Sub": (("n", 2), {"extra": (1,)}),
    "Frozen": (("SC1",), {"items": [1, 2], "note": "x"}), "FrozenSlots": ((1, float("nan")), {}),
    "Mutable": ((), {"values": {"a": 1}}), "Empty": ((), {}), "Own": ((3,), {}),
}


def _make(kinds: dict[str, type], name: str) -> Any:
    args, kwargs = SAMPLES[name]
    return kinds[name](*copy.deepcopy(args), **copy.deepcopy(kwargs))


def _outcome(call: Any) -> Any:
    try:
        return ("value", call())
    except Exception as error:  # the same kind of failure is part of the behaviour
        return ("raises", type(error).__name__)


@FORMS
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_record_behaves_as_the_stdlib_dataclass(name: str, ours_form: str) -> None:
    OURS = _ours(ours_form)
    theirs, ours = _make(STDLIB, name), _make(OURS, name)
    assert repr(ours) == repr(theirs).replace(STDLIB[name].__qualname__, OURS[name].__qualname__)
    assert (ours == _make(OURS, name)) == (theirs == _make(STDLIB, name))
    assert (ours == copy.copy(ours)) == (theirs == copy.copy(theirs))
    assert (ours == object()) == (theirs == object())
    assert _outcome(lambda: hash(ours) == hash(_make(OURS, name))) == \
        _outcome(lambda: hash(theirs) == hash(_make(STDLIB, name)))
    assert type(OURS[name].__hash__) is type(STDLIB[name].__hash__)
    assert [f.name for f in dataclasses.fields(ours)] == \
        [f.name for f in dataclasses.fields(theirs)]
    assert dataclasses.is_dataclass(ours)
    assert OURS[name].__match_args__ == STDLIB[name].__match_args__
    assert hasattr(OURS[name], "__slots__") == hasattr(STDLIB[name], "__slots__")
    assert OURS[name].__doc__ == STDLIB[name].__doc__
    first = dataclasses.fields(theirs)[0].name if dataclasses.fields(theirs) else "anything"
    assert _outcome(lambda: setattr(ours, first, 0)) == _outcome(lambda: setattr(theirs, first, 0))
    # Refused alike (3.11's frozen slotted class raises TypeError from a stale `super`; ours
    # raises FrozenInstanceError, as every other frozen class does).
    assert _outcome(lambda: setattr(ours, "other", 0))[0] == \
        _outcome(lambda: setattr(theirs, "other", 0))[0]
    assert _outcome(lambda: delattr(_make(OURS, name), first)) == \
        _outcome(lambda: delattr(_make(STDLIB, name), first))


@FORMS
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_replace_and_copy_keep_the_fields(name: str, ours_form: str) -> None:
    ours = _make(_ours(ours_form), name)
    assert repr(dataclasses.replace(ours)) == repr(ours)
    assert repr(copy.deepcopy(ours)) == repr(ours)


@FORMS
def test_defaults_factories_and_post_init(ours_form: str) -> None:
    OURS = _ours(ours_form)
    first, second = OURS["Mutable"](), OURS["Mutable"]()
    assert first.values is not second.values and first.derived == 0
    assert OURS["Mutable"]({"a": 1, "b": 2}).derived == 2
    with pytest.raises(TypeError):
        OURS["Node"]()  # a required field stays required
    with pytest.raises(TypeError):
        OURS["Mutable"](derived=3)  # init=False is not a parameter


def test_a_frozen_slotted_record_pickles() -> None:
    value = Point(1, 2)
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.copy(value) == value and hash(copy.deepcopy(value)) == hash(value)


@records.dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int


def test_class_variables_are_not_fields_and_pseudo_fields_are_refused() -> None:
    from typing import ClassVar

    @records.dataclass
    class Counted:
        name: str
        seen: ClassVar[int] = 0
        shared: ClassVar[list[int]] = []  # noqa: RUF012  (a class variable may be mutable)

    assert [f.name for f in dataclasses.fields(Counted)] == ["name"]
    assert Counted("a").name == "a" and Counted.seen == 0 and Counted.__match_args__ == ("name",)
    with pytest.raises(TypeError):
        @records.dataclass
        class WithInitVar:
            value: dataclasses.InitVar[int]
    with pytest.raises(TypeError):
        @records.dataclass
        class Unannotated:
            value = field(default=1)
    with pytest.raises(ValueError):  # as the stdlib: a shared mutable default
        @records.dataclass
        class Shared:
            items: list[int] = []  # noqa: RUF012


# --- the __init__ methods compiled ahead (shapecheck/record_inits.py) -------------------------


class _Target:
    """What a shipped ``__init__`` and a compiled one are both run on."""

    def __post_init__(self) -> None:
        self.posted = True


def _namespace_for(source: str, names: tuple[str, ...]) -> dict[str, Any]:
    """Sentinel defaults and factories for every name the source reads."""
    namespace: dict[str, Any] = {"_FACTORY": records._FACTORY, "_object": object}
    for name in names[2:]:
        namespace[name] = (lambda tag=name: [tag]) if name.startswith("_factory_") else name
    return namespace


def _shipped(table: str) -> dict[str, Any]:
    """Every factory shipped: record_inits' (what `verify` uses) and record_inits_rest's."""
    from shapecheck import record_inits, record_inits_rest

    hot, rest = getattr(record_inits, table), getattr(record_inits_rest, table)
    assert not set(hot) & set(rest)
    return {**hot, **rest}


@pytest.mark.parametrize("source", sorted(_shipped("INITS")))
def test_a_shipped_init_is_the_one_compiled_from_its_source(source: str) -> None:
    import inspect

    factory = _shipped("INITS")[source]
    names = tuple(inspect.signature(factory).parameters)
    assert names[:2] == ("_FACTORY", "_object")
    compiled_namespace = _namespace_for(source, names)
    exec(source, compiled_namespace)
    compiled = compiled_namespace["__init__"]
    shipped = factory(**_namespace_for(source, names))
    assert inspect.signature(shipped) == inspect.signature(compiled)
    required = [p.name for p in inspect.signature(compiled).parameters.values()
                if p.default is inspect.Parameter.empty][1:]
    made = []
    for function in (compiled, shipped):
        target = _Target()
        function(target, *(f"<{name}>" for name in required))
        made.append(vars(target))
    assert made[0] == made[1]


def test_a_record_built_from_a_shipped_init_behaves_as_one_compiled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    INITS = _shipped("INITS")

    @records.dataclass
    class Shipped:
        value: Any
        span: Any
        depth: int = 1

    source, _ = records.init_source(Shipped, dataclasses.fields(Shipped), False)
    assert source in INITS  # the same fields as nodes' literals: shipped
    shipped = Shipped(1, 2)
    assert Shipped.__init__.__module__ == __name__ and Shipped.__init__.__qualname__.endswith(
        "Shipped.__init__")

    monkeypatch.setattr(records, "_SHIPPED", [{}])

    @records.dataclass
    class Shipped:  # type: ignore[no-redef]
        value: Any
        span: Any
        depth: int = 1

    compiled = Shipped(1, 2)
    assert (shipped.value, shipped.span, shipped.depth) == (compiled.value, compiled.span,
                                                           compiled.depth)
    assert repr(shipped) == repr(compiled)
    assert Shipped.__init__.__code__.co_filename == "<string>"  # this one was compiled


def test_a_source_not_in_record_inits_is_read_from_the_rest_on_the_first_miss() -> None:
    from shapecheck import record_inits, record_inits_rest

    ahead = records._Ahead("INITS")
    hot = next(iter(record_inits.INITS))
    assert ahead.get(hot) is record_inits.INITS[hot] and ahead._rest is None
    rest = next(iter(record_inits_rest.INITS))
    assert ahead.get(rest) is record_inits_rest.INITS[rest]
    assert ahead.get("def __init__(self, nothing_shipped):\n    pass\n") is None


def test_verify_compiles_no_init_at_start_up() -> None:
    # Every record `verify` builds has its __init__ in record_inits: if this fails, a record
    # was added or changed; run `python tools/record_inits.py`.
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "multi_head.attn"
    # A named tuple's __new__ likewise (compiled with eval where not shipped).
    code = ("import builtins, sys\ncompiled = []\nreal = builtins.exec\nreal_eval = builtins.eval\n"
            "def exec(source, *args):\n"
            "    if isinstance(source, str) and source.startswith('def __init__'):\n"
            "        compiled.append(source.split(':')[0])\n"
            "    return real(source, *args)\n"
            "def eval(source, *args):\n"
            "    if isinstance(source, str) and source.startswith('lambda _cls') and \\\n"
            "            sys._getframe(1).f_code.co_filename.endswith('records.py'):\n"
            "        compiled.append(source.split(':')[0])\n"
            "    return real_eval(source, *args)\n"
            "builtins.exec = exec\nbuiltins.eval = eval\nfrom shapecheck.cli import main\ntry:\n"
            "    main(['verify', sys.argv[1]])\nexcept SystemExit:\n    pass\nprint(compiled)\n"
            "print('shapecheck.record_inits_rest' in sys.modules)")
    shown = subprocess.run([sys.executable, "-c", code, str(example)], capture_output=True,
                           text=True, check=True).stdout
    assert shown.splitlines()[-2] == "[]", "run `python tools/record_inits.py`"
    # What it builds is in record_inits: the rest, what other specs use, is never read.
    assert shown.splitlines()[-1] == "False", "run `python tools/record_inits.py`"


# --- named tuples: records.NamedTuple makes the class typing.NamedTuple makes -----------------


def _tuples(base: Any) -> type:
    class Place(base):
        """A place."""

        line: int
        column: int = 1
        label: str = ""

        @property
        def where(self) -> str:
            return f"{self.line}:{self.column}"

        def moved(self, by: int) -> Place:
            return self._replace(line=self.line + by)

        LIMIT = 10

    return Place


class TypingPlace(typing.NamedTuple):
    line: int
    column: int = 1


class RecordsPlace(records.NamedTuple):
    line: int
    column: int = 1


def test_a_named_tuple_is_typings() -> None:
    ours, theirs = _tuples(records.NamedTuple), _tuples(typing.NamedTuple)
    for name in ("_fields", "_field_defaults", "__doc__", "__qualname__", "__module__",
                 "__match_args__", "__bases__", "LIMIT"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert set(vars(ours)) == set(vars(theirs))
    assert ours.__new__.__defaults__ == theirs.__new__.__defaults__
    assert typing.get_type_hints(ours, localns={"Place": ours}) == typing.get_type_hints(
        theirs, localns={"Place": theirs})
    a, b = ours(3, label="x"), theirs(3, label="x")
    assert a == b == (3, 1, "x") and hash(a) == hash(b) and repr(a) == repr(b)
    assert a.where == b.where and a.moved(2) == b.moved(2) == (5, 1, "x")
    assert a._asdict() == b._asdict() and ours._make((1, 2, "")) == theirs._make((1, 2, ""))
    assert isinstance(a, tuple) and a[0] == 3 and list(a) == [3, 1, "x"]
    assert ours.__annotations__ == {"line": "int", "column": "int", "label": "str"}  # as written


def test_a_named_tuple_pickles_and_copies() -> None:
    place = RecordsPlace(2)
    assert pickle.loads(pickle.dumps(place)) == place == copy.deepcopy(place)
    assert pickle.loads(pickle.dumps(TypingPlace(2))) == place


def test_a_named_tuple_refuses_what_typing_refuses() -> None:
    for base in (records.NamedTuple, typing.NamedTuple):
        with pytest.raises(TypeError, match="Non-default namedtuple field b"):
            exec("class Bad(base):\n    a: int = 1\n    b: int\n", {"base": base})
        with pytest.raises(AttributeError, match="Cannot overwrite NamedTuple attribute _make"):
            exec("class Bad(base):\n    a: int\n    def _make(self): pass\n", {"base": base})


@pytest.mark.parametrize("source", sorted(_shipped("NEWS")))
def test_a_shipped_named_tuple_new_is_the_one_compiled_from_its_source(source: str) -> None:
    import inspect

    NEWS = _shipped("NEWS")
    compiled = eval(source, {"_tuple_new": tuple.__new__, "__builtins__": {}})
    shipped = NEWS[source](tuple.__new__)
    assert inspect.signature(shipped) == inspect.signature(compiled)
    count = len(inspect.signature(compiled).parameters) - 1
    values = [f"<{index}>" for index in range(count)]
    assert shipped(tuple, *values) == compiled(tuple, *values) == tuple(values)


def test_a_named_tuple_with_a_shipped_new_is_typings(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fields of one the package declares: its __new__ comes from record_inits.
    def declare(base: Any) -> type:
        class Pair(base):
            values: int
            sides: str = "both"
        return Pair

    ours, theirs = declare(records.NamedTuple), declare(typing.NamedTuple)
    assert ours.__new__.__code__.co_filename.endswith(("record_inits.py", "record_inits_rest.py"))
    monkeypatch.setattr(records, "_SHIPPED_NEWS", [{}])
    compiled = declare(records.NamedTuple)
    assert compiled.__new__.__code__.co_filename == "<string>"
    for name in ("_fields", "_field_defaults", "__doc__", "__module__", "__match_args__",
                 "__bases__", "__slots__"):
        assert getattr(ours, name) == getattr(theirs, name) == getattr(compiled, name), name
    assert set(vars(ours)) == set(vars(theirs)) == set(vars(compiled))
    for made in (ours, compiled):
        for method in ("__new__", "_replace", "__repr__", "_asdict", "__getnewargs__"):
            ours_method, typing_method = getattr(made, method), getattr(theirs, method)
            for attribute in ("__name__", "__qualname__", "__doc__", "__defaults__"):
                assert getattr(ours_method, attribute, None) == getattr(
                    typing_method, attribute, None), (method, attribute)
        assert made.__new__.__module__ == theirs.__new__.__module__
        assert made.__new__.__doc__ == theirs.__new__.__doc__
        a, b = made(1), theirs(1)
        assert a == b == (1, "both") and repr(a) == repr(b).replace("Pair", made.__name__)
        assert a._replace(sides="left") == (1, "left") and a._asdict() == b._asdict()
        assert made._make((2, "x")) == (2, "x")
        with pytest.raises(TypeError, match="Expected 2 arguments, got 1"):
            made._make((2,))
        with pytest.raises(ValueError, match="Got unexpected field names"):
            a._replace(other=1)
        assert copy.deepcopy(a) == a  # pickling: a module-level one, above


@FORMS
def test_a_record_that_holds_itself_reprs_as_the_stdlibs(ours_form: str) -> None:
    # `__repr__` guards against recursion as `reprlib.recursive_repr` does (issue 36: without
    # its wrapper), per thread and per object.
    theirs, ours = _make(STDLIB, "Mutable"), _make(_ours(ours_form), "Mutable")
    theirs.values["self"], ours.values["self"] = theirs, ours  # type: ignore[assignment]
    assert repr(ours) == repr(theirs).replace(STDLIB["Mutable"].__qualname__,
                                              _ours(ours_form)["Mutable"].__qualname__)
    assert "..." in repr(ours) and repr(ours).count("Mutable(") == 1


# --- enums made as the standard library makes its own (records.simple_enum) ----------------


def _enum_body() -> type:
    """A body with what shapecheck's enums hold: string values, a method, a property."""
    class Mode(records.EnumBody):
        """How a thing is done."""

        FAST = "fast"
        SLOW = "slow"
        NEVER = "never"

        def __bool__(self) -> bool:
            return self is not type(self).NEVER

        @property
        def shout(self) -> str:
            return self.value.upper()

    return Mode


def test_a_simple_enum_is_the_enum_its_body_declares() -> None:
    import enum

    made, declared = records.simple_enum(_enum_body()), records.declared_enum(_enum_body())
    assert isinstance(made.FAST, enum.Enum) and type(made) is type(declared)
    assert [(m.name, m.value) for m in made] == [(m.name, m.value) for m in declared]
    assert made("slow") is made.SLOW and made["NEVER"] is made.NEVER
    assert bool(made.FAST) and not made.NEVER and made.SLOW.shout == "SLOW"
    assert (repr(made.FAST), str(made.FAST), f"{made.FAST}") == \
        (repr(declared.FAST), str(declared.FAST), f"{declared.FAST}")
    assert made.__doc__ == declared.__doc__ == "How a thing is done."
    with pytest.raises(ValueError):
        made("other")
    if hasattr(enum, "_test_simple_enum"):  # 3.11+: the stdlib's own comparison
        enum._test_simple_enum(made, declared)


def _body_of(made: type) -> type:
    """The body a shapecheck enum was declared with: its members and its own functions."""
    namespace = {"__module__": made.__module__, "__qualname__": made.__qualname__}
    if made.__dict__.get("__doc__") not in (None, "An enumeration."):
        namespace["__doc__"] = made.__doc__
    namespace.update({member.name: member.value for member in made})  # type: ignore[attr-defined]
    for key, value in made.__dict__.items():
        function = value.fget if isinstance(value, property) else value
        if getattr(function, "__qualname__", "").startswith(made.__qualname__ + "."):
            namespace[key] = value
    return type(made.__name__, (), namespace)


@pytest.mark.parametrize("path", ["shapecheck.symbolic.dims:Verdict",
                                  "shapecheck.check.builtins:Kind",
                                  "shapecheck.check.builtins:AxisKind"])
def test_shapechecks_simple_enums_are_the_enums_they_declare(path: str) -> None:
    import enum
    import importlib

    module, name = path.split(":")
    made = getattr(importlib.import_module(module), name)
    declared = records.declared_enum(_body_of(made))
    assert [(m.name, m.value) for m in made] == [(m.name, m.value) for m in declared]
    assert pickle.loads(pickle.dumps(list(made))) == list(made)
    if hasattr(enum, "_test_simple_enum"):
        enum._test_simple_enum(made, declared)


def test_an_undocumented_records_docstring_is_written_when_read() -> None:
    # Issue 36: not built for every record at start-up; read from the class, an instance or
    # a subclass, it is the stdlib's (`Name(field: type, ...)`, init fields only).
    class Base(records.Record, frozen=True):
        name: str
        depth: int = 1
        hidden: int = field(default=0, init=False)

    class Sub(Base, frozen=True):
        extra: tuple[int, ...] = ()

    @dataclasses.dataclass(frozen=True)
    class StdBase:
        name: str
        depth: int = 1
        hidden: int = field(default=0, init=False)

    @dataclasses.dataclass(frozen=True)
    class StdSub(StdBase):
        extra: tuple[int, ...] = ()

    assert Base.__doc__ == StdBase.__doc__.replace("StdBase", "Base")
    assert Sub.__doc__ == StdSub.__doc__.replace("StdSub", "Sub")
    assert Sub("n").__doc__ == Sub.__doc__
