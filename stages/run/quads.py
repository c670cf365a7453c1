"""The node's two quads of GPUs: 0-3 and 4-7, each four GPUs with full peer links among them.
The scheduler places quad-sized specs on one quad each; a run whose GPUs span both has its peer
access checked first."""
from __future__ import annotations

QUADS: tuple[tuple[int, ...], ...] = ((0, 1, 2, 3), (4, 5, 6, 7))
QUAD_SIZE = 4


def spans_quads(gpus: list[int]) -> bool:
    """Whether a GPU set has GPUs on both quads."""
    return all(any(g in quad for g in gpus) for quad in QUADS)
