"""The node probe's environment: NVLink multicast forced off, and the variables env.json records."""
from __future__ import annotations

import contextlib
import os
from typing import Iterator, Mapping

# Forced in the probe's environment and in every child's: NVLink multicast off everywhere.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ENV_PREFIXES = ("NCCL_", "CUDA_", "TORCH_SYMM_MEM_", "NVSHMEM_")


def safe_env(base: Mapping[str, str]) -> dict[str, str]:
    """`base` with NVLink multicast switched off; every other variable kept as it is."""
    return {**base, **SAFE_ENV}


def recorded_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables env.json keeps: NCCL_*, CUDA_* and the multicast switches."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES)}


@contextlib.contextmanager
def forced_env(values: Mapping[str, str]) -> Iterator[dict[str, str | None]]:
    """Set `values` in os.environ (children inherit them) and restore the old ones afterwards.
    Yields what each variable was before."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield before
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
