"""The contract XML as client stacks consume it: bindings generated from
``dbus/io.github.reachabilityd.Reachability1.xml`` by Qt's ``qdbusxml2cpp``
and GLib's ``gdbus-codegen``, a generated C client compiled warning-free and
run against the daemon, and the daemon's introspection data carrying every
comment of the file (the document's and the interfaces' own included).

No root needed: the daemon runs on a private bus (``plain_lab``).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import harness

XML = harness.CONTRACT_XML
# Debian installs Qt 6's tools outside PATH (qt6-base-dev-tools).
QDBUSXML2CPP_PLACES = ("/usr/lib/qt6/bin", "/usr/lib/qt6/libexec", "/usr/lib/x86_64-linux-gnu/qt6/bin")


def need(tool: str, places=()) -> str:
    found = shutil.which(tool) or next(
        (str(Path(p, tool)) for p in places if os.access(Path(p, tool), os.X_OK)), None)
    if found is None:
        message = f"needs {tool}"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI is set: a missing requirement is a failure)", pytrace=False)
        pytest.skip(message)
    return found


def run(argv, cwd, **kwargs):
    result = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=120,
                            check=False, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, argv))} failed ({result.returncode}):\n" \
                                   f"{result.stdout}\n{result.stderr}"
    return result


def comments(xml: str) -> list:
    """Every ``<!-- … -->`` of an XML text, white space collapsed."""
    return [" ".join(c.split()) for c in re.findall(r"<!--(.*?)-->", xml, re.S)]


@pytest.mark.parametrize("mode", ["-p", "-a"])
def test_qdbusxml2cpp_generates_the_proxy_and_the_adaptor(tmp_path, mode):
    """Qt 6 refuses a{sv} without a QtTypeName annotation; with it, both the
    proxy and the adaptor generate without a word on stderr."""
    tool = need("qdbusxml2cpp", QDBUSXML2CPP_PLACES)
    result = run([tool, mode, "reachability", XML], tmp_path)
    assert result.stderr == "", result.stderr
    header = (tmp_path / "reachability.h").read_text()
    assert "QVariantMap" in header  # Query's details
    for member in ("WatchHost", "WatchAddress", "Release", "Query", "Refresh", "StatusChanged"):
        assert member in header, member


C_CLIENT = r"""
#include <stdio.h>
#include "reachability.h"

/* Reads the internet target's Flags and queries 127.0.0.1 through the
   generated proxies, on the bus given as argv[1]. */
int main(int argc, char **argv)
{
    GError *error = NULL;
    if (argc != 2) return 2;
    GDBusConnection *bus = g_dbus_connection_new_for_address_sync(
        argv[1], G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
        NULL, NULL, &error);
    if (bus == NULL) { fprintf(stderr, "%s\n", error->message); return 1; }
    ReachTarget *internet = reach_target_proxy_new_sync(
        bus, G_DBUS_PROXY_FLAGS_NONE, "io.github.reachabilityd.Reachability1",
        "/io/github/reachabilityd/Reachability1", NULL, &error);
    if (internet == NULL) { fprintf(stderr, "%s\n", error->message); return 1; }
    printf("Flags %u Status %d Kind %s\n", reach_target_get_flags(internet), reach_target_get_status(internet),
           reach_target_get_kind(internet));

    ReachManager *manager = reach_manager_proxy_new_sync(
        bus, G_DBUS_PROXY_FLAGS_NONE, "io.github.reachabilityd.Reachability1",
        "/io/github/reachabilityd/Reachability1", NULL, &error);
    if (manager == NULL) { fprintf(stderr, "%s\n", error->message); return 1; }
    guint flags = 0;
    gint status = 0;
    GVariant *details = NULL;
    if (!reach_manager_call_query_sync(manager, "127.0.0.1", &flags, &status, &details, NULL, &error)) {
        fprintf(stderr, "%s\n", error->message);
        return 1;
    }
    const gchar *interface = NULL;
    g_variant_lookup(details, "interface", "&s", &interface);
    printf("Query 127.0.0.1 %u %d %s\n", flags, status, interface ? interface : "(none)");
    g_variant_unref(details);
    g_object_unref(manager);
    g_object_unref(internet);
    g_object_unref(bus);
    return 0;
}
"""


def test_gdbus_codegen_c_client_compiles_warning_free_and_reads_flags(plain_lab, tmp_path):
    codegen = need("gdbus-codegen")
    compiler = need("cc")
    pkg_config = need("pkg-config")
    run([codegen, "--generate-c-code", "reachability", "--c-namespace", "Reach",
         "--interface-prefix", "io.github.reachabilityd.Reachability1.", XML], tmp_path)
    (tmp_path / "client.c").write_text(C_CLIENT)
    flags = run([pkg_config, "--cflags", "--libs", "gio-2.0"], tmp_path).stdout.split()
    compiled = run([compiler, "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", "client", "client.c",
                    "reachability.c", *flags], tmp_path)
    assert compiled.stderr == "", compiled.stderr

    plain_lab.daemon(args=["--system", "--backend", "kernel"])
    # Once the first evaluation is done (Status -1 until then), the answer stays.
    status = harness.wait_until(
        lambda: plain_lab.client.get(harness.SERVICE, harness.ROOT_PATH, harness.TARGET_IFACE, "Status") + 1,
        harness.START_TIMEOUT, "the daemon's first answer", poll=0.05) - 1
    expected = plain_lab.client.get(harness.SERVICE, harness.ROOT_PATH, harness.TARGET_IFACE, "Flags")
    output = run([tmp_path / "client", plain_lab.bus.address], tmp_path).stdout.splitlines()
    assert output[0] == f"Flags {expected} Status {status} Kind internet", output
    # Reachable | IsLocalAddress | IsDirect, through lo.
    assert output[1] == f"Query 127.0.0.1 {harness.REACHABLE | harness.IS_LOCAL_ADDRESS | harness.IS_DIRECT} 2 lo", \
        output


def test_introspection_serves_every_comment_of_the_contract(plain_lab):
    """27 of the file's comments used to be served: the document's header and
    the interfaces' own blocks (with the Manager's error list) were dropped.
    The root object serves the Manager's, the Target's and the Metrics', the path object the
    Path's, /org/freedesktop/LogControl1 LogControl1's."""
    plain_lab.daemon(args=["--system", "--backend", "kernel"])
    served = plain_lab.client.call(harness.SERVICE, harness.ROOT_PATH, harness.INTROSPECTABLE_IFACE,
                                   "Introspect")[0]
    # The Path interface's comments are served by the object that has it (while held).
    path_object = plain_lab.client.call(harness.SERVICE, harness.ROOT_PATH, harness.MANAGER_IFACE, "WatchPath")[0]
    served_path = plain_lab.client.call(harness.SERVICE, path_object, harness.INTROSPECTABLE_IFACE, "Introspect")[0]
    # LogControl1's comments are served by its own object, systemd's path.
    served_log = plain_lab.client.call(harness.SERVICE, "/org/freedesktop/LogControl1", harness.INTROSPECTABLE_IFACE,
                                       "Introspect")[0]
    written = comments(XML.read_text())
    assert len(written) >= 30
    assert sorted(comments(served) + comments(served_path) + comments(served_log)) == sorted(written)
    assert "Error.TooManyTargets" in served
    # A target object serves its interface's own block too.
    path = plain_lab.client.call(harness.SERVICE, harness.ROOT_PATH, harness.MANAGER_IFACE, "WatchAddress",
                                 "s", ("127.0.0.1",))[0]
    child = plain_lab.client.call(harness.SERVICE, path, harness.INTROSPECTABLE_IFACE, "Introspect")[0]
    target_block = next(c for c in written if c.startswith("io.github.reachabilityd.Reachability1.Target:"))
    assert target_block in comments(child)
