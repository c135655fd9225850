"""jaxtyping annotations checked against the traced shapes.

``forward(self, x: Float[Tensor, "b t d"]) -> Float[Tensor, "b t d"]``: each word names one
size wherever it appears. The words of the inputs are read from the traced inputs (the
first occurrence of a word gives its size); each annotated input and the annotated result
becomes an ``assert NAME: [...]`` of the spec, so the checker proves every occurrence
equal and an annotation the code does not keep is SC304 at the ``def`` line. A word the
inputs do not fix (a new one in the result) is whatever the result has there, as
jaxtyping binds it; a variadic word (``*batch``, ``...``) leaves that annotation unchecked.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from .errors import Location
from .lower import Lowered, Statement

_SHAPE = re.compile(r"^\w+: \w*\[(?P<sizes>[^\]]*)\]")


def asserts(module: Any, lowered: Lowered, at: Location | None) -> list[Statement]:
    """The spec's ``assert`` statements for the annotations of ``module.forward``."""
    try:
        signature = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return []
    shapes = _shapes(lowered)
    sizes: dict[str, str] = {}
    found: list[tuple[str, list[str | None]]] = []
    by_argument = {argument: name for name, (argument, path) in lowered.inputs.items()
                   if not path}
    for parameter in signature.parameters.values():
        words = _words(parameter.annotation)
        name = by_argument.get(parameter.name)
        if words is None or name is None or len(words) != len(shapes.get(name, ())):
            continue
        for word, size in zip(words, shapes[name]):
            if word is not None:
                sizes.setdefault(word, size)
        found.append((name, words))
    result = _words(signature.return_annotation)
    if result is not None and len(lowered.outputs) == 1:
        found.append((lowered.outputs[0], result))
    out: list[Statement] = []
    for name, words in found:
        traced = shapes.get(name)
        if traced is None:
            continue
        annotated = [sizes.get(word, size) if word is not None else size
                     for word, size in zip(words, traced)] if len(words) == len(traced) else \
            [sizes.get(word, "1") if word is not None else "1" for word in words]
        out.append(Statement(f"assert {name}: [{', '.join(annotated)}]", at, None))
    return out


def _shapes(lowered: Lowered) -> dict[str, list[str]]:
    """Each declared or annotated statement's traced shape, as its sizes' texts."""
    found: dict[str, list[str]] = {}
    for statement in (*lowered.declarations, *lowered.statements):
        text = statement.text.split(" ", 1)[1] if statement.text.startswith(("input ", "param ")) \
            else statement.text
        match = _SHAPE.match(text)
        if match is not None and statement.name is not None:
            sizes = match.group("sizes")
            found[statement.name] = [s.strip() for s in sizes.split(",")] if sizes else []
    return found


def _words(annotation: Any) -> list[str | None] | None:
    """The words of a jaxtyping annotation, one per axis (None: an axis any size may take,
    `_`, `#b` broadcasting, a number checked by torch already); None when it has none or a
    variadic one."""
    text = getattr(annotation, "dim_str", None)
    if not isinstance(text, str):
        return None
    words: list[str | None] = []
    for word in text.split():
        if word.startswith("*") or word == "...":
            return None
        word = word.split("=")[0]
        words.append(word if word.isidentifier() and not word.startswith(("_", "#")) else None)
    return words
