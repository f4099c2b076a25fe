"""`record`: the core's immutable value types, as `@dataclass(frozen=True, slots=True)` makes
them, at about half the cost of making the class.

The standard library's dataclass compiles six methods from generated source for each frozen
class (`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`); at import
that is most of the cost of the core's 63 frozen value types, paid at every start. `record` lets
the dataclass machinery compile `__init__` and the frozen guards, and gives `__eq__`,
`__hash__` and `__repr__` that read the fields through one `operator.attrgetter` instead of
compiled code. The class is a dataclass in every other way (`dataclasses.fields`,
`replace`, `asdict`, `__match_args__`, slots, copying), except that its
`__dataclass_params__` say `eq=False, repr=False` (those methods are not the dataclass's);
`tests/unit/core/test_records.py` compares it with `@dataclass(frozen=True, slots=True)` on
the same fields.
"""

from __future__ import annotations

import dataclasses
import operator
import typing
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields `names` of an object, as a tuple (as the dataclass's `__eq__` compares)."""
    if len(names) == 1:
        get_one = operator.attrgetter(names[0])
        return lambda obj: (get_one(obj),)
    if not names:
        return lambda obj: ()
    get: Callable[[Any], tuple[Any, ...]] = operator.attrgetter(*names)
    return get


def _defines(cls: type, name: str) -> bool:
    """Whether `cls` defines method `name` itself, as the dataclass decides it: a `__hash__`
    set to None only because the class defines `__eq__` is not one."""
    if name != "__hash__":
        return name in cls.__dict__
    own = cls.__dict__.get("__hash__", dataclasses.MISSING)
    return not (own is dataclasses.MISSING or (own is None and "__eq__" in cls.__dict__))


@typing.dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: type[T]) -> type[T]:
    """`cls` as `@dataclass(frozen=True, slots=True)` would make it (see the module); like
    the dataclass, it keeps an `__eq__`, `__hash__` or `__repr__` the class defines itself."""
    keep = {name for name in ("__eq__", "__hash__", "__repr__") if _defines(cls, name)}
    made: Any = dataclasses.dataclass(frozen=True, slots=True, eq=False, repr=False)(cls)
    fields = dataclasses.fields(made)
    key = _key(tuple(f.name for f in fields if f.compare))
    shown = tuple(f.name for f in fields if f.repr)

    def __eq__(self: Any, other: object) -> bool:
        if other is self:  # as the tuples would compare: item by item, identity first
            return True
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(key(self))

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({inner})"

    for method in (__eq__, __hash__, __repr__):
        if method.__name__ not in keep:
            method.__qualname__ = f"{made.__qualname__}.{method.__name__}"
            setattr(made, method.__name__, method)
    return typing.cast("type[T]", made)
