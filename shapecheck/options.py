"""Option values from users, validated once: dim bindings and memory sizes.

The command line (``--dim N=128``, ``--max-memory 4GiB``) and the Python API
(``check_text(..., bindings=...)``, ``compile_spec(dims=..., max_memory=...)``)
use the same rules and raise the same :class:`OptionError` (a ``ValueError``)
with the same message; the CLI shows it as a usage error (exit 2).

- A binding is a dim name (an identifier) and a positive integer below 10**18:
  ``int`` or anything with ``__index__`` (NumPy integers), never ``bool``, a
  float or a string in Python; ASCII digits only on the command line (``²``
  and other Unicode digits are refused, though ``str.isdigit`` accepts them).
- A size is a byte count: ``4GiB``, ``512MiB``, ``2GB`` (powers of 1000),
  ``1.5KiB``, ``1000000``, or ``unlimited``; it must come to at least one byte
  (``0.5`` is refused, not read as 0). In Python: an ``int`` of bytes, a
  string as above, or ``None`` for no limit.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Mapping
from functools import cache

from .i18n import Table

MAX_BINDING = 10**18 - 1  # 18 digits: far past any real size, and exact as a float-free int

MESSAGES: Table = Table("options", "MESSAGES", {
    "binding_syntax": "`{item}` is not NAME=INT",
    "binding_name": "`{name}` is not a dim name",
    "binding_value": "`{name}`: the value must be a positive integer, got {value}",
    "binding_too_large": "`{name}`: {value} is too large (at most {limit} digits)",
    "binding_twice": "`{name}` is bound twice",
    "bindings_type": "bindings must be a mapping of dim names to integers, got {type}",
    "size": "`{text}` is not a size (examples: 4GiB, 512MiB, 2GB, 1000000, unlimited)",
    "size_small": "`{text}` is less than one byte",
    "size_type": "a size is a number of bytes, a string such as '4GiB', or None; got {type}",
    "many_digits": "a {digits}-digit number",
    "huge_number": "a number of over 3000 digits",
})


@cache  # compiled on first use: most runs never need it (issue 36)
def _digits() -> re.Pattern[str]:
    return re.compile(r"[0-9]+")


@cache  # compiled on first use: most runs never need it (issue 36)
def _size() -> re.Pattern[str]:
    return re.compile(r"(?P<number>[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)(?P<unit>[kmgt]i?)?b?")


_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
          "ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40}
UNLIMITED = ("unlimited", "none")


class OptionError(ValueError):
    """A binding, size or other option value that is not valid; the message says why."""


def _message(key: str, **fields: object) -> str:
    return MESSAGES[key].format(**fields)


# --- bindings ------------------------------------------------------------------------------


def binding_value(name: str, value: object) -> int:
    """A binding's value as an int, or :class:`OptionError`."""
    if isinstance(value, bool) or isinstance(value, float) or isinstance(value, str):
        raise OptionError(_message("binding_value", name=name, value=repr(value)))
    try:
        number = operator.index(value)  # int, NumPy integers
    except TypeError:
        raise OptionError(_message("binding_value", name=name, value=repr(value))) from None
    if number <= 0:
        raise OptionError(_message("binding_value", name=name, value=number))
    if number > MAX_BINDING:
        raise OptionError(_message("binding_too_large", name=name, value=_short(number),
                                   limit=len(str(MAX_BINDING))))
    return number


def check_bindings(bindings: Mapping[str, object] | None) -> dict[str, int]:
    """``{name: value}`` from the API, validated (a copy; ``None`` is no bindings)."""
    if bindings is None:
        return {}
    if not isinstance(bindings, Mapping):
        raise OptionError(_message("bindings_type", type=type(bindings).__name__))
    checked: dict[str, int] = {}
    for name, value in bindings.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise OptionError(_message("binding_name", name=name))
        checked[name] = binding_value(name, value)
    return checked


def parse_binding(item: str) -> tuple[str, int]:
    """``NAME=INT`` from the command line."""
    name, separator, number = item.partition("=")
    name, number = name.strip(), number.strip()
    if not separator or not name.isidentifier():
        raise OptionError(_message("binding_syntax", item=item))
    if not _digits().fullmatch(number):
        raise OptionError(_message("binding_value", name=name, value=f"`{number}`"))
    if len(number.lstrip("0")) > len(str(MAX_BINDING)):
        raise OptionError(_message("binding_too_large", name=name, value=f"`{number[:24]}...`",
                                   limit=len(str(MAX_BINDING))))
    return name, binding_value(name, int(number))


def parse_bindings(items: list[str] | tuple[str, ...]) -> dict[str, int]:
    """Repeated ``NAME=INT``; the same name twice with different values is an error."""
    bindings: dict[str, int] = {}
    for item in items:
        name, value = parse_binding(item)
        if name in bindings and bindings[name] != value:
            raise OptionError(_message("binding_twice", name=name))
        bindings[name] = value
    return bindings


def _short(number: int) -> str:
    if number.bit_length() < 10_000:
        return _message("many_digits", digits=len(str(number)))
    return _message("huge_number")


# --- sizes ------------------------------------------------------------------------------------


def parse_size(value: object) -> int | None:
    """Bytes from ``4GiB``, ``512MiB``, ``2GB``, ``1.5KiB``, ``1000000`` or an int;
    ``unlimited`` (or ``None``) -> None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise OptionError(_message("size_type", type="bool"))
    if isinstance(value, str):
        return _parse_size_text(value)
    try:
        number = operator.index(value)
    except TypeError:
        if isinstance(value, float):
            return _whole_bytes(value, repr(value))
        raise OptionError(_message("size_type", type=type(value).__name__)) from None
    if number < 1:
        raise OptionError(_message("size_small", text=number))
    return number


def _parse_size_text(text: str) -> int | None:
    cleaned = text.strip().lower().replace(" ", "").replace("_", "")
    if cleaned in UNLIMITED:
        return None
    match = _size().fullmatch(cleaned)
    if match is None:
        raise OptionError(_message("size", text=text))
    number = float(match["number"])
    return _whole_bytes(number * _UNITS[match["unit"] or ""], text)


def _whole_bytes(number: float, text: str) -> int:
    if not math.isfinite(number):
        raise OptionError(_message("size", text=text))
    if number < 1:
        raise OptionError(_message("size_small", text=text))
    return int(number)


__all__ = ["OptionError", "check_bindings", "parse_binding", "parse_bindings", "parse_size"]
