"""Kubernetes label selector strings ("app=web,tier!=db,env in (a,b),!legacy"), as kubectl -l takes them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

Predicate = Callable[[Mapping[str, str]], bool]

_SET = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_CMP = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")


def _split(text: str) -> list[str]:
    """Splits on commas outside parentheses."""
    parts, depth, current = [], 0, []
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
            if op == "in":
                checks.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                checks.append(lambda labels, k=key, vs=values: k not in labels or labels[k] not in vs)
        elif m := _CMP.match(part):
            key, op, value = m.groups()
            if op == "!=":
                checks.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                checks.append(lambda labels, k=key, v=value: k in labels and labels[k] == v)
        elif m := _EXISTS.match(part):
            negated, key = m.groups()
            if negated:
                checks.append(lambda labels, k=key: k not in labels)
            else:
                checks.append(lambda labels, k=key: k in labels)
        else:
            raise ValueError(f"invalid label selector requirement {part.strip()!r}")
    return lambda labels: all(check(labels) for check in checks)
