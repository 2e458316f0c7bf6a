"""The man pages agree with what they describe.

* ``io.github.reachabilityd.Reachability1(5)`` is generated from the
  contract's comments by ``docs/dbus-man.py``: the committed page must be
  what the script makes of the committed XML, and name every member.
* ``reachabilityd(8)`` is written by hand: it must describe every option the
  daemon's ``--help`` lists.

And design.md's map of the modules is the package's graph.
"""

import json
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree

import harness
from conftest import need

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


def test_docs_are_a_reference_not_a_log():
    """docs/ says what is true now, and why, in at most 150 KB; the history of measurements and
    of what changed is Benchmarks/HISTORY.md's."""
    pages = {page.name: page.stat().st_size for page in sorted((REPO / "docs").glob("*.md"))}
    assert sum(pages.values()) <= 150_000, f"docs/*.md is {sum(pages.values()):,} bytes: " + ", ".join(
        f"{name} {size:,}" for name, size in sorted(pages.items(), key=lambda item: -item[1]))


# A prose pointer names a document and a heading in it: a page, a comma and a quoted heading,
# or several joined by "and". Comments split across lines are joined first.
_POINTER = re.compile(r'(README(?:\.md)?|docs/[\w./-]+\.md)(?:\'s)?,?\s+((?:["“][^"”]+["”](?:,?\s+(?:and|or)\s+)?)+)')
_QUOTED = re.compile(r'["“]([^"”]+)["”]')
_CONTINUATION = re.compile(r'[ \t]*\n[ \t]*(?:///?|#|\*|<!--|--)?[ \t]*')


def _headings(markdown: str) -> set:
    """A page's headings and its bold run-in titles (``**Title.** text``), folded."""
    titles = re.findall(r"^#+\s+(.+?)\s*#*$", markdown, re.M)
    titles += re.findall(r"^(?:- )?\*\*(.+?)\*\*", markdown, re.M)
    return {_fold(title) for title in titles}


def _fold(title: str) -> str:
    return re.sub(r"\s+", " ", title.replace("`", "")).strip().rstrip(".:").casefold()


def _tracked_text_files():
    names = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        path = REPO / name
        try:
            yield name, path.read_text()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue


def test_prose_pointers_name_headings_that_exist():
    headings = {}
    wrong = []
    for name, text in _tracked_text_files():
        for line_number, line in enumerate(text.splitlines(), 1):
            if re.search(r"\bSPEC\b|\.\./shared", line):
                wrong.append(f"{name}:{line_number}: names a document outside the repository: {line.strip()}")
        for match in _POINTER.finditer(_CONTINUATION.sub(" ", text)):
            page = "README.md" if match.group(1).startswith("README") else match.group(1)
            if page not in headings:
                target = REPO / page
                headings[page] = _headings(target.read_text()) if target.is_file() else None
            for title in _QUOTED.findall(match.group(2)):
                if headings[page] is None:
                    wrong.append(f"{name}: {match.group(0)!r}: there is no {page}")
                elif _fold(title) not in headings[page]:
                    wrong.append(f"{name}: {match.group(0)!r}: {page} has no heading {title!r}")
    assert not wrong, "\n".join(wrong)


def test_man_pages_render_without_warnings_and_lose_no_words():
    """Each page as ``man --warnings`` renders it at 80 columns says nothing (groff's mdoc and
    man warnings: empty input lines, lines it cannot adjust); reachctl(1)'s description, which
    apropos and whatis show, has no quotes and no full stop; and no text line of it has two
    spaces where a character the generator could not write (an em-dash) was dropped."""
    man = harness.tool("man")
    need([] if man else ["the man command (man-db)"])
    for page in sorted(PAGES.iterdir()):
        done = subprocess.run([man, "--warnings", "-E", "UTF-8", "-l", str(page)], capture_output=True,
                              text=True, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "MANWIDTH": "80"},
                              check=False)
        assert done.returncode == 0 and done.stdout, f"{page.name}: man failed: {done.stderr}"
        assert done.stderr == "", f"{page.name}: {done.stderr}"
    reachctl = (PAGES / "reachctl.1").read_text().splitlines()
    [description] = [line for line in reachctl if line.startswith(".Nd ")]
    assert '"' not in description and not description.endswith("."), description
    dropped = [line for line in reachctl if not line.startswith((".", " ")) and "  " in line]
    assert not dropped, f"text with a dropped character: {dropped}"


# design.md's map: a fenced block ("```modules") of lines "A → B, C" (A depends on B and C)
# or "A ⇢ B" (A talks to B over D-Bus, without linking it); "#" starts a comment line, and a
# parenthesis is a remark. A name ending in "/" is a directory outside the package graph.
_ARROW = re.compile(r"^(?P<left>\S+)\s+(?P<kind>[→⇢])\s+(?P<right>.+)$")


def _design_map():
    """The map's lines as (line number, left, kind, [right names]), from docs/design.md."""
    text = (REPO / "docs" / "design.md").read_text()
    blocks = re.findall(r"^```modules\n(.*?)^```", text, re.M | re.S)
    assert len(blocks) == 1, f"docs/design.md has {len(blocks)} ```modules blocks, not one"
    lines = []
    for number, line in enumerate(blocks[0].splitlines(), 1):
        line = re.sub(r"\([^)]*\)", "", line).strip()
        if not line or line.startswith("#"):
            continue
        match = _ARROW.match(line)
        assert match, f"design.md's map, line {number}: not 'A → B, C' or 'A ⇢ B': {line!r}"
        right = [name.strip() for name in match["right"].split(",") if name.strip()]
        lines.append((number, match["left"], match["kind"], right))
    return lines


def _package_graph() -> dict:
    """Every target of Package.swift but the test targets → the targets and plugins of this
    package it depends on (other packages' products are not in the map)."""
    swift = harness.tool("swift")
    need([] if swift else ["the swift command (swift package dump-package)"])
    # A scratch directory of its own: a build running in the checkout holds .build's lock.
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run([swift, "package", "--scratch-path", scratch, "dump-package"], cwd=REPO,
                              capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    targets = [target for target in json.loads(done.stdout)["targets"] if target["type"] != "test"]
    names = {target["name"] for target in targets}
    graph = {}
    for target in targets:
        needs = set()
        for dependency in target.get("dependencies", []):
            (kind, value), = dependency.items()
            if kind in ("byName", "target") and value[0] in names:
                needs.add(value[0])
        for usage in target.get("pluginUsages") or []:
            (kind, value), = usage.items()
            if kind == "plugin" and value[0] in names and value[1] is None:
                needs.add(value[0])
        graph[target["name"]] = needs
    return graph


def test_design_map_is_the_package_graph():
    """Every arrow of design.md's map is a dependency in Package.swift and every dependency
    between the package's own targets is an arrow; each arrow points down (a target's own line
    comes after every line that names it); the names outside the graph are directories."""
    graph = _package_graph()
    lines = _design_map()
    wrong, drawn, line_of = [], set(), {}
    for number, left, kind, right in lines:
        if left.endswith("/"):
            if not (REPO / left).is_dir():
                wrong.append(f"line {number}: {left} is not a directory of the repository")
            for name in right:
                if name not in graph:
                    wrong.append(f"line {number}: {left} {kind} {name}: {name} is not a target")
            continue
        if kind != "→":
            wrong.append(f"line {number}: {left} {kind} …: only a directory outside the package uses {kind}")
            continue
        if left in line_of:
            wrong.append(f"line {number}: {left} has a line already (line {line_of[left]})")
        line_of[left] = number
        for name in right:
            drawn.add((left, name))
    package = {(target, name) for target, needs in graph.items() for name in needs}
    wrong += [f"missing arrow: {a} → {b} (Package.swift has it)" for a, b in sorted(package - drawn)]
    wrong += [f"extra arrow: {a} → {b} (Package.swift does not have it)" for a, b in sorted(drawn - package)]
    named = {name for arrow in drawn for name in arrow}
    wrong += [f"{name} is not in the map" for name in sorted(set(graph) - named)]
    for a, b in sorted(drawn):
        if b in line_of and a in line_of and line_of[b] < line_of[a]:
            wrong.append(f"{a} → {b} points up: {b}'s line ({line_of[b]}) comes before {a}'s ({line_of[a]})")
    assert not wrong, "docs/design.md's map of the modules and Package.swift differ:\n" + "\n".join(wrong)
