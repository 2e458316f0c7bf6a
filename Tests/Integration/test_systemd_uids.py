"""The caller's own answer under the shipped unit (docs/dbus-api.md, "Whose answer"; docs/install.md, "Installing").

``ip rule … uidrange 1000-1000 lookup 100`` with ``unreachable default`` in table 100: uid
1000's packets have no way out, root's do. The daemon answers each caller as its own packets
are routed (``RTA_UID`` in its route lookups) — which holds only when the daemon sees the
machine's uids: in a user namespace (``PrivateUsers=yes``) the rule reads ``uidrange
65534-65534`` and uid 1000 maps to nothing, and the user would be told "reachable" where its
packets get *No route to host*.

The unit is ``data/reachabilityd.service`` as shipped, running the build under test copied to
the unit's own path, with the shipped D-Bus policy and sysusers file, in a container booted
with a real systemd (``container.py``) on dbus-daemon. Root, systemd-container, util-linux.
"""

from __future__ import annotations

import re

import container as ct
import harness
from conftest import need
from test_systemd import add_uplink

REPO = harness.REPO
SERVICE = harness.SERVICE
USER = "1000"


def query(box: ct.Container, user: str | None = None) -> tuple:
    """Manager.Query("") as ``user`` through the system bus: (flags, status)."""
    done = box.run(["gdbus", "call", "--system", "--dest", SERVICE, "--object-path", harness.ROOT_PATH,
                    "--method", f"{harness.MANAGER_IFACE}.Query", ""], user=user, timeout=30)
    found = re.match(r"\(uint32 (\d+), (-?\d+),", done.stdout.strip())
    assert found, done.stdout + done.stderr
    return int(found[1]), int(found[2])


def test_uidrange_rules_hold_under_the_installed_unit(request):
    need(ct.requirements())
    box = ct.Container(binds=[REPO])
    request.addfinalizer(box.close)
    labs = getattr(request.node, "reach_labs", None)
    if labs is None:
        labs = request.node.reach_labs = []
    labs.append(box)
    box.start()
    # The build's daemon copied to the unit's own path (not run from the checkout, which the
    # unit's PrivateTmp= hides when the clone lives under /tmp), with the shipped unit,
    # policy, activation file and user.
    ct.install_build(box, harness.daemon_binary().parent)
    # up0 with a default route, which NetworkManager (if the container runs it) leaves alone.
    add_uplink(box)
    box.sh(f"ip rule add uidrange {USER}-{USER} lookup 100 priority 100; "
           "ip route add unreachable default table 100")
    box.run(["systemctl", "start", "reachabilityd.service"], timeout=60)
    shown = box.run(["systemctl", "show", "-P", "PrivateUsers", "reachabilityd.service"]).stdout.strip()
    # The kernel's answer for each (what a connect would meet), then ours.
    assert "dev up0" in box.run(["ip", "route", "get", "198.51.100.1", "uid", "0"]).stdout
    refused = box.run(["ip", "route", "get", "198.51.100.1", "uid", USER], check=False)
    assert refused.returncode != 0 and "No route to host" in refused.stderr, refused.stdout + refused.stderr
    assert query(box) == (harness.REACHABLE, 2), "root: reachable through up0"
    flags, status = query(box, user=USER)
    assert status == 0 and not flags & harness.REACHABLE, (
        f"uid {USER}, whose packets have no route, was told {flags:#x}, status {status} "
        f"(PrivateUsers={shown}: a user namespace hides the uids the rule names)")
