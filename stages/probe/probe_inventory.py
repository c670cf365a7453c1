"""What the node is: the read-only nvidia-smi queries and the driver, CUDA, torch and NCCL versions."""
from __future__ import annotations

import os
import platform
import subprocess
from typing import Any, Mapping, Sequence

from stages.formats.node_smi import parse_gpus_csv

GPU_QUERY = "index,name,uuid,pci.bus_id,memory.total,driver_version,power.limit,clocks.max.sm"
COMMANDS = {
    "gpus.csv": ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv"],
    "topo.txt": ["nvidia-smi", "topo", "-m"],
    "nvlink.txt": ["nvidia-smi", "nvlink", "--status"],
}


def run_command(argv: Sequence[str], env: Mapping[str, str], timeout_s: float = 60.0) -> tuple[int | None, bytes, str | None]:
    """(exit status, stdout+stderr, error) of a read-only query; never raises."""
    try:
        out = subprocess.run(list(argv), env=dict(env), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
    except FileNotFoundError:
        return None, b"", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return None, b"", f"timed out after {timeout_s:.0f} s"
    except OSError as exc:
        return None, b"", f"{type(exc).__name__}: {exc}"
    return out.returncode, out.stdout, None


def versions(gpus_csv: bytes | None) -> dict[str, Any]:
    import torch

    nccl = None
    if torch.cuda.is_available():
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except (AttributeError, RuntimeError):
            nccl = None
    driver = None
    if gpus_csv:
        rows, _ = parse_gpus_csv(gpus_csv)
        driver = next((r.get("driver_version") for r in rows if r.get("driver_version")), None)
    return {"driver": driver, "cuda": torch.version.cuda, "torch": torch.__version__, "nccl": nccl,
            "python": platform.python_version(), "platform": platform.platform(),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0}
