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


# Where resident memory comes from, by the file a mapping is of (first match); anonymous
# memory that is no file's (the heap, thread stacks, the allocators' arenas) is the process's own.
_ORIGINS = (
    ("Swift runtime", ("/libswift", "/libdispatch", "/libBlocksRuntime", "/libFoundation")),
    ("GLib, GIO", ("/libglib-", "/libgio-", "/libgobject-", "/libgmodule-", "/libffi", "/libpcre2", "/libmount",
                   "/libblkid", "/libselinux", "/libz.")),
    ("libnm and its TLS", ("/libnm.", "/libgnutls", "/libp11-kit", "/libnettle", "/libhogweed", "/libgmp",
                           "/libtasn1", "/libidn2", "/libunistring", "/libudev", "/libgcrypt", "/libgpg-error")),
    ("libdbus, libsystemd", ("/libdbus-", "/libsystemd", "/libcap", "/liblzma", "/libzstd", "/liblz4")),
    ("C and C++ runtime", ("/libc.", "/libm.", "/libstdc++", "/libgcc_s", "/ld-linux", "/libresolv", "[vdso]",
                           "[vvar]")),
)


def rss_by_origin(pid, program):
    """``{origin: (resident KiB, of it anonymous KiB)}`` of a process, from /proc/PID/smaps:
    the libraries grouped as ``_ORIGINS`` says, ``program``'s own file (its code and data), the
    anonymous memory of no file (heap, stacks), and ``other`` for what no group names."""
    totals = {}
    origin = "other"
    try:
        lines = Path(f"/proc/{pid}/smaps").read_text().splitlines()
    except OSError:
        return totals
    for line in lines:
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5 and fields[0].replace("-", "").isalnum() \
                and ":" in fields[3]:
            name = " ".join(fields[5:])
            if not name or name in ("[heap]", "[stack]") or name.startswith("[anon"):
                origin = "heap, stacks, anonymous"
            elif Path(name).name == Path(program).name:
                origin = "the daemon's own file"
            else:
                origin = next((label for label, parts in _ORIGINS if any(p in name for p in parts)), "other")
            continue
        if fields and fields[0] in ("Rss:", "Anonymous:"):
            rss, anonymous = totals.get(origin, (0, 0))
            value = int(fields[1])
            totals[origin] = (rss + value, anonymous) if fields[0] == "Rss:" else (rss, anonymous + value)
    return totals


def describe_origins(totals):
    """One line per origin, the largest first, in MiB."""
    return "\n".join(f"  {origin:<26} {rss / 1024:5.1f} MiB resident ({anonymous / 1024:4.1f} MiB anonymous)"
                     for origin, (rss, anonymous) in sorted(totals.items(), key=lambda item: -item[1][0]))


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
