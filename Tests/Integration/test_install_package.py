"""The Debian package's own files, read as an archive and an administrator read them
(no build, no root): the licence, the copyright file, the relations, the maintainer
scripts. What the scripts do is tried in a container in test_systemd.py.

* ``LICENSE`` is the Apache License 2.0, word for word (Debian's copy, where there is
  one); ``debian/copyright`` is machine-readable (DEP-5) and names it, with the pointer to
  ``/usr/share/common-licenses/Apache-2.0``.
* The GIO module is a package of its own, which the daemon's only suggests (it changes every
  GLib program's network monitor).
* NetworkManager is suggested, never recommended or depended on: the service works
  without it, and apt installs recommendations.
* ``preinst`` makes the same users as ``debian/reachabilityd.sysusers`` (it makes them
  before the D-Bus policy that names them is unpacked).
* debhelper's token appears once in each script, on a line of its own.
* prerm and postrm name every unit the package ships (data/'s units, which install.sh installs
  and debian/reachabilityd.install ships), and postrm the writer's file where its unit puts it.
* The scripts, with debhelper's parts as debian/rules makes them, run against a recording
  systemctl: an upgrade stops nothing and try-restarts the services only (never a target),
  an install starts nothing, removal stops and disables every unit (wait@ instances included)
  and deletes the stopped writer's file, purge too (test_systemd.py does it with systemd).
"""

import re
import subprocess
from pathlib import Path

import harness
from conftest import need

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

    # A stanza per origin: each Swift dependency (Package.swift's, and what they bring: the
    # checkouts of a build) under vendor/, with a licence paragraph for each licence named, the
    # NOTICE files the Apache License asks to be carried, and what the toolchain adds to the
    # binaries (its runtime, and ICU in libreachability-sc1).
    stanzas = {p["Files"]: p for p in files}
    dependencies = set(re.findall(r'\.package\(url: "[^"]*/([^/"]+?)(?:\.git)?"', (REPO / "Package.swift").read_text()))
    checkouts = REPO / ".build" / "checkouts"
    if checkouts.is_dir():
        dependencies |= {d.name for d in checkouts.iterdir() if d.is_dir()}
    assert dependencies, "no dependency found in Package.swift"
    text = (DEBIAN / "copyright").read_text()
    for name in sorted(dependencies):
        stanza = stanzas.get(f"vendor/{name}/*")
        assert stanza and stanza["Copyright"], f"no Files: vendor/{name}/* stanza in debian/copyright"
        assert stanza["License"] in licenses, f"{name}: no paragraph for {stanza['License']}"
        notice = checkouts / name / "NOTICE.txt"
        if notice.exists():
            first = next(line.strip() for line in notice.read_text().splitlines() if line.startswith("Copyright"))
            assert first in text, f"{name}'s NOTICE.txt ({first!r}) is not carried in debian/copyright"
    for name in header["License"].split(" and "):
        assert name in licenses, f"the header's {name} has no licence paragraph"
    assert "lib_FoundationICU.so" in header.get("Comment", "") and "Unicode-3.0" in licenses, header


def test_networkmanager_is_only_suggested():
    _, binary = paragraphs(DEBIAN / "control")[:2]
    for field in ("Depends", "Pre-Depends", "Recommends"):
        assert "network-manager" not in binary.get(field, ""), f"{field}: {binary.get(field)}"
    assert "network-manager" in binary.get("Suggests", ""), binary


def test_the_gio_module_is_a_package_of_its_own():
    """Installing the service does not change every GLib program's network monitor: the GIO
    module is reachabilityd-gio-module's (which depends on the service, takes the file over
    from the daemon's package before 0.2.0, and is only suggested by it), and no file of the
    daemon's package lies in GIO's module directory."""
    packages = {p["Package"]: p for p in paragraphs(DEBIAN / "control")[1:]}
    module = packages.get("reachabilityd-gio-module")
    assert module, f"no reachabilityd-gio-module in debian/control: {sorted(packages)}"
    assert "reachabilityd (= ${binary:Version})" in module["Depends"], module["Depends"]
    for field in ("Breaks", "Replaces"):
        assert "reachabilityd (<< 0.2.0)" in module.get(field, ""), f"{field}: {module.get(field)}"
    daemon = packages["reachabilityd"]
    for field in ("Depends", "Pre-Depends", "Recommends"):
        assert "gio-module" not in daemon.get(field, ""), f"reachabilityd {field}: {daemon.get(field)}"
    assert "reachabilityd-gio-module" in daemon.get("Suggests", ""), daemon
    assert "gio" not in (DEBIAN / "reachabilityd.install").read_text()
    assert (DEBIAN / "reachabilityd-gio-module.install").read_text().split() == ["usr/lib/*/gio"]


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


# --- the units: removal stops and disables every one, an upgrade restarts what ran ----------

UNIT_SUFFIXES = (".service", ".socket", ".target", ".timer", ".path", ".mount")
WRITER_UNIT = REPO / "data" / "reachabilityd-metrics-textfile.service"


def shipped_units() -> list:
    """The units the package ships: data/'s unit files. install.sh installs them in
    lib/systemd/system (its units=() list must be the same) and debian/reachabilityd.install
    ships that directory whole."""
    data = sorted(path.name for path in (REPO / "data").iterdir() if path.suffix in UNIT_SUFFIXES)
    listed = re.search(r"(?ms)^units=\((.*?)\)", (REPO / "install.sh").read_text())
    assert listed, "install.sh has no units=(...) list"
    assert sorted(listed[1].split()) == data, f"install.sh installs {sorted(listed[1].split())}, data/ has {data}"
    assert "lib/systemd" in (DEBIAN / "reachabilityd.install").read_text().split(), \
        "debian/reachabilityd.install does not ship lib/systemd"
    return data


def services(units: list) -> list:
    """The units that run a program and are not templates: what an upgrade restarts when it runs."""
    return sorted(unit for unit in units if unit.endswith(".service") and "@" not in unit)


def names(text: str, unit: str) -> bool:
    """Whether a script names ``unit`` (a template: by the pattern its instances are listed with)."""
    if "@" in unit:
        unit = unit.replace("@.", "@*.")
    return re.search(rf"(?<![\w@.*-]){re.escape(unit)}(?![\w.*-])", text) is not None


def test_removal_scripts_name_every_unit_the_package_ships():
    """prerm stops and disables, and postrm stops again, every unit in data/ (a template's loaded
    instances by their pattern); postrm deletes the writer's file where its unit puts it."""
    units = shipped_units()
    assert len(units) >= 6, units
    for script in ("prerm", "postrm"):
        text = (DEBIAN / f"reachabilityd.{script}").read_text()
        missing = [unit for unit in units if not names(text, unit)]
        assert not missing, f"reachabilityd.{script} does not name {missing}"
    prerm = (DEBIAN / "reachabilityd.prerm").read_text()
    for template in (unit for unit in units if "@" in unit):
        assert re.search(rf"(?<![\w@.*-]){re.escape(template)}(?![\w.*-])", prerm), \
            f"prerm does not disable {template} (links to its instances)"
    assert re.search(r"deb-systemd-invoke stop", prerm) and re.search(r"systemctl .*disable", prerm), prerm
    [default] = re.findall(r"(?m)^Environment=TEXTFILE=(\S+)$", WRITER_UNIT.read_text())
    postrm = (DEBIAN / "reachabilityd.postrm").read_text()
    assert f"textfile={default}\n" in postrm, f"postrm does not delete the writer's file at {default}"


STUB = r"""#!/bin/sh
# Records its call; answers what the maintainer scripts ask systemctl.
name=${0##*/}
echo "$name $*" >>"$STUB_LOG"
case "$name $1" in
    "systemctl list-units")
        echo "  reachability-wait@internet.service loaded active exited Wait until internet is reachable"
        printf '\342\227\217 reachability-wait@example.com.service loaded failed failed Wait until example.com is reachable\n' ;;
    "systemctl show")
        case "$3" in
            Environment) echo "TEXTFILE=$STUB_TEXTFILE" ;;
            ActiveState) case " $STUB_ACTIVE " in *" $4 "*) echo active ;; *) echo inactive ;; esac ;;
        esac ;;
    "deb-systemd-helper was-enabled"|"deb-systemd-helper debian-installed") exit 1 ;;
esac
exit 0
"""

STOPPED_FILE = "reachctl_textfile_writer_up 0\nreachctl_textfile_writer_stopped_timestamp_seconds 1\n"


class Scripts:
    """The package's maintainer scripts with debhelper's parts as debian/rules' own
    override_dh_installsystemd makes them (run in a copy of debian/ and data/, the units where
    dh_install puts them), run with sh against a recording systemctl, deb-systemd-invoke and
    deb-systemd-helper. The two paths of this machine they read are moved into the test's
    directory: systemd's runtime directory (it "runs") and node_exporter's textfile directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.stubs = root / "bin"
        self.stubs.mkdir()
        for tool in ("systemctl", "deb-systemd-invoke", "deb-systemd-helper"):
            (self.stubs / tool).write_text(STUB)
            (self.stubs / tool).chmod(0o755)
        (root / "run-systemd-system").mkdir()
        self.textfiles = root / "node-exporter"
        self.textfiles.mkdir()
        self.log = root / "calls.log"
        work = root / "source"
        (work / "debian").mkdir(parents=True)
        for name in ("control", "changelog", "rules"):
            (work / "debian" / name).write_bytes((DEBIAN / name).read_bytes())
        (work / "debian" / "rules").chmod(0o755)
        units_dir = work / "debian" / "reachabilityd" / "lib" / "systemd" / "system"
        units_dir.mkdir(parents=True)
        (work / "data").mkdir()
        for unit in shipped_units():
            (work / "data" / unit).write_bytes((REPO / "data" / unit).read_bytes())
            (units_dir / unit).write_bytes((REPO / "data" / unit).read_bytes())
        made = subprocess.run(["make", "-f", "debian/rules", "override_dh_installsystemd"], cwd=work,
                              capture_output=True, text=True, timeout=120, check=False)
        assert made.returncode == 0, f"debian/rules override_dh_installsystemd:\n{made.stdout}{made.stderr}"
        generated = work / "debian" / ".debhelper" / "generated" / "reachabilityd"
        self.scripts = {}
        for script in ("postinst", "prerm", "postrm"):
            parts = [work / "debian" / f"reachabilityd.{script}.debhelper", generated / f"{script}.service"]
            debhelper = "".join(part.read_text() for part in parts if part.exists())
            text = (DEBIAN / f"reachabilityd.{script}").read_text().replace("#DEBHELPER#", debhelper)
            for machine, here in (("/run/systemd/system", root / "run-systemd-system"),
                                  ("/var/lib/prometheus/node-exporter", self.textfiles),
                                  ("/usr/bin/deb-systemd-helper", self.stubs / "deb-systemd-helper")):
                text = text.replace(machine, str(here))
            self.scripts[script] = text
        self.debhelper_postinst = "".join(part.read_text() for part in
                                          (work / "debian" / "reachabilityd.postinst.debhelper",
                                           generated / "postinst.service") if part.exists())

    def run(self, script: str, *arguments: str, active: str = "", textfile: Path | None = None,
            dpkg_root: Path | None = None) -> list:
        """The calls ``script arguments`` made, as lines "tool arguments"."""
        self.log.write_text("")
        path = self.root / f"reachabilityd.{script}"
        path.write_text(self.scripts[script])
        env = {"PATH": f"{self.stubs}:/usr/bin:/bin", "LANG": "C.UTF-8", "STUB_LOG": str(self.log),
               "STUB_ACTIVE": active, "STUB_TEXTFILE": str(textfile or self.textfiles / "reachability.prom"),
               "DPKG_MAINTSCRIPT_PACKAGE": "reachabilityd", "DPKG_MAINTSCRIPT_NAME": script}
        if dpkg_root is not None:
            env["DPKG_ROOT"] = str(dpkg_root)
        done = subprocess.run(["sh", str(path), *arguments], env=env, capture_output=True, text=True,
                              timeout=30, check=False)
        assert done.returncode == 0, f"{script} {' '.join(arguments)}: {done.returncode}\n{done.stdout}{done.stderr}"
        return self.log.read_text().splitlines()


def verbs(calls: list, tool: str, verb: str) -> list:
    """The units of each call of ``tool`` with ``verb`` (options dropped)."""
    found = []
    for line in calls:
        words = line.split()
        if words[0] == tool and verb in words:
            found.append(sorted(word for word in words[words.index(verb) + 1:] if not word.startswith("-")))
    return found


def test_maintainer_scripts_stop_disable_and_restart_the_right_units(tmp_path):
    """What each script asks systemd, as dpkg runs it:
    * upgrade (prerm upgrade, postinst configure OLD): prerm stops nothing; postinst reloads and
      try-restarts the package's services only (exactly those that run; no target, whose restart
      would restart what is bound to it), and starts nothing;
    * install (postinst configure): nothing started, nothing restarted;
    * remove (prerm remove): one stop of every unit and of the loaded reachability-wait@ instances,
      one disable of every unit file, and the writer's file deleted where its unit names it (only
      if the writer wrote it); deconfigure stops only;
    * postrm remove: what still (or again) runs is stopped, the file at its default place deleted;
      purge deletes it too and purges debhelper's enablement state;
    * with DPKG_ROOT (no running systemd to ask): the disable and the deletion under that root."""
    for tool in ("make", "dh_installsystemd"):
        need([] if harness.tool(tool) else [f"the {tool} command (debhelper)"])
    units = shipped_units()
    plain = [unit for unit in units if "@" not in unit]
    instances = ["reachability-wait@example.com.service", "reachability-wait@internet.service"]
    scripts = Scripts(tmp_path)
    assert "try-restart" in scripts.debhelper_postinst, scripts.debhelper_postinst

    calls = scripts.run("prerm", "upgrade", "0.1.0")
    assert not verbs(calls, "deb-systemd-invoke", "stop") and not verbs(calls, "systemctl", "disable"), calls
    calls = scripts.run("postinst", "configure", "0.1.0")
    invoked = [line for line in calls if line.startswith("deb-systemd-invoke ")]
    assert invoked == ["deb-systemd-invoke try-restart " + " ".join(services(units))], \
        f"an upgrade must try-restart exactly {services(units)}: {invoked}"
    assert "systemctl --system daemon-reload" in calls, calls
    calls = scripts.run("postinst", "configure", "")
    assert not [line for line in calls if line.startswith("deb-systemd-invoke ")], calls
    assert not verbs(calls, "systemctl", "start") and not verbs(calls, "systemctl", "enable"), calls

    custom = tmp_path / "elsewhere" / "reachability.prom"
    custom.parent.mkdir()
    custom.write_text(STOPPED_FILE)
    default = scripts.textfiles / "reachability.prom"
    default.write_text(STOPPED_FILE)
    calls = scripts.run("prerm", "deconfigure", textfile=custom)
    assert verbs(calls, "deb-systemd-invoke", "stop") == [sorted(plain + instances)], calls
    assert not verbs(calls, "systemctl", "disable") and custom.exists(), calls
    calls = scripts.run("prerm", "remove", textfile=custom)
    assert verbs(calls, "deb-systemd-invoke", "stop") == [sorted(plain + instances)], calls
    assert verbs(calls, "systemctl", "disable") == [sorted(units)], calls
    assert not custom.exists(), "prerm remove left the stopped writer's file where its unit put it"
    assert default.exists(), "prerm deleted a file its unit does not name"
    custom.write_text("node_load1 0.5\n")
    scripts.run("prerm", "remove", textfile=custom)
    assert custom.exists(), "prerm deleted a file the writer did not write"

    calls = scripts.run("postrm", "remove", active="reachabilityd.service reachability-wait@internet.service")
    assert verbs(calls, "deb-systemd-invoke", "stop") == [["reachability-wait@internet.service", "reachabilityd.service"]], calls
    assert "systemctl --system daemon-reload" in calls, calls
    assert not default.exists(), "postrm remove left the stopped writer's file"
    calls = scripts.run("postrm", "remove")
    assert not verbs(calls, "deb-systemd-invoke", "stop"), f"postrm stopped units that do not run: {calls}"
    default.write_text(STOPPED_FILE)
    calls = scripts.run("postrm", "purge")
    assert not default.exists(), "postrm purge left the stopped writer's file"
    assert any(line.startswith("deb-systemd-helper purge ") for line in calls), calls
    assert not verbs(calls, "deb-systemd-invoke", "stop"), calls

    root = tmp_path / "dpkg-root"
    calls = scripts.run("prerm", "remove", dpkg_root=root)
    assert not [line for line in calls if line.startswith("deb-systemd-invoke ")], calls
    assert verbs(calls, "systemctl", "disable") == [sorted(units)], calls
    assert f"--root={root}" in " ".join(calls), calls
    inside = Path(f"{root}{default}")
    inside.parent.mkdir(parents=True)
    inside.write_text(STOPPED_FILE)
    scripts.run("postrm", "remove", dpkg_root=root)
    assert not inside.exists(), "postrm remove with DPKG_ROOT left the writer's file under it"


def changelog_versions(text: str) -> list:
    """(version, change lines) of each entry of a debian/changelog, newest first."""
    entries = []
    for block in re.split(r"^(?=reachabilityd \()", text, flags=re.M):
        header = re.match(r"reachabilityd \(([^)]+)\)", block)
        if header:
            entries.append((header.group(1), re.findall(r"^  \* ", block, flags=re.M)))
    return entries


def newer(version: str, than: str) -> bool:
    return subprocess.run(["dpkg", "--compare-versions", version, "gt", than], check=False).returncode == 0


def test_the_version_moves_forward_and_says_what_changed():
    """apt offers a build as an upgrade only when its version is greater: the package's version
    (debian/changelog's first entry) is the service's own (ServiceNames.version: what
    ``reachabilityd --version``, the Manager's Version property and the pkg-config file say),
    every entry says what changed and is newer than the one below it, and, in a git checkout,
    the first entry is newer than every version an earlier debian/changelog was released as."""
    need([] if harness.tool("dpkg") else ["the dpkg command"])
    entries = changelog_versions((DEBIAN / "changelog").read_text())
    assert len(entries) >= 2, f"debian/changelog has no entry below {entries}: no release after the first"
    version = entries[0][0]
    service = re.search(r'static let version = "([^"]+)"',
                        (REPO / "Sources/ReachabilityCore/ServiceNames.swift").read_text()).group(1)
    assert version.split("-")[0] == service, f"debian/changelog says {version}, ServiceNames.version {service}"
    for (upper, changes), (lower, _) in zip(entries, entries[1:]):
        assert changes, f"the entry of {upper} names no change"
        assert newer(upper, lower), f"{upper} is not newer than the entry below it, {lower}"
    if not (REPO / ".git").exists() or harness.tool("git") is None:
        return
    commits = subprocess.run(["git", "log", "--format=%H", "--", "debian/changelog"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    released = set()
    for commit in commits:
        shown = subprocess.run(["git", "show", f"{commit}:debian/changelog"], cwd=REPO,
                               capture_output=True, text=True, check=False)
        if shown.returncode == 0 and changelog_versions(shown.stdout):
            released.add(changelog_versions(shown.stdout)[0][0])
    older = sorted(v for v in released if v != version)
    assert all(newer(version, v) for v in older), f"{version} is not newer than every released version: {older}"
