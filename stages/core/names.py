"""Names params.yaml gives that become file names, run ids and shell words, the maximum context a
spec sets (its run id names it), and where the stages' locks live: what reading and checking
params both need."""
from __future__ import annotations

import re
from typing import Any

LOCK_DIR = "data/.locks"        # the stages' write locks (stages/core/locks.py), relative to the root
# A name that becomes part of a file name, a run id or a shell word: letters, digits, '.', '_', '-',
# not starting with '.' or '-', no '..'. Run-id fields also may not hold '__' (the id's separator).
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

def max_context(spec: dict[str, Any]) -> Any:
    """The server's maximum context a spec sets (vLLM's --max-model-len, SGLang's --context-length)."""
    args = spec.get("args") or {}
    return args.get("--max-model-len") or args.get("--context-length")


def ctx_label(max_model_len: int) -> str:
    """A maximum context as a run id names it: whole multiples of 1,024 tokens (1048576 -> '1024k')."""
    return f"{max_model_len // 1024}k"
