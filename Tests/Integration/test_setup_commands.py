"""README's set-up commands, as a newcomer runs them on a fresh machine as
root with no sudo (README, "Quick start").

* The test command in README is exactly what ``.ci/run`` executes, and
  neither needs sudo.
* ``Tests/test-all.sh`` without ``swift`` on PATH says so, before it installs
  anything.
* Installing the test packages starts and enables nothing on the host: run
  against stand-ins for apt-get, dpkg-query, deb-systemd-helper and
  systemctl, in a mount namespace whose /usr/sbin is a scratch directory,
  the script's policy-rc.d forbids every start while apt-get runs, the
  previous policy-rc.d (or none) is back afterwards, and the NetworkManager
  and Prometheus units the packages enabled are disabled again.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import harness

REPO = harness.REPO
TEST_ALL = REPO / "Tests" / "test-all.sh"


def readme_code_lines():
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```(?:sh|console)?\n(.*?)```", text, re.S)
    return [line.strip() for block in blocks for line in block.splitlines()]


def test_readme_test_command_is_what_ci_runs():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    [command] = [line.removeprefix("exec ").strip() for line in ci if line.startswith("exec ")]
    assert command == "Tests/test-all.sh"
    assert command in readme_code_lines()
    assert os.access(TEST_ALL, os.X_OK)
    setup = (REPO / "README.md").read_text().split("## Quick start", 1)[1].split("\n### ", 1)[0]
    assert "sudo" not in "\n".join(re.findall(r"```sh\n(.*?)```", setup, re.S))


def stub_bin(directory: Path, tools: dict) -> Path:
    """A directory of commands: the named system tools linked in, the stubs written."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("bash", "sh", "env", "id", "dirname", "grep", "mktemp", "cp", "mv", "rm", "chmod", "cat",
                 "mount", "printf"):
        found = harness.tool(name)
        if found:
            (directory / name).symlink_to(found)
    for name, script in tools.items():
        (directory / name).write_text("#!/bin/sh\n" + script)
        (directory / name).chmod(0o755)
    return directory


def test_test_all_without_swift_says_so_before_installing(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (the script checks for it first)")
    calls = tmp_path / "calls"
    path = stub_bin(tmp_path / "bin", {"apt-get": f'echo "apt-get $*" >> {calls}\n',
                                       "dpkg-query": "exit 1\n"})
    result = subprocess.run([str(TEST_ALL)], capture_output=True, text=True, timeout=60, check=False,
                            env={"PATH": str(path), "HOME": str(tmp_path)})
    assert result.returncode == 2, result
    assert "swift is not on PATH" in result.stderr and "sudo env PATH" in result.stderr, result.stderr
    assert not calls.exists(), calls.read_text()


APT_GET = """echo "apt-get $*" >> {calls}
if [ "$1" = install ]; then
    /usr/sbin/policy-rc.d network-manager start
    echo "policy-rc.d start: $?" >> {calls}
    /usr/sbin/policy-rc.d dnsmasq restart
    echo "policy-rc.d restart: $?" >> {calls}
fi
"""


@pytest.mark.parametrize("previous", [None, "#!/bin/sh\n# the machine's own\nexit 0\n"], ids=["none", "the-machines-own"])
def test_installing_the_test_packages_starts_and_enables_nothing(tmp_path, previous):
    if os.geteuid() != 0:
        pytest.skip("needs root (a mount namespace)")
    harness.need_tool("unshare")
    calls = tmp_path / "calls"
    path = stub_bin(tmp_path / "bin", {
        "apt-get": APT_GET.format(calls=calls),
        # Everything is missing.
        "dpkg-query": "exit 1\n",
        "deb-systemd-helper": f'echo "deb-systemd-helper $*" >> {calls}\n',
        "systemctl": f'echo "systemctl $*" >> {calls}\n',
    })
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    if previous is not None:
        (sbin / "policy-rc.d").write_text(previous)
        (sbin / "policy-rc.d").chmod(0o755)
    script = 'mount --bind "$1" /usr/sbin && exec "$2" --install-only'
    result = subprocess.run(
        [harness.need_tool("unshare"), "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script,
         "sh", str(sbin), str(TEST_ALL)],
        capture_output=True, text=True, timeout=60, check=False, env={"PATH": str(path), "HOME": str(tmp_path)})
    assert result.returncode == 0, result
    log = calls.read_text().splitlines()
    assert log[0] == "apt-get update -q", log
    assert log[1].startswith("apt-get install -y -q --no-install-recommends "), log
    assert "network-manager" in log[1].split() and "dnsmasq-base" in log[1].split()
    assert "dnsmasq" not in log[1].split()  # the package with a service
    assert log[2:4] == ["policy-rc.d start: 101", "policy-rc.d restart: 101"], log
    disabled = [line for line in log if line.startswith("deb-systemd-helper disable ")]
    assert "deb-systemd-helper disable NetworkManager.service" in disabled, log
    assert "prometheus" in log[1].split(), log  # for promtool
    assert "deb-systemd-helper disable prometheus.service" in disabled, log
    if previous is None:
        assert list(sbin.iterdir()) == []
    else:
        assert [p.name for p in sbin.iterdir()] == ["policy-rc.d"]
        assert (sbin / "policy-rc.d").read_text() == previous
        assert os.access(sbin / "policy-rc.d", os.X_OK)
    assert "not started and not enabled" in result.stdout


def test_readme_applet_shows_the_current_state_at_once(plain_lab, tmp_path):
    """The applet snippet prints the state before any change (next to a running
    daemon it used to print nothing until something changed)."""
    text = (REPO / "README.md").read_text()
    section = text.split("### A panel applet", 1)[1]
    [snippet] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    script = tmp_path / "applet.py"
    script.write_text(snippet)
    plain_lab.daemon(args=["--system", "--backend", "kernel"])
    status = harness.wait_until(
        lambda: (plain_lab.client.get(harness.SERVICE, harness.ROOT_PATH, harness.TARGET_IFACE, "Status") + 1),
        harness.START_TIMEOUT, "the daemon's first answer", poll=0.05) - 1
    flags = plain_lab.client.get(harness.SERVICE, harness.ROOT_PATH, harness.TARGET_IFACE, "Flags")
    applet = subprocess.Popen(["/usr/bin/python3", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=plain_lab.bus.address), text=True)
    try:
        line = harness.read_line(applet.stdout, harness.START_TIMEOUT)
    finally:
        applet.kill()
        _, errors = applet.communicate()
    words = {-1: "unknown", 0: "offline", 1: "online (cellular)", 2: "online"}[status]
    assert line == f"{words} {hex(flags)}\n", (line, errors)
