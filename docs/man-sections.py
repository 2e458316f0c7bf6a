#!/usr/bin/env python3
"""Gives reachctl(1), as swift-argument-parser's generate-manual writes it, the sections a man page needs.

The plugin ends every page with ``.Sh "EXIT STATUS"`` and ``.Ex -std`` ("exits 0 on success, and >0
if an error occurs"), which contradicts reachctl's own codes (1 means "not reachable", not an
error), and it writes no FILES or SEE ALSO. This replaces the one and adds the others, before
AUTHORS. Also tidies what mdoc warns of (``tidied``). Run by docs/generate.sh; idempotent.

    docs/man-sections.py docs/man/reachctl.1
"""

import sys
from pathlib import Path

EXIT_STATUS = """.Sh "EXIT STATUS"
.Bl -tag -width 3n
.It 0
Every target is reachable
.Pf ( Em wait :
reached).
.It 1
A target is not reachable, or its reachability is unknown
.Pf ( Em wait :
timed out; each target not reached is named on standard error with its reason).
.It 2
Usage error, invalid target, or the service failed
.Pf ( Em doctor :
the service does not work).
.El
"""

FILES = """.Sh FILES
.Bl -tag -width 6n
.It Pa /usr/lib/systemd/system/reachability-wait@.service
Waits for its instance (a target) with
.Nm
.Em wait .
.It Pa /usr/lib/systemd/system/reachability-online.target , Pa reachability-unmetered.target
Started and stopped by
.Pa reachabilityd-units.service
.Pf ( Nm
.Em follow-units ) .
.It Pa /usr/lib/systemd/system/reachabilityd-metrics-textfile.service
Runs
.Nm
.Em metrics Fl -textfile ;
its file is
.Pa /var/lib/prometheus/node-exporter/reachability.prom .
That directory is node_exporter's textfile collector's (its package makes it, root's, mode 755)
and must be writable by the unit's user:
.Dl setfacl -m u:reachabilityd-metrics:rwx /var/lib/prometheus/node-exporter
.El
"""

SEE_ALSO = """.Sh "SEE ALSO"
.Xr reachabilityd 8 ,
.Xr io.github.reachabilityd.Reachability1 5 ,
.Xr busctl 1 ,
.Xr gdbus 1 ,
.Xr nm-online 1 ,
.Xr systemd-networkd-wait-online 8
"""


def tidied(page: str) -> str:
    """What mdoc and apropos object to in the plugin's page: an empty input line (mdoc warns;
    the plugin writes one between a discussion's paragraphs) becomes ``.Pp``, and the
    description (``.Nd``, which apropos and whatis show) loses its quotes and full stop."""
    lines = []
    for line in page.split("\n"):
        if line.startswith(".Nd "):
            line = ".Nd " + line[4:].strip().strip('"').rstrip(".")
        if line == "" and lines and lines[-1] != ".Pp":
            line = ".Pp"
        lines.append(line)
    while lines and lines[-1] in ("", ".Pp"):
        lines.pop()
    return "\n".join(lines) + "\n"


def fixed(page: str) -> str:
    page = tidied(page)
    if '.Sh "SEE ALSO"' in page:
        return page
    generated = '.Sh "EXIT STATUS"\n.Ex -std\n'
    if generated not in page or ".Sh AUTHORS\n" not in page:
        raise SystemExit("man-sections: the generated page has no .Ex -std or AUTHORS section: check the plugin")
    page = page.replace(generated, "")
    return page.replace(".Sh AUTHORS\n", EXIT_STATUS + FILES + SEE_ALSO + ".Sh AUTHORS\n")


if __name__ == "__main__":
    path = Path(sys.argv[1])
    path.write_text(fixed(path.read_text()))
