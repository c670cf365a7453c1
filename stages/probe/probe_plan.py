"""What the node probe sweeps: message sizes (`1MiB..4GiB`) and the GPU groups to all-reduce over."""
from __future__ import annotations

import re
from typing import Sequence

from stages.core.config import CampaignError

QUAD = 4
_UNITS = {"": 1, "B": 1, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
          "K": 2**10, "M": 2**20, "G": 2**30, "KB": 10**3, "MB": 10**6, "GB": 10**9}
_SIZE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int) -> int:
    """`4GiB` -> 4294967296; a bare number is bytes."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    unit = m.group(2).upper() if m else None
    if not m or unit not in _UNITS:
        raise CampaignError(f"message size {text!r} not understood (e.g. 1024, 64KiB, 1MiB, 4GiB)")
    return int(m.group(1)) * _UNITS[unit]


def size_sweep(spec: str | Sequence[str | int]) -> list[int]:
    """`1MiB..4GiB` -> every power of two from 1 MiB to 4 GiB; a list is taken as given."""
    if isinstance(spec, str) and ".." in spec:
        lo, hi = (parse_size(s) for s in spec.split("..", 1))
        if lo <= 0 or hi < lo:
            raise CampaignError(f"size range {spec!r}: need 0 < low <= high")
        sizes, s = [], lo
        while s <= hi:
            sizes.append(s)
            s *= 2
        return sizes
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    sizes = sorted({parse_size(s) for s in items})
    if not sizes or sizes[0] <= 0:
        raise CampaignError(f"message sizes {spec!r}: need at least one size above 0")
    return sizes


def parse_group(text: str) -> list[int]:
    """`0-3` -> [0, 1, 2, 3]; `0,2,4` -> [0, 2, 4]."""
    try:
        if "-" in text and "," not in text:
            lo, hi = (int(s) for s in text.split("-", 1))
            return list(range(lo, hi + 1))
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise CampaignError(f"GPU group {text!r} not understood (e.g. 0-3 or 0,1,2,3)") from None


def group_label(gpus: Sequence[int]) -> str:
    """[0, 1, 2, 3] -> '0-3'; [0, 2] -> '0,2'."""
    if len(gpus) > 1 and list(gpus) == list(range(gpus[0], gpus[-1] + 1)):
        return f"{gpus[0]}-{gpus[-1]}"
    return ",".join(str(g) for g in gpus)


def auto_groups(n: int) -> list[list[int]]:
    """Each quad that exists (GPUs 0-3, 4-7, ...), then the whole node; no group of one GPU."""
    groups = [list(range(q, q + QUAD)) for q in range(0, n - QUAD + 1, QUAD)]
    whole = list(range(n))
    if n >= 2 and whole not in groups:
        groups.append(whole)
    return groups


def resolve_groups(groups: str | Sequence[Sequence[int]] | None, n: int) -> tuple[list[list[int]], list[str]]:
    """The groups to sweep on a machine of `n` devices, and why any asked-for group was left out."""
    if groups is None or groups == "auto":
        chosen = auto_groups(n)
        return chosen, ([] if chosen else [f"{n} device(s): an all-reduce needs a group of at least 2"])
    if isinstance(groups, str):
        raise CampaignError(f"groups {groups!r}: give 'auto' or lists of GPU indices")
    chosen, skipped = [], []
    for g in groups:
        gpus = parse_group(g) if isinstance(g, str) else [int(i) for i in g]
        label = group_label(gpus)
        if len(gpus) < 2:
            skipped.append(f"group {label}: an all-reduce needs at least 2 GPUs")
        elif len(set(gpus)) != len(gpus):
            skipped.append(f"group {label}: a GPU appears twice")
        elif max(gpus) >= n or min(gpus) < 0:
            skipped.append(f"group {label}: this machine has {n} device(s)")
        elif gpus not in chosen:
            chosen.append(gpus)
    return chosen, skipped
