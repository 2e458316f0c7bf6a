"""Process figures the benchmarks share: resident memory, context switches, percentiles."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "Tests" / "Integration"))
import harness  # noqa: E402


def rss_kb(pid):
    """VmRSS of a process, in KiB (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def thread_switches(pid):
    """``{thread id: voluntary plus involuntary context switches}`` of a process (the tests' reading)."""
    return harness.thread_wakeups(pid)


def idle_wakeups(before, after):
    """Wake-ups between two ``thread_switches`` readings: those of the threads alive at both,
    plus one for each thread that started or ended in between."""
    kept = sum(after[t] - before[t] for t in before.keys() & after.keys())
    return kept + len(before.keys() ^ after.keys())


def context_switches(pid):
    """Voluntary plus involuntary context switches of every thread of a process: its wake-ups."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total


def pct(values, p):
    """The p-th percentile (nearest rank) of ``values``."""
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]
