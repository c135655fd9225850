"""Dataclasses that are cheap to create at start-up: a drop-in for ``dataclasses.dataclass``.

Python 3.11 compiles each dataclass's generated methods one ``exec`` at a time (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, a frozen class's ``__setattr__`` and ``__delattr__``):
about half a millisecond a class, and `verify` defines some eighty records before it reads a
line — about half of its start-up above the import floor (issue 36, docs/design.md
"Performance"). Here the class is still made by ``dataclasses.dataclass`` (so ``fields``,
``replace``, ``is_dataclass``, ``__match_args__`` and slots work as before), but asked for no
methods; the methods that are not hot are shared closures, and ``__init__``, the one a parse
calls hundreds of thousands of times, is compiled on the class's first instantiation, so a
record a run never builds never costs a compile. What the methods do is what the standard
library's do: the same equality (same class, fields compared as a tuple), hash (a frozen
record's fields as a tuple; ``None`` for a mutable one), ``repr`` and frozen-ness.

One difference: until a record is first built, ``inspect.signature`` of its class sees
the stand-in ``(*args, **kwargs)``; nothing in shapecheck asks.

Only what shapecheck uses is supported: ``frozen`` and ``slots``; fields with ``default``,
``default_factory``, ``init``, ``repr``, ``compare`` and ``hash``; ``__post_init__``.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import typing
from collections import _tuplegetter  # type: ignore[attr-defined]  # namedtuple's accessor
from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from keyword import iskeyword
from operator import attrgetter
from threading import get_ident
from typing import TYPE_CHECKING, Any, TypeVar, overload

T = TypeVar("T")

_MISSING = dataclasses.MISSING
_Field = dataclasses.Field
_FIELD_TYPE = dataclasses._FIELD  # type: ignore[attr-defined]  # the kind `fields()` lists


@overload
def dataclass(cls: type[T], /) -> type[T]: ...
@overload
def dataclass(*, frozen: bool = False, slots: bool = False) -> Callable[[type[T]], type[T]]: ...


def dataclass(cls: Any = None, /, *, frozen: bool = False, slots: bool = False) -> Any:
    """``@dataclass``, ``@dataclass(frozen=True)``, ``@dataclass(slots=True)``, as the stdlib's."""
    def wrap(cls: type[T]) -> type[T]:
        return _declare(cls, frozen=frozen, slots=slots)
    return wrap if cls is None else wrap(cls)


def _declare(cls: type[T], *, frozen: bool, slots: bool) -> type[T]:
    own = dict(cls.__dict__)
    if frozen and ("__setattr__" in own or "__delattr__" in own):
        raise TypeError("Cannot overwrite attribute __setattr__ or __delattr__ "
                        f"in class {cls.__name__}")
    undocumented = not cls.__doc__
    if undocumented:  # the stdlib would call inspect.signature (slow) to write one; see below
        cls.__doc__ = cls.__name__
    cls = _as_dataclass(cls, slots)
    fields = dataclasses.fields(cls)
    if "__init__" not in own:
        cls.__init__ = _lazy_init(cls, fields, frozen)  # type: ignore[misc]
    if "__repr__" not in own:
        cls.__repr__ = _repr(tuple(f.name for f in fields if f.repr))  # type: ignore[method-assign]
    if "__eq__" not in own:
        compared = tuple(f.name for f in fields if f.compare)
        cls.__eq__ = _eq(_key(compared))  # type: ignore[method-assign]
    explicit_hash = own.get("__hash__", _MISSING)
    if explicit_hash is _MISSING or (explicit_hash is None and "__eq__" in own):
        # As the stdlib's eq=True: a frozen record hashes its fields, a mutable one is unhashable.
        hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        cls.__hash__ = (  # type: ignore[assignment,method-assign]
            _hash(_key(hashed)) if frozen else None)
    if frozen:
        _freeze(cls, frozenset(f.name for f in fields), slots)
    if undocumented:
        cls.__doc__ = cls.__name__ + "(" + ", ".join(_parameter(f) for f in fields if f.init) + ")"
    return cls


def _as_dataclass(cls: type[T], slots: bool) -> type[T]:
    """What ``dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots)`` makes
    of a class, without its cost (a regular expression per string annotation, an abstract-
    method scan): the fields (a base's first), their class attributes, ``__match_args__``,
    the slots. ``ClassVar`` annotations are not fields; ``InitVar`` and ``KW_ONLY`` are refused."""
    found: dict[str, dataclasses.Field[Any]] = {}
    for base in cls.__mro__[-1:0:-1]:
        found.update(getattr(base, "__dataclass_fields__", {}))
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        kind = _annotation_kind(annotation)
        if kind == "classvar":
            continue
        if kind != "field":
            raise TypeError(f"records.dataclass does not support {kind} ({cls.__name__}.{name})")
        found[name] = _field(cls, name, annotation)
    for name, value in cls.__dict__.items():
        if isinstance(value, dataclasses.Field) and name not in found:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    cls.__dataclass_fields__ = found  # type: ignore[attr-defined]
    cls.__dataclass_params__ = _PARAMS  # type: ignore[attr-defined]
    if "__match_args__" not in cls.__dict__:
        cls.__match_args__ = tuple(f.name for f in found.values() if f.init)  # type: ignore[attr-defined]
    return _with_slots(cls, tuple(found)) if slots else cls


# The stdlib's parameters object for init=False, repr=False, eq=False (what it was asked for).
# The class has a docstring: without one the stdlib writes one from `inspect.signature`,
# which tokenizes `object.__init__`'s text signature (~5 ms of every start).
_PARAMS = dataclasses.dataclass(init=False, repr=False, eq=False)(
    type("_Params", (), {"__doc__": "parameters"})).__dataclass_params__  # type: ignore[attr-defined]


def _annotation_kind(annotation: Any) -> str:
    """``field``, ``classvar``, or the name of a pseudo-field records do not support."""
    text = annotation if isinstance(annotation, str) else repr(annotation)
    head = text.split("[", 1)[0].strip().rsplit(".", 1)[-1]
    if head == "ClassVar" or annotation is typing.ClassVar:
        return "classvar"
    if head in ("InitVar", "KW_ONLY") or isinstance(annotation, dataclasses.InitVar) or \
            annotation is dataclasses.KW_ONLY:
        return head
    return "field"


def _field(cls: type, name: str, annotation: Any) -> dataclasses.Field[Any]:
    """The field as the stdlib's ``_get_field`` makes it (its default left on the class)."""
    value = cls.__dict__.get(name, _MISSING)
    made = value if isinstance(value, dataclasses.Field) else dataclasses.field(default=value)
    made.name, made.type = name, annotation
    made._field_type = dataclasses._FIELD  # type: ignore[attr-defined]  # what fields() lists
    if made.kw_only is _MISSING:  # type: ignore[comparison-overlap]
        made.kw_only = False
    if made.default is not _MISSING and made.default.__class__.__hash__ is None:
        raise ValueError(f"mutable default {type(made.default)} for field {name} is not "
                         "allowed: use default_factory")
    if isinstance(value, dataclasses.Field):
        if made.default is _MISSING:
            delattr(cls, name)
        else:
            setattr(cls, name, made.default)
    return made


def _with_slots(cls: type[T], names: tuple[str, ...]) -> type[T]:
    """The class made again with ``__slots__`` for its fields, as the stdlib's ``slots=True``."""
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    inherited = {slot for base in cls.__mro__[1:-1] for slot in _slots_of(base)}
    namespace = dict(cls.__dict__)
    namespace["__slots__"] = tuple(name for name in names if name not in inherited)
    for name in (*names, "__dict__", "__weakref__"):
        namespace.pop(name, None)
    remade = type(cls)(cls.__name__, cls.__bases__, namespace)
    remade.__qualname__ = cls.__qualname__
    return remade


def _slots_of(base: type) -> tuple[str, ...]:
    slots = base.__dict__.get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


def _parameter(field: dataclasses.Field[Any]) -> str:
    """One parameter as ``inspect.signature`` shows the stdlib's generated ``__init__``."""
    text = f"{field.name}: {field.type!r}" if isinstance(field.type, str) else field.name
    if field.default is not _MISSING:
        return f"{text} = {field.default!r}"
    return f"{text} = <factory>" if field.default_factory is not _MISSING else text


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields as a tuple (``attrgetter`` of one name returns the value alone)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda self: (one(self),)
    return lambda self: ()


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    running: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:  # with `reprlib.recursive_repr()`'s guard, without its wrapper
        key = id(self), get_ident()
        if key in running:
            return "..."
        running.add(key)
        try:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        finally:
            running.discard(key)
        return f"{self.__class__.__qualname__}({inner})"
    return __repr__


def _eq(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented
    return __eq__


def _hash(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(key(self))
    return __hash__


def _freeze(cls: type, names: frozenset[str], slots: bool) -> None:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    cls.__setattr__ = __setattr__  # type: ignore[method-assign,assignment]
    cls.__delattr__ = __delattr__  # type: ignore[method-assign,assignment]
    if slots:  # pickle and copy restore slots by setattr, which a frozen class refuses
        cls.__getstate__ = _getstate  # type: ignore[attr-defined]
        cls.__setstate__ = _setstate  # type: ignore[attr-defined]


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    for field, value in zip(dataclasses.fields(self), state):
        object.__setattr__(self, field.name, value)


Fields = tuple[dataclasses.Field[Any], ...]


def _lazy_init(cls: type, fields: Fields, frozen: bool) -> Callable[..., None]:
    """An ``__init__`` that compiles the real one on the first call and puts it in its place."""
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if cls.__init__ is __init__:
            cls.__init__ = _compile_init(cls, fields, frozen)  # type: ignore[misc]
        cls.__init__(self, *args, **kwargs)  # type: ignore[misc]
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


_FACTORY = type("_HAS_DEFAULT_FACTORY_CLASS", (), {"__repr__": lambda self: "<factory>"})()


def _compile_init(cls: type, fields: Fields, frozen: bool) -> Callable[..., None]:
    """The ``__init__`` the stdlib would generate, as one function: the one compiled ahead in
    :mod:`shapecheck.record_inits` when its source is this one, else compiled now."""
    source, namespace = init_source(cls, fields, frozen)
    factory = _shipped().get(source)
    if factory is None:
        exec(source, namespace)  # our own generated text, never the user's (as the stdlib does)
        function: Callable[..., None] = namespace["__init__"]
    else:  # the same text, compiled into the package's bytecode: no compile at start-up
        del namespace["__name__"]
        function = factory(**namespace)
        function.__module__ = cls.__module__
    function.__qualname__ = f"{cls.__qualname__}.__init__"
    return function


def init_source(cls: type, fields: Fields, frozen: bool) -> tuple[str, dict[str, Any]]:
    """The source of a record's ``__init__`` and the names it reads (its namespace)."""
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY, "_object": object,
                                 "__name__": cls.__module__}  # the function's __module__
    parameters: list[str] = []
    body: list[str] = []
    for field in fields:
        name = field.name
        if field.default_factory is not _MISSING:
            namespace[f"_factory_{name}"] = field.default_factory
            if field.init:
                parameters.append(f"{name}=_FACTORY")
                value = f"_factory_{name}() if {name} is _FACTORY else {name}"
            else:
                value = f"_factory_{name}()"
        elif field.init:
            if field.default is not _MISSING:
                namespace[f"_default_{name}"] = field.default
                parameters.append(f"{name}=_default_{name}")
            else:
                parameters.append(name)
            value = name
        else:
            if field.default is _MISSING:
                continue
            namespace[f"_default_{name}"] = field.default
            value = f"_default_{name}"
        body.append(f"_object.__setattr__(self, {name!r}, {value})" if frozen
                    else f"self.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    source = (f"def __init__(self, {', '.join(parameters)}):\n    "
              + "\n    ".join(body or ["pass"]) + "\n")
    return source, namespace


class _Ahead:
    """The factories compiled ahead, by source: first :mod:`shapecheck.record_inits` (those a
    plain `verify` uses), then, on the first source not there, ``record_inits_rest`` (every
    other record the package declares): a run reads only the bytecode it needs (issue 36)."""

    def __init__(self, table: str) -> None:
        self._table = table  # "INITS" or "NEWS"
        self._hot = self._read("record_inits")
        self._rest: Mapping[str, Any] | None = None

    def _read(self, module: str) -> Mapping[str, Any]:
        try:
            found = getattr(import_module(f"{__package__}.{module}"), self._table)
        except (ImportError, AttributeError):  # being written (tools/record_inits.py): compiled
            return {}
        return found  # type: ignore[no-any-return]

    def get(self, source: str) -> Any:
        found = self._hot.get(source)
        if found is None:
            if self._rest is None:
                self._rest = self._read("record_inits_rest")
            found = self._rest.get(source)
        return found


_SHIPPED: list[Any] = []


def _shipped() -> Any:
    """The ``__init__`` factories compiled ahead, by source (loaded on the first record built)."""
    if not _SHIPPED:
        _SHIPPED.append(_Ahead("INITS"))
    return _SHIPPED[0]


def shipped_source(inits: Iterable[tuple[str, tuple[str, ...]]], news: Iterable[str] = ()) -> str:
    """The text of :mod:`shapecheck.record_inits` for these ``__init__`` sources, each with the
    names of its namespace (``init_source``, less ``__name__``): each one in a factory that
    takes those names as arguments and returns it; and for these named tuples' ``__new__``
    sources (:func:`new_source`), each in a factory that takes ``_tuple_new``."""
    parts = ['"""The records\' ``__init__`` methods, compiled ahead: GENERATED by\n'
             '`python tools/record_inits.py`; do not edit. ``records._compile_init`` takes the one\n'
             'whose source is the one it would compile, else compiles that (a stale entry costs a\n'
             'compile at start-up, never a difference)."""\n\n'
             "# fmt: off\n"]
    entries: list[str] = []
    for index, (source, names) in enumerate(sorted(dict(inits).items())):
        inner = "".join(f"    {line}\n" for line in source.splitlines())
        parts.append(f"\n\ndef _{index}({', '.join(names)}):\n{inner}    return __init__\n")
        entries.append(f"    {source!r}: _{index},\n")
    parts.append("\n\nINITS = {\n" + "".join(entries) + "}\n")
    entries = []
    for index, source in enumerate(sorted(set(news))):
        parts.append(f"\n\ndef _new_{index}(_tuple_new):\n    return {source}\n")
        entries.append(f"    {source!r}: _new_{index},\n")
    parts.append("\n\nNEWS = {\n" + "".join(entries) + "}\n")
    return "".join(parts)


# --- records declared by a base class ------------------------------------------------------

# ``class Name(Record, frozen=True, slots=True):`` declares what ``@dataclass(frozen=True,
# slots=True) class Name:`` declares, in one class: the decorator receives a class already
# made, so a slotted record is made twice (the second time with ``__slots__``) and each method
# set on it afterwards recomputes the type's slots; here the metaclass reads the class body's
# namespace, puts the fields, ``__slots__`` and the methods in it, and makes the class once
# (~90k instructions less for a slotted record, issue 36). Every subclass of ``Record`` is a
# record (a record's subclass is declared the same way, with its own options); the methods,
# fields, parameters, docstring and MRO are the ones ``dataclass`` gives.


class _RecordMeta(type):
    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any], *,
                frozen: bool = False, slots: bool = False) -> Any:
        if frozen and ("__setattr__" in ns or "__delattr__" in ns):
            raise TypeError("Cannot overwrite attribute __setattr__ or __delattr__ "
                            f"in class {name}")
        # `Record` only declares: the class's bases are the others (its MRO is the decorated
        # class's, with no base of ours: `__slots__` and `isinstance` as before).
        bases = tuple(base for base in bases if base is not Record)
        found: dict[str, dataclasses.Field[Any]] = {}
        for base in reversed(bases):
            for ancestor in base.__mro__[-1::-1]:
                found.update(getattr(ancestor, "__dataclass_fields__", {}))
        for key, annotation in ns.get("__annotations__", {}).items():
            if annotation.__class__ is not str or "ClassVar" in annotation or \
                    "InitVar" in annotation or "KW_ONLY" in annotation:  # else a plain field
                kind = _annotation_kind(annotation)
                if kind == "classvar":
                    continue
                if kind != "field":
                    raise TypeError(f"records.Record does not support {kind} ({name}.{key})")
            found[key] = _namespace_field(ns, key, annotation)
        for key, value in ns.items():
            if value.__class__ is _Field and key not in found:
                raise TypeError(f"{key!r} is a field but has no type annotation")
        fields = tuple(found.values())
        ns["__dataclass_fields__"] = found
        ns["__dataclass_params__"] = _PARAMS
        if "__match_args__" not in ns:
            ns["__match_args__"] = tuple([f.name for f in fields if f.init])
        if slots:
            if "__slots__" in ns:
                raise TypeError(f"{name} already specifies __slots__")
            inherited = {slot for base in bases for ancestor in base.__mro__[:-1]
                         for slot in _slots_of(ancestor)}
            ns["__slots__"] = tuple([key for key in found if key not in inherited])
            for key in (*found, "__dict__", "__weakref__"):
                ns.pop(key, None)
        # The methods are shared by every record (no closures: ~15 objects less a record, each
        # one walked by every collection and the teardown); what is the class's own is read
        # from `__record__`: the names `__repr__` shows, the key `__eq__` and `__hash__` compare.
        if "__init__" not in ns:
            ns["__init__"] = _first_init
        if "__repr__" not in ns:
            ns["__repr__"] = _record_repr
        own_eq, explicit_hash = "__eq__" in ns, ns.get("__hash__", _MISSING)
        compared = tuple([f.name for f in fields if f.compare])
        key_of = _key(compared)
        hash_key = None
        if not own_eq:
            ns["__eq__"] = _record_eq
        if explicit_hash is _MISSING or (explicit_hash is None and own_eq):
            # As `dataclass` (an own __eq__ without __hash__ is the __hash__ = None Python sets).
            if not frozen:
                ns["__hash__"] = None
            else:
                hashed = tuple([f.name for f in fields
                                if (f.compare if f.hash is None else f.hash)])
                hash_key = key_of if hashed == compared else _key(hashed)
                ns["__hash__"] = _record_hash
        ns["__record__"] = (tuple([f.name for f in fields if f.repr]), key_of, hash_key)
        if frozen:
            ns["__setattr__"], ns["__delattr__"] = _frozen_setattr, _frozen_delattr
            if slots:  # pickle and copy restore slots by setattr, which a frozen class refuses
                ns["__getstate__"], ns["__setstate__"] = _getstate, _setstate
        if not ns.get("__doc__"):
            ns["__doc__"] = _SIGNATURE_DOC
        return type.__new__(mcls, name, bases, ns)


class _SignatureDoc:
    """The docstring ``dataclass`` gives an undocumented record (``Name(field: type, ...)``),
    written when it is first read: most never are (issue 36)."""

    __slots__ = ()

    def __get__(self, instance: Any, owner: type) -> str:
        fields = owner.__dataclass_fields__.values()  # type: ignore[attr-defined]
        return owner.__name__ + "(" + ", ".join([_parameter(f) for f in fields if f.init]) + ")"


_SIGNATURE_DOC = _SignatureDoc()


def _first_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """A record's ``__init__`` until its first instance: puts the real one in its place."""
    owner = next(kind for kind in type(self).__mro__
                 if kind.__dict__.get("__init__") is _first_init)
    owner.__init__ = _compile_init(  # type: ignore[misc]
        owner, tuple(owner.__dataclass_fields__.values()), frozen(owner))
    owner.__init__(self, *args, **kwargs)  # type: ignore[misc]


_REPR_RUNNING: set[tuple[int, int]] = set()


def _record_repr(self: Any) -> str:
    """``dataclass``'s ``__repr__``, with ``reprlib.recursive_repr``'s guard (per object and
    thread): ``...`` for a record met again inside its own repr."""
    key = id(self), get_ident()
    if key in _REPR_RUNNING:
        return "..."
    _REPR_RUNNING.add(key)
    try:
        inner = ", ".join([f"{name}={getattr(self, name)!r}"
                           for name in self.__class__.__record__[0]])
    finally:
        _REPR_RUNNING.discard(key)
    return f"{self.__class__.__qualname__}({inner})"


def _record_eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        key = self.__class__.__record__[1]
        return key(self) == key(other)
    return NotImplemented


def _record_hash(self: Any) -> int:
    return hash(self.__class__.__record__[2](self))


def _frozen_owner(kind: type) -> type:
    """The frozen record whose ``__setattr__`` an instance of ``kind`` runs."""
    return next(owner for owner in kind.__mro__
                if owner.__dict__.get("__setattr__") is _frozen_setattr)


def _frozen_setattr(self: Any, key: str, value: Any) -> None:
    owner = _frozen_owner(type(self))
    if type(self) is owner or key in owner.__dataclass_fields__:  # type: ignore[attr-defined]
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {key!r}")
    super(owner, self).__setattr__(key, value)


def _frozen_delattr(self: Any, key: str) -> None:
    owner = _frozen_owner(type(self))
    if type(self) is owner or key in owner.__dataclass_fields__:  # type: ignore[attr-defined]
        raise dataclasses.FrozenInstanceError(f"cannot delete field {key!r}")
    super(owner, self).__delattr__(key)


def frozen(cls: type) -> bool:
    """Whether a record declared with ``Record`` is frozen (its ``__setattr__`` is ours)."""
    return cls.__dict__.get("__setattr__") is _frozen_setattr


def _namespace_field(ns: dict[str, Any], name: str, annotation: Any) -> dataclasses.Field[Any]:
    """The field as ``_field`` makes it, reading and fixing the class body's namespace."""
    value = ns.get(name, _MISSING)
    given = value.__class__ is _Field
    # What `dataclasses.field(default=value)` makes (its arguments in `Field`'s order).
    made = value if given else _Field(value, _MISSING, True, True, None, True, None, False)
    made.name, made.type = name, annotation
    made._field_type = _FIELD_TYPE  # type: ignore[attr-defined]  # what fields() lists
    if made.kw_only is _MISSING:  # type: ignore[comparison-overlap]
        made.kw_only = False
    if made.default is not _MISSING and made.default.__class__.__hash__ is None:
        raise ValueError(f"mutable default {type(made.default)} for field {name} is not "
                         "allowed: use default_factory")
    if given:
        if made.default is _MISSING:
            del ns[name]
        else:
            ns[name] = made.default
    return made


Record = type.__new__(_RecordMeta, "Record", (), {
    "__module__": __name__,
    "__doc__": "The base of a record: ``class Name(Record, frozen=..., slots=...):``."})


# --- named tuples ------------------------------------------------------------------------------

# ``class Span(NamedTuple)`` as ``typing.NamedTuple`` makes it, without its cost: typing turns
# each string annotation (every one, under ``from __future__ import annotations``) into a
# ``ForwardRef``, which compiles it, and sets ``__bases__`` again (recomputing the type's slots):
# about 0.2 ms a class, seventeen on every `verify`. The class is the one
# ``collections.namedtuple`` makes (made by :func:`_named_tuple`, its ``__new__`` compiled ahead
# in ``record_inits`` as the records' ``__init__``), with the namespace's methods and attributes
# added as typing adds them; one difference:
# ``__annotations__`` holds the annotations as written (strings), not ``ForwardRef`` objects
# (``typing.get_type_hints`` gives the same types).

_PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                         "_field_defaults", "_make", "_replace", "_asdict", "_source"})
_SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})


class _NamedTupleMeta(type):
    def __new__(cls, typename: str, bases: tuple[type, ...], ns: dict[str, Any]) -> Any:
        if bases != (_NamedTupleBase,):
            raise TypeError("records.NamedTuple: a named tuple has no other base")
        types: dict[str, Any] = ns.get("__annotations__", {})
        defaults: list[str] = []
        for name in types:
            if name in ns:
                defaults.append(name)
            elif defaults:
                raise TypeError(f"Non-default namedtuple field {name} cannot follow default "
                                f"field{'s' if len(defaults) > 1 else ''} {', '.join(defaults)}")
        made = _named_tuple(typename, tuple(types), tuple(ns[n] for n in defaults),
                            ns["__module__"])
        made.__annotations__ = made.__new__.__annotations__ = dict(types)
        for key in ns:
            if key in _PROHIBITED:
                raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
            if key not in _SPECIAL and key not in made._fields:
                setattr(made, key, ns[key])
        return made


_NamedTupleBase = type.__new__(_NamedTupleMeta, "NamedTuple", (), {})


def new_source(names: tuple[str, ...]) -> str:
    """The source of a named tuple's ``__new__``, as ``collections.namedtuple`` writes it."""
    arguments = ", ".join(names) + ("," if len(names) == 1 else "")
    return f"lambda _cls, {arguments}: _tuple_new(_cls, ({arguments}))"


def _named_tuple(typename: str, names: tuple[str, ...], defaults: tuple[Any, ...],
                 module: str) -> type:
    """The class ``collections.namedtuple(typename, names, defaults=defaults, module=module)``
    makes: the same namespace, methods and attributes. ``collections`` compiles the class's
    ``__new__`` with ``eval`` (about 0.25 ms, half of the class's cost); here it comes compiled
    ahead from :mod:`shapecheck.record_inits` when its source is there, else it is compiled
    the same way."""
    for name in names:
        if name.startswith("_"):
            raise ValueError(f"Field names cannot start with an underscore: {name!r}")
        if iskeyword(name) or not name.isidentifier():
            raise ValueError(f"Type names and field names must be valid identifiers: {name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"Encountered duplicate field name in {names!r}")
    names = tuple(map(sys.intern, names))
    count = len(names)
    arguments = ", ".join(names) + ("," if count == 1 else "")
    source = new_source(names)
    factory = _shipped_news().get(source)
    if factory is None:
        namespace = {"_tuple_new": tuple.__new__, "__builtins__": {},
                     "__name__": f"namedtuple_{typename}"}
        __new__ = eval(source, namespace)  # our own generated text, as collections does
    else:  # the same text, compiled into the package's bytecode
        __new__ = factory(tuple.__new__)
        __new__.__module__ = f"namedtuple_{typename}"
    __new__.__name__ = "__new__"
    __new__.__doc__ = f"Create new instance of {typename}({arguments})"
    __new__.__defaults__ = defaults  # () where none, as typing's call of namedtuple sets
    shape = "(" + ", ".join(f"{name}=%r" for name in names) + ")"

    @classmethod  # type: ignore[misc]
    def _make(cls: type, iterable: Iterable[Any]) -> Any:
        result = tuple.__new__(cls, iterable)
        if len(result) != count:
            raise TypeError(f"Expected {count} arguments, got {len(result)}")
        return result

    def _replace(self: Any, /, **changes: Any) -> Any:
        result = self._make(map(changes.pop, names, self))
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return result

    def __repr__(self: Any) -> str:
        return self.__class__.__name__ + shape % self

    def _asdict(self: Any) -> dict[str, Any]:
        return dict(zip(self._fields, self))

    def __getnewargs__(self: Any) -> tuple[Any, ...]:
        return tuple(self)

    _make.__func__.__doc__ = f"Make a new {typename} object from a sequence or iterable"
    _replace.__doc__ = f"Return a new {typename} object replacing specified fields with new values"
    __repr__.__doc__ = "Return a nicely formatted representation string"
    _asdict.__doc__ = "Return a new dict which maps field names to their values."
    __getnewargs__.__doc__ = "Return self as a plain tuple.  Used by copy and pickle."
    for method in (__new__, _make.__func__, _replace, __repr__, _asdict, __getnewargs__):
        method.__qualname__ = f"{typename}.{method.__name__}"
    namespace = {"__doc__": f"{typename}({arguments})", "__slots__": (), "_fields": names,
                 "_field_defaults": dict(zip(names[count - len(defaults):], defaults)),
                 "__new__": __new__, "_make": _make, "_replace": _replace, "__repr__": __repr__,
                 "_asdict": _asdict, "__getnewargs__": __getnewargs__, "__match_args__": names}
    for index, name in enumerate(names):
        namespace[name] = _tuplegetter(index, sys.intern(f"Alias for field number {index}"))
    made = type(typename, (tuple,), namespace)
    made.__module__ = module
    return made


_SHIPPED_NEWS: list[Any] = []


def _shipped_news() -> Any:
    """The named tuples' ``__new__`` factories compiled ahead, by source."""
    if not _SHIPPED_NEWS:
        _SHIPPED_NEWS.append(_Ahead("NEWS"))
    return _SHIPPED_NEWS[0]


if TYPE_CHECKING:  # type checkers see an Enum declared as usual
    from enum import Enum as EnumBody
else:
    EnumBody = object  # the body of a `simple_enum`: a plain class until it is made an Enum

E = TypeVar("E")


def simple_enum(cls: type[E]) -> type[E]:
    """``class Name(EnumBody)``'s body made into an ``Enum``, the way the standard library makes
    its own at start-up (``enum._simple_enum``, Python 3.11+: ``re.RegexFlag``,
    ``http.HTTPStatus``): the members, their values, lookup by value, iteration, ``repr``,
    pickling and methods are ``class Name(Enum)``'s, made without its checks on each member,
    at ~40% of the cost (issue 36; ``tests/test_records.py`` compares each one with the
    ``Enum`` its body declares). Older Pythons get that ``Enum``."""
    made = getattr(enum, "_simple_enum", None)
    if made is not None:
        return made(enum.Enum)(cls)  # type: ignore[no-any-return]
    return declared_enum(cls)  # type: ignore[return-value]


def declared_enum(cls: type) -> type[enum.Enum]:
    """The ``Enum`` that ``class Name(Enum)`` with ``cls``'s body makes."""
    namespace = type(enum.Enum).__prepare__(cls.__name__, (enum.Enum,))
    for key, value in cls.__dict__.items():
        if key not in ("__dict__", "__weakref__"):
            namespace[key] = value
    return type(enum.Enum)(cls.__name__, (enum.Enum,), namespace)  # type: ignore[no-any-return]


if TYPE_CHECKING:  # type checkers know typing's
    from typing import NamedTuple
else:
    def NamedTuple(typename: str, fields: Any = None, /, **kwargs: Any) -> type:
        """The base of a ``class Name(NamedTuple):`` (the call form is typing's)."""
        return typing.NamedTuple(typename, fields, **kwargs)

    NamedTuple.__mro_entries__ = lambda bases: (_NamedTupleBase,)
