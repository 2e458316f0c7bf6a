"""The Debian package's own files, read as an archive and an administrator read them
(no build, no root): the licence, the copyright file, the relations, the maintainer
scripts. What the scripts do is tried in a container in test_systemd.py.

* ``LICENSE`` is the Apache License 2.0, word for word (Debian's copy, where there is
  one); ``debian/copyright`` is machine-readable (DEP-5) and names it, with the pointer to
  ``/usr/share/common-licenses/Apache-2.0``.
* NetworkManager is suggested, never recommended or depended on: the service works
  without it, and apt installs recommendations.
* ``preinst`` makes the same users as ``debian/reachabilityd.sysusers`` (it makes them
  before the D-Bus policy that names them is unpacked).
* debhelper's token appears once in each script, on a line of its own.
"""

import re
from pathlib import Path

import harness

REPO = harness.REPO
DEBIAN = REPO / "debian"


def paragraphs(path: Path) -> list:
    """deb822 paragraphs as {field: value}, continuation lines joined with newlines."""
    found, current, field = [], {}, None
    for line in path.read_text().splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if current:
                found.append(current)
            current, field = {}, None
        elif line[0] in " \t" and field:
            current[field] += "\n" + line.strip()
        else:
            field, _, value = line.partition(":")
            current[field] = value.strip()
    return found


def test_license_is_apache_2():
    text = (REPO / "LICENSE").read_text()
    debian = Path("/usr/share/common-licenses/Apache-2.0")
    if debian.exists():
        assert text == debian.read_text(), "LICENSE differs from the Apache License 2.0's text"
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_copyright_is_dep5_and_names_the_license():
    header, *rest = paragraphs(DEBIAN / "copyright")
    assert header["Format"] == "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/", header
    files = [p for p in rest if "Files" in p]
    licenses = {p["License"].split("\n")[0]: p["License"] for p in rest if "Files" not in p}
    assert files and files[0]["Files"] == "*" and files[0]["Copyright"], files
    assert files[0]["License"] == "Apache-2.0", files
    assert "/usr/share/common-licenses/Apache-2.0" in licenses.get("Apache-2.0", ""), licenses
    assert "UNSTATED" not in (DEBIAN / "copyright").read_text()


def test_networkmanager_is_only_suggested():
    _, binary = paragraphs(DEBIAN / "control")[:2]
    for field in ("Depends", "Pre-Depends", "Recommends"):
        assert "network-manager" not in binary.get(field, ""), f"{field}: {binary.get(field)}"
    assert "network-manager" in binary.get("Suggests", ""), binary


def users(text: str) -> list:
    return [line.split()[:2] for line in text.splitlines() if re.match(r"^\s*[ugmr]\s", line)]


def test_preinst_makes_the_sysusers_users():
    declared = users((DEBIAN / "reachabilityd.sysusers").read_text())
    preinst = (DEBIAN / "reachabilityd.preinst").read_text()
    assert declared and users(preinst) == declared, (users(preinst), declared)
    assert (REPO / "data" / "reachabilityd.sysusers.conf").read_text() == (
        DEBIAN / "reachabilityd.sysusers").read_text()


def test_debhelper_token_once_on_its_own_line():
    for script in sorted(DEBIAN.glob("reachabilityd.p*")):
        if script.suffix not in (".preinst", ".postinst", ".prerm", ".postrm"):
            continue
        text = script.read_text()
        assert text.count("#DEBHELPER#") == 1, script.name
        assert "\n#DEBHELPER#\n" in text, f"{script.name}: the token must be a line of its own"
