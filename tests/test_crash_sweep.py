"""The crash suite sweeps read-only (EROFS) and full-disk (ENOSPC) faults over ingest's opens and
writes: at a stride, each whole `make reliability` one on from the last, so that SWEEP_STRIDE runs
fault every call with both errors."""
from __future__ import annotations

from stages.tools.faults import crash


def test_the_sweep_faults_every_open_and_write_of_ingest_over_its_stride_of_runs(tmp_path):
    """make reliability sweeps EROFS and ENOSPC over ingest's opens and writes at a stride, each
    run one on from the last (its report.json): over SWEEP_STRIDE runs, every call, both errors."""
    from stages.tools.faults import reliability

    calls = {"open": 509, "write": 46, "fsync": 2}
    stride = crash.LONG["ingest"][6]
    assert stride == crash.SWEEP_STRIDE > 0
    seen = [c for k in range(stride) for c in crash.sweep_counts(calls, stride, k)]
    assert sorted(seen) == sorted((call, n) for call in ("open", "write") for n in range(1, calls[call] + 1))
    assert crash.SWEEP_ERRNOS == ("EROFS", "ENOSPC")
    offsets = []
    for _ in range(stride + 1):
        offsets.append(reliability.next_sweep_offset(tmp_path))
        (tmp_path / "report.json").write_text(
            '{"crash": {"sweep": {"stride": %d, "offset": %d}}}' % (stride, offsets[-1]))
    assert offsets == [*range(stride), 0]
