"""Device selectors in CEL, as kube-scheduler evaluates them (k8s.io/dynamic-resource-allocation/cel).

Evaluation is cel-python's (``celpy``); this module adds what Kubernetes' CEL environment adds to the
standard library — the ``quantity`` and ``semver`` types with their functions — and shapes ``device``
as upstream does: ``driver``, ``attributes`` and ``capacity`` as maps of domain to maps of name to value,
where a name without a domain belongs to the driver's.

cel-python words its runtime errors differently from cel-go, whose text ends up in the scheduler's
answer; ``runtime_error_text`` rewrites the kinds that selectors over devices can raise into cel-go's
words ("no such key: <key>", "no such overload").
"""

from __future__ import annotations

import ast
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import total_ordering
from typing import Any, Protocol

import celpy
import celpy.celtypes as ct
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError
from podfit.k8s.quantity import QuantityError, parse_quantity


class DeviceFacts(Protocol):
    """What a selector reads of a device (a ResourceSlice's ``Device``): its attributes and capacity."""

    @property
    def attributes(self) -> Mapping[str, tuple[str, Any]]: ...

    @property
    def capacity(self) -> Mapping[str, Fraction]: ...


# semver 2.0.0 (https://semver.org), as the API server validates version attributes.
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


@total_ordering
@dataclass(frozen=True, slots=True)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()

    def _key(self) -> tuple[Any, ...]:
        # A version without a pre-release ranks above any of its pre-releases; numeric identifiers rank
        # below alphanumeric ones.
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 1 if not self.pre else 0, pre)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self._key() < other._key()


def parse_semver(text: str) -> Semver | None:
    match = _SEMVER.match(text)
    if match is None:
        return None
    pre = tuple(int(p) if p.isdigit() else p for p in match.group(4).split(".")) if match.group(4) else ()
    return Semver(int(match.group(1)), int(match.group(2)), int(match.group(3)), pre)


@dataclass(frozen=True, slots=True)
class Quantity:
    amount: Fraction


class _Domains(ct.MapType):
    """device.attributes / device.capacity: an absent domain reads as an empty map (upstream's lazy
    mapper), so a missing attribute is reported by its name."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return ct.MapType({})


class CelError(Exception):
    """A selector's runtime error, worded as cel-go words it."""


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.amount > b.amount) - (a.amount < b.amount)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return (a > b) - (a < b)
    raise TypeError("no such overload")


# apimachinery's resource.ErrFormatWrong, what quantity() answers for text that is no quantity.
_QUANTITY_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def _quantity(text: Any) -> Quantity | CELEvalError:
    try:
        return Quantity(parse_quantity(str(text)))
    except QuantityError:
        return CELEvalError(_QUANTITY_FORMAT)


def _semver(text: Any) -> Semver | CELEvalError:
    version = parse_semver(str(text))
    if version is None:
        return CELEvalError(f"invalid semantic version: {text}")
    return version


def _arith(sign: int) -> Any:
    def apply(a: Any, b: Any) -> Quantity:
        if not isinstance(a, Quantity):
            raise TypeError("no such overload")
        other = b.amount if isinstance(b, Quantity) else Fraction(int(b))
        return Quantity(a.amount + sign * other)

    return apply


def _component(name: str) -> Any:
    def read(value: Any) -> ct.IntType:
        if not isinstance(value, Semver):
            raise TypeError("no such overload")
        return ct.IntType(getattr(value, name))

    return read


def _quantity_only(fn: Any) -> Any:
    def apply(value: Any) -> Any:
        if not isinstance(value, Quantity):
            raise TypeError("no such overload")
        return fn(value.amount)

    return apply


FUNCTIONS: dict[str, Any] = {
    "quantity": _quantity,
    "isQuantity": lambda text: ct.BoolType(isinstance(_quantity(text), Quantity)),
    "semver": _semver,
    "isSemver": lambda text: ct.BoolType(parse_semver(str(text)) is not None),
    "compareTo": lambda a, b: ct.IntType(_compare(a, b)),
    "isGreaterThan": lambda a, b: ct.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: ct.BoolType(_compare(a, b) < 0),
    "add": _arith(1),
    "sub": _arith(-1),
    "sign": _quantity_only(lambda f: ct.IntType((f > 0) - (f < 0))),
    "isInteger": _quantity_only(lambda f: ct.BoolType(f.denominator == 1 and -(2**63) <= f < 2**63)),
    "asInteger": _quantity_only(lambda f: ct.IntType(int(f))),
    "asApproximateFloat": _quantity_only(lambda f: ct.DoubleType(float(f))),
    "major": _component("major"),
    "minor": _component("minor"),
    "patch": _component("patch"),
}


_ENV = celpy.Environment()
_MEMBER = re.compile(r"^no such member in mapping: (.+)$")


def runtime_error_text(error: CELEvalError) -> str:
    """cel-go's wording of a cel-python runtime error."""
    message = str(error.args[0]) if error.args else ""
    kind = error.args[1] if len(error.args) > 1 else None
    if kind is KeyError:
        member = _MEMBER.match(message)
        if member is not None:
            return f"no such key: {ast.literal_eval(member.group(1))}"
        detail = error.args[2] if len(error.args) > 2 else None
        if detail:
            return f"no such key: {detail[0]}"
    if kind is TypeError:
        return "no such overload"
    return message


class CompileError(Exception):
    pass


class Selector:
    """One compiled selector expression."""

    __slots__ = ("_program", "expression")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        try:
            ast_ = _ENV.compile(expression)
        except CELParseError as exc:
            raise CompileError(str(exc).strip().splitlines()[0]) from None
        self._program = _ENV.program(ast_, functions=FUNCTIONS)

    def matches(self, device: Any) -> bool:
        """True or False; raises CelError with cel-go's text on a runtime error."""
        try:
            result = self._program.evaluate({"device": device})
        except CELEvalError as exc:
            raise CelError(runtime_error_text(exc)) from None
        if isinstance(result, CELEvalError):
            raise CelError(runtime_error_text(result))
        if not isinstance(result, ct.BoolType):
            raise CelError("no such overload")
        return bool(result)


_SELECTORS: OrderedDict[str, Selector] = OrderedDict()


def compile_selector(expression: str) -> Selector:
    """The compiled selector, shared by every object that spells the same expression."""
    found = _SELECTORS.get(expression)
    if found is not None:
        _SELECTORS.move_to_end(expression)
        return found
    selector = Selector(expression)
    _SELECTORS[expression] = selector
    if len(_SELECTORS) > 4096:
        _SELECTORS.popitem(last=False)
    return selector


def _value(kind: str, value: Any) -> Any:
    if kind == "int":
        return ct.IntType(value)
    if kind == "bool":
        return ct.BoolType(value)
    if kind == "version":
        return _semver(value)
    return ct.StringType(value)


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, _, ident = name.rpartition("/")
    return (domain or driver), ident


def device_value(driver: str, device: DeviceFacts) -> ct.MapType:
    """``device`` as a selector sees it."""
    attributes: dict[str, dict[Any, Any]] = {}
    for name, (kind, value) in device.attributes.items():
        domain, ident = _split(name, driver)
        attributes.setdefault(domain, {})[ct.StringType(ident)] = _value(kind, value)
    capacity: dict[str, dict[Any, Any]] = {}
    for name, amount in device.capacity.items():
        domain, ident = _split(name, driver)
        capacity.setdefault(domain, {})[ct.StringType(ident)] = Quantity(amount)
    return ct.MapType(
        {
            ct.StringType("driver"): ct.StringType(driver),
            ct.StringType("attributes"): _Domains({ct.StringType(d): ct.MapType(m) for d, m in attributes.items()}),
            ct.StringType("capacity"): _Domains({ct.StringType(d): ct.MapType(m) for d, m in capacity.items()}),
        }
    )
