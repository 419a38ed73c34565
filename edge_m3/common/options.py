"""Comma-list options (`--quant fp32,int8`, `--threads 1,2`, `--seq-lens 32,128`), parsed once."""

from __future__ import annotations

from collections.abc import Sequence

from edge_m3.errors import EdgeM3Error


def split_list(value: str, option: str) -> list[str]:
    """Non-empty, unrepeated comma-separated items."""
    items = [v.strip() for v in str(value).split(",") if v.strip()]
    if not items:
        raise EdgeM3Error(f"{option}: empty list")
    if len(set(items)) != len(items):
        raise EdgeM3Error(f"{option} {value}: repeated entries")
    return items


def parse_choices(value: str, option: str, choices: Sequence[str]) -> list[str]:
    """A comma list restricted to `choices`, in the order given."""
    items = split_list(value, option)
    for item in items:
        if item not in choices:
            raise EdgeM3Error(f"{option} {item}: unknown (choose from {', '.join(choices)})")
    return items


def parse_ints(value: str, option: str, minimum: int = 1) -> list[int]:
    """A comma list of integers >= `minimum`, in the order given."""
    out = []
    for item in split_list(value, option):
        try:
            n = int(item)
        except ValueError:
            raise EdgeM3Error(f"{option} {item}: not an integer") from None
        if n < minimum:
            raise EdgeM3Error(f"{option} {n}: must be at least {minimum}")
        out.append(n)
    return out


def check_threads(threads: int | None, option: str) -> None:
    """A thread count, when given, is at least 1."""
    if threads is not None and threads < 1:
        raise EdgeM3Error(f"{option} {threads}: must be at least 1")


def version_tuple(v: str) -> tuple[int, ...]:
    """'2.14.0' -> (2, 14, 0) for comparisons."""
    return tuple(int(p) for p in v.split(".")[:3] if p.isdigit())
