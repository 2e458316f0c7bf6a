#!/usr/bin/env python3
"""Regenerates the figures README.md keeps (between its "figures" markers),
measured, never copied by hand:

* the installed sizes of reachabilityd and reachctl: the release build with
  the static Swift runtime (install.sh's, in .build-static; built first if
  missing), stripped as install.sh installs them;
* systemd-analyze security's exposure of reachabilityd.service, as the
  container test measured it (.build/deb/security-*.txt), when present.

    docs/figures.py          # rewrites the block in README.md
    docs/figures.py --print  # prints it
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN, END = "<!-- figures: begin -->", "<!-- figures: end -->"


def stripped_size(binary: Path) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / binary.name
        subprocess.run(["strip", "-o", str(out), str(binary)], check=True)
        return out.stat().st_size


def release_binaries() -> dict:
    flags = ["-c", "release", "--static-swift-stdlib", "--scratch-path", ".build-static"]
    bin_dir = Path(subprocess.run(["swift", "build", *flags, "--show-bin-path"], cwd=ROOT, capture_output=True,
                                  text=True, check=True).stdout.strip())
    found = {}
    for product in ("reachabilityd", "reachctl"):
        if not (bin_dir / product).exists():
            subprocess.run(["swift", "build", *flags, "--product", product], cwd=ROOT, check=True)
        found[product] = bin_dir / product
    return found


def block() -> str:
    rows = ["| figure | value | measured by |", "|---|---|---|"]
    for product, path in release_binaries().items():
        size = stripped_size(path) / 1e6
        rows.append(f"| `{product}` installed (stripped, Swift runtime linked in) | {size:.1f} MB | `docs/figures.py` |")
    for report in sorted((ROOT / ".build" / "deb").glob("security-*.txt")):
        match = re.search(r"Overall exposure level for reachabilityd.service: ([0-9.]+)", report.read_text())
        if match:
            bus = report.stem.removeprefix("security-")
            rows.append(f"| `systemd-analyze security reachabilityd.service` ({bus}) | {match[1]} |"
                        " `Tests/Integration/test_systemd.py` |")
    return "\n".join(rows)


def main() -> int:
    text = block()
    if sys.argv[1:] == ["--print"]:
        print(text)
        return 0
    readme = README.read_text()
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    README.write_text(readme[:start] + "\n" + text + "\n" + readme[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
