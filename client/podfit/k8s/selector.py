"""Kubernetes label selector strings ("app=web,tier!=db,env in (a,b),!legacy"), as kubectl -l takes them."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping

Predicate = Callable[[Mapping[str, str]], bool]

_SET = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_CMP = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")


def _split(text: str) -> list[str]:
    """Splits on commas outside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _in(key: str, values: frozenset[str]) -> Predicate:
    return lambda labels: key in labels and labels[key] in values


def _not_in(key: str, values: frozenset[str]) -> Predicate:
    return lambda labels: key not in labels or labels[key] not in values


def _equal(key: str, value: str) -> Predicate:
    return lambda labels: key in labels and labels[key] == value


def _not_equal(key: str, value: str) -> Predicate:
    return lambda labels: labels.get(key) != value


def _present(key: str) -> Predicate:
    return lambda labels: key in labels


def _absent(key: str) -> Predicate:
    return lambda labels: key not in labels


def parse_label_selector(text: str) -> Predicate:
    """A predicate over labels; raises ValueError naming the requirement it cannot parse."""
    checks: list[Predicate] = []
    if not text.strip():
        return lambda labels: True
    for part in _split(text):
        if m := _SET.match(part):
            negated, key, op, raw = m.groups()
            if negated:
                raise ValueError(f"invalid label selector requirement {part.strip()!r}")
            values = frozenset(v.strip() for v in raw.split(",") if v.strip())
            checks.append(_in(key, values) if op == "in" else _not_in(key, values))
        elif m := _CMP.match(part):
            key, op, value = m.groups()
            checks.append(_not_equal(key, value) if op == "!=" else _equal(key, value))
        elif m := _EXISTS.match(part):
            negated, key = m.groups()
            checks.append(_absent(key) if negated else _present(key))
        else:
            raise ValueError(f"invalid label selector requirement {part.strip()!r}")
    return lambda labels: all(check(labels) for check in checks)


def parse_field_selector(text: str, fields: Collection[str]) -> Predicate:
    """A predicate over an object's selectable fields (name -> value), as kube-apiserver's fieldSelector:
    comma-joined ``field=value``/``==``/``!=`` terms over the given ``fields`` only; raises ValueError
    naming the term it cannot parse or the field it does not know."""
    checks: list[Predicate] = []
    for term in text.split(","):
        if not term.strip():
            if text.strip():
                raise ValueError(f"empty term in {text!r}")
            continue
        match = _CMP.match(term)  # the label selector's equality terms, over field names
        if not match:
            raise ValueError(f"{term.strip()!r} is not field=value, field==value or field!=value")
        field, operator, value = match.groups()
        if field not in fields:
            raise ValueError(f"field label not supported: {field} (supported: {', '.join(sorted(fields))})")
        checks.append(_not_equal(field, value) if operator == "!=" else _equal(field, value))
    return lambda values: all(check(values) for check in checks)
