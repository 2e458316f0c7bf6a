"""Whose network namespace (docs/design.md, "Whose network namespace"): the daemon answers for its own, and says which
(``Manager.NetworkNamespace``, the inode of its ``/proc/self/ns/net``). A client in another
network namespace on the same bus (a container given the host's bus socket) compares it with
its own and evaluates in its own process, saying so; in the daemon's namespace it asks the
daemon.

The lab of ``tenants.py``: the daemon in namespace ``ten`` (an uplink with a default route:
the internet is reachable there); a second namespace with nothing but ``lo`` (no route: not
reachable there), both on the lab's bus (a Unix socket path, reachable from any namespace).
"""

import json
import os
import subprocess

import harness
from harness import MANAGER_IFACE, ROOT_PATH, SERVICE

REACHCTL = harness.daemon_binary().parent / "reachctl"


def reachctl(lab, netns, *arguments):
    """``reachctl --json ARGS`` as root in ``netns``, on the lab's bus: (its JSON line, its stderr)."""
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address)
    env.pop("REACHABILITY_DEBUG", None)
    done = subprocess.run(harness.Namespaces.exec_argv(netns) + [str(REACHCTL), "--json", *arguments],
                          capture_output=True, text=True, timeout=harness.START_TIMEOUT, env=env, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"reachctl {arguments} ({done.returncode}): {done.stdout}{done.stderr}"
    return lines[-1], done.stderr


def test_a_client_in_another_namespace_is_answered_for_its_own(tenant_lab):
    lab = tenant_lab
    lab.start_daemon()
    theirs = lab.client.get(SERVICE, ROOT_PATH, MANAGER_IFACE, "NetworkNamespace")
    assert theirs == os.stat(f"/run/netns/{lab.netns}").st_ino, "the inode of the daemon's namespace"

    # In the daemon's namespace: through the daemon, reachable.
    same, note = reachctl(lab, lab.netns, "status")
    assert same["mode"] == "daemon" and same["status"] == 2, (same, note)
    assert "namespace" not in note, note

    # In another: its own answer (no route there), in-process, and said so.
    other = lab.namespaces.create("other")
    lab.namespaces.ip(other, "link", "set", "lo", "up")
    mine, note = reachctl(lab, other, "status")
    assert mine["mode"] == "in-process", (mine, note)
    assert mine["status"] == 0 and not mine["flags"] & harness.REACHABLE, mine
    assert f"network namespace {theirs}" in note, note
    # --daemon: the daemon's answer, as asked (its namespace's).
    asked, _ = reachctl(lab, other, "--daemon", "status")
    assert asked["mode"] == "daemon" and asked["status"] == 2, asked


def test_networkmanager_of_another_namespace_is_not_taken_for_this_ones(nm_lab):
    """NetworkManager on the bus runs in another network namespace (the lab's ``nm``; a
    container given the host's bus socket is the same): a process evaluating in a namespace
    where none of NetworkManager's devices is a link, and whose own link is none of them, reads
    the kernel's facts instead. Before, it took NetworkManager's connectivity ("full") and
    activations for its own, in a namespace with no route at all."""
    lab = nm_lab
    bare = lab.namespaces.create("bare")
    # A link of its own, as a container has (nspawn's host0): without it, nothing here says which
    # namespace NetworkManager's devices are in (its only one may just have left the kernel).
    lab.namespaces.ip(bare, "link", "add", "host0", "type", "veth", "peer", "name", "host1")

    def full_in_nm_namespace():
        answer, _ = reachctl(lab, lab.ns_nm, "--no-daemon", "status")
        return answer if answer["connectivity"] == "full" and answer["reachable"] else None
    harness.wait_until(full_in_nm_namespace, harness.CHANGE_TIMEOUT,
                       "NetworkManager's own namespace to be reachable with connectivity full")

    answer, note = reachctl(lab, bare, "--no-daemon", "status")
    assert not answer["reachable"] and answer["reason"] == "no-route", answer
    assert answer["connectivity"] == "unknown", \
        f"NetworkManager's connectivity of another namespace taken for this one's: {answer}\n{note}"
    assert answer["interface"] == "", answer
