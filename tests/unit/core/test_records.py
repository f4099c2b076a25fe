"""`record` makes the same value types as `@dataclass(frozen=True, slots=True)`: the same
equality, hash, repr, frozenness, fields, replace, copying, on the same fields."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kube_reloader.core
from kube_reloader.core import records
from kube_reloader.core.records import record


def twins(make: Any) -> tuple[type[Any], type[Any]]:
    """The class `make()` defines, once as a record and once as the stdlib's dataclass."""
    a, b = make(), make()
    return record(a), dataclass(frozen=True, slots=True)(b)


def full() -> type[Any]:
    class Sample:
        name: str
        count: int = 0
        tags: tuple[str, ...] = ()
        note: Any = field(default=None, compare=False)
        secret: str = field(default="", repr=False)
        seen: frozenset[int] = field(default_factory=frozenset)
        log: list[int] = field(default_factory=list, compare=False)
        derived: int = field(init=False, default=0)

        def __post_init__(self) -> None:
            object.__setattr__(self, "derived", self.count * 2)

    Sample.__qualname__ = "Sample"
    return Sample


def single() -> type[Any]:
    class One:
        value: Any

    One.__qualname__ = "One"
    return One


def empty() -> type[Any]:
    class Nothing:
        pass

    Nothing.__qualname__ = "Nothing"
    return Nothing


FULL = twins(full)
SINGLE = twins(single)
EMPTY = twins(empty)

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.tuples(inner, inner) | st.frozensets(st.integers(), max_size=3),
    max_leaves=6,
)
samples = st.fixed_dictionaries(
    {
        "name": st.text(max_size=6),
        "count": st.integers(),
        "tags": st.tuples(st.text(max_size=3)),
        "note": values,
        "secret": st.text(max_size=4),
    }
)


def observed(a: Any, b: Any) -> tuple[Any, ...]:
    """What a caller can see of two instances of one class."""
    return (a == b, a != b, repr(a), repr(b), hash(a) == hash(b) if a == b else None)


@given(samples, samples)
def test_equality_hash_and_repr_are_the_dataclasses(x: dict[str, Any], y: dict[str, Any]) -> None:
    ours, theirs = FULL
    assert observed(ours(**x), ours(**y)) == observed(theirs(**x), theirs(**y))
    assert observed(ours(**x), ours(**x)) == observed(theirs(**x), theirs(**x))
    assert hash(ours(**x)) == hash(theirs(**x))


@given(values, values)
def test_a_one_field_record_compares_and_hashes_as_the_dataclass(a: Any, b: Any) -> None:
    ours, theirs = SINGLE
    assert observed(ours(a), ours(b)) == observed(theirs(a), theirs(b))
    assert hash(ours(a)) == hash(theirs(a))


def test_a_record_without_fields_equals_another_and_hashes_as_the_dataclass() -> None:
    ours, theirs = EMPTY
    assert observed(ours(), ours()) == observed(theirs(), theirs())
    assert hash(ours()) == hash(theirs())


def test_a_field_outside_equality_changes_neither_equality_nor_hash() -> None:
    ours, _ = FULL
    a, b = ours("x", note=1), ours("x", note=2)
    assert a == b
    assert hash(a) == hash(b)
    assert ours("x") != ours("y")


def test_a_record_never_equals_another_class_with_the_same_fields() -> None:
    ours, theirs = FULL
    assert ours("x") != theirs("x")
    assert theirs("x") != ours("x")
    assert ours("x") != ("x", 0, (), None, "", frozenset(), [], 0)
    assert ours("x").__eq__(1) is NotImplemented


def test_a_record_is_frozen_as_the_dataclass_is() -> None:
    for cls in FULL:
        obj = cls("x")
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.name = "y"
        with pytest.raises(dataclasses.FrozenInstanceError):
            del obj.count
    raised = []
    for cls in FULL:  # Python 3.11's frozen slots class fails this with a TypeError: both do
        with pytest.raises(Exception) as caught:  # noqa: PT011
            cls("x").other = 1
        raised.append(caught.type)
    assert raised[0] is raised[1]


def test_fields_replace_asdict_match_args_slots_and_init_are_the_dataclasses() -> None:
    ours, theirs = FULL
    assert [(f.name, f.compare, f.repr, f.init) for f in dataclasses.fields(ours)] == [
        (f.name, f.compare, f.repr, f.init) for f in dataclasses.fields(theirs)
    ]
    assert ours.__match_args__ == theirs.__match_args__
    assert ours.__slots__ == theirs.__slots__
    a, b = ours("x", 3, seen=frozenset([1])), theirs("x", 3, seen=frozenset([1]))
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert dataclasses.asdict(dataclasses.replace(a, count=5)) == dataclasses.asdict(
        dataclasses.replace(b, count=5)
    )
    assert dataclasses.replace(a, count=5).derived == 10, "__post_init__ runs"
    assert ours("x").log is not ours("x").log, "a default factory per instance"
    with pytest.raises(TypeError):
        ours("x", derived=1)
    with pytest.raises(TypeError):
        ours()


def test_a_record_survives_copying() -> None:
    ours, theirs = FULL
    for cls in (ours, theirs):
        obj = cls("x", 2, log=[1])
        assert copy.deepcopy(obj) == obj
        assert copy.copy(obj) == obj
        assert copy.deepcopy(obj).log is not obj.log
    assert repr(copy.deepcopy(ours("x"))) == repr(theirs("x"))


def test_every_frozen_value_type_of_the_core_is_made_by_record() -> None:
    """Those left to the stdlib's dataclass are mutable ones; a new frozen one should be a
    record (half the cost at every start)."""
    stdlib = []
    for info in pkgutil.iter_modules(kube_reloader.core.__path__):
        module = importlib.import_module(f"kube_reloader.core.{info.name}")
        for obj in vars(module).values():
            if not (isinstance(obj, type) and obj.__module__ == module.__name__):
                continue
            params = getattr(obj, "__dataclass_params__", None)
            if params is not None and params.frozen and "__slots__" in vars(obj):
                made_by_record = obj.__eq__.__module__ == records.__name__
                if not made_by_record:
                    stdlib.append(obj.__qualname__)
    assert stdlib == []


def own_methods() -> type[Any]:
    class Own:
        a: int
        secret: str = ""

        def __repr__(self) -> str:
            return f"Own(a={self.a}, secret=<hidden>)"

    Own.__qualname__ = "Own"
    return Own


def own_eq() -> type[Any]:
    class OwnEq:
        a: int
        b: int = 0

        def __eq__(self, other: object) -> bool:
            return type(other) is type(self) and self.a == other.a

    OwnEq.__qualname__ = "OwnEq"
    return OwnEq


def own_hash() -> type[Any]:
    class OwnHash:
        a: int

        def __hash__(self) -> int:
            return 7

    OwnHash.__qualname__ = "OwnHash"
    return OwnHash


def test_a_method_the_class_defines_itself_is_kept_as_the_dataclass_keeps_it() -> None:
    ours, theirs = twins(own_methods)
    assert repr(ours(1, "pw")) == repr(theirs(1, "pw")) == "Own(a=1, secret=<hidden>)"
    ours, theirs = twins(own_eq)
    assert (ours(1, 2) == ours(1, 3), theirs(1, 2) == theirs(1, 3)) == (True, True)
    assert hash(ours(1, 2)) == hash(theirs(1, 2)), "the generated hash, over both fields"
    ours, theirs = twins(own_hash)
    assert (hash(ours(1)), hash(theirs(1))) == (7, 7)
    assert (ours(1) == ours(1), ours(1) == ours(2)) == (True, False)


def test_a_nan_held_by_a_record_equals_itself_as_in_the_dataclass() -> None:
    nan = float("nan")
    ours, theirs = SINGLE
    assert (ours(nan) == ours(nan)) == (theirs(nan) == theirs(nan))
    assert (ours(nan) == ours(float("nan"))) == (theirs(nan) == theirs(float("nan")))
    mine, stdlibs = ours(float("nan")), theirs(float("nan"))
    assert (mine == mine, mine != mine) == (stdlibs == stdlibs, stdlibs != stdlibs)


def test_the_runtimes_options_are_a_record() -> None:
    from kube_reloader.runtime.options import Options

    assert Options.__eq__.__module__ == records.__name__
    assert Options() == Options()
    with pytest.raises(dataclasses.FrozenInstanceError):
        Options().namespace_selector = "x"  # type: ignore[misc]
