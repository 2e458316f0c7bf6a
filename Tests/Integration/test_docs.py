"""The man pages agree with what they describe.

* ``io.github.reachabilityd.Reachability1(5)`` is generated from the
  contract's comments by ``docs/dbus-man.py``: the committed page must be
  what the script makes of the committed XML, and name every member.
* ``reachabilityd(8)`` is written by hand: it must describe every option the
  daemon's ``--help`` lists.
"""

import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import harness

REPO = harness.REPO
PAGES = REPO / "docs" / "man"


def test_dbus_page_is_generated_from_the_xml():
    done = subprocess.run([sys.executable, str(REPO / "docs" / "dbus-man.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    page = (PAGES / f"{harness.SERVICE}.5").read_text()
    for interface in ElementTree.parse(harness.CONTRACT_XML).getroot().findall("interface"):
        assert f"INTERFACE {interface.get('name')}".replace("-", "\\-") in page
        for member in interface:
            assert member.get("name") in page, f"{interface.get('name')}.{member.get('name')} is not in the page"


def test_daemon_page_describes_every_option():
    usage = subprocess.run([str(harness.daemon_binary()), "--help"], capture_output=True, text=True,
                           check=True).stdout
    options = set(re.findall(r"--[a-z][a-z-]+", usage))
    page = (PAGES / "reachabilityd.8").read_text().replace("\\-", "-")
    missing = sorted(option for option in options if option not in page)
    assert not missing, f"reachabilityd.8 does not describe {missing}"
    for section in ("OPTIONS", "SIGNALS", "ENVIRONMENT", "FILES", "EXIT STATUS"):
        assert f".SH {section}" in page


def _anchors(markdown: str) -> set:
    anchors = set()
    for heading in re.findall(r"(?m)^#{1,6} (.*)$", markdown):
        text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
        anchors.add(text.replace(" ", "-"))
    return anchors


def test_readme_is_short_and_its_links_resolve():
    """README.md is what a newcomer reads in minutes (at most 25 KB); the rest is in docs/,
    and every relative link of the README and of docs/*.md reaches a file and a heading."""
    readme = REPO / "README.md"
    assert readme.stat().st_size <= 25_000, f"README.md is {readme.stat().st_size} bytes"
    for page in [readme, *sorted((REPO / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            assert file.exists(), f"{page.name}: link to {target}: no such file"
            if anchor:
                assert anchor in _anchors(file.read_text()), f"{page.name}: link to {target}: no such heading"
