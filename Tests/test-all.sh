#!/usr/bin/env bash
# Installs what the tests need (Debian/Ubuntu), builds, and runs every test:
# the Swift unit tests and the integration tests against a real
# NetworkManager, dbus-daemon and dnsmasq in private network namespaces, and
# the client stacks' binding generators (qdbusxml2cpp, gdbus-codegen).
#
#   Tests/test-all.sh                 # everything, as root (CI runs exactly this)
#   Tests/test-all.sh -k portal       # extra arguments go to pytest
#   Tests/test-all.sh --install-only  # only install the packages
#
# Needs root (network namespaces, NetworkManager) and swift on PATH; no sudo.
# With CI set, any skipped integration test is a failure.
#
# Installing never starts or enables a service on this machine: the tests
# start NetworkManager, dbus-daemon and dnsmasq themselves, in their own
# namespaces. While apt-get runs, /usr/sbin/policy-rc.d answers 101 ("action
# forbidden"), which invoke-rc.d and deb-systemd-invoke obey, so no
# maintainer script starts anything; recommended packages (ModemManager ...)
# are not installed; and when this script installs network-manager, the units
# its postinst enabled are disabled again (they would start at the next boot).
# dnsmasq-base has no service at all.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"

packages=(
    # build
    libdbus-1-dev libnm-dev pkg-config
    # integration tests
    dbus-daemon dbus-bin network-manager dnsmasq-base iproute2 util-linux
    # gdbus: a client of another uid (test_uid_rules.py); util-linux has setpriv
    libglib2.0-bin
    python3 python3-pytest python3-gi gir1.2-nm-1.0 python3-dbusmock systemd
    # blocking clients and honest followers (test_blocking_clients.py, test_convergence.py,
    # test_activation.py): dbus-python with and without a main loop, jeepney
    python3-dbus python3-jeepney
    # bindings: Qt 6's qdbusxml2cpp, gdbus-codegen and a C compiler for its client
    qt6-base-dev-tools libglib2.0-dev-bin libglib2.0-dev gcc
    # the GIO module (gio/, its own Makefile; test_gio_module.py builds it)
    make
    # metrics: promtool, Prometheus's own format checker (the server is never started)
    prometheus
    # a real systemd in a container booted from an overlay of this root (test_systemd.py);
    # dbus-broker is not installed here (it would become this machine's bus at its next
    # boot): the test fetches it with apt-get download and installs it in the container
    systemd-container man-db acl
    # the Debian package: dpkg-buildpackage, debhelper (dh_installsysusers), lintian, and the rest
    # of its Build-Depends (git; the Swift toolchain's own libraries, which a machine that runs
    # swift has, but dpkg-checkbuilddeps wants as packages)
    dpkg-dev debhelper lintian git libcurl4 libncurses6 libsqlite3-0 libxml2
    # the C API's library: its SONAME and run path, set when installed (capi/install-library.sh)
    patchelf
    # the C API's header checked as C++ too (test_c_api.py)
    g++
)
# Units network-manager's postinst enables; disabled again if this script installed it.
nm_units=(NetworkManager.service NetworkManager-wait-online.service NetworkManager-dispatcher.service)
# The unit prometheus's postinst enables; disabled again if this script installed it.
prometheus_units=(prometheus.service)

install_only=false
if [[ ${1:-} == --install-only ]]; then
    install_only=true
    shift
fi

if [[ $(id -u) -ne 0 ]]; then
    echo "test-all: the integration tests need root (network namespaces, NetworkManager): run it as root" >&2
    exit 2
fi
if ! $install_only && ! command -v swift >/dev/null; then
    echo "test-all: swift is not on PATH. Install a Swift 6 toolchain (https://www.swift.org/install/linux/)" \
         "and add its usr/bin to PATH. (sudo's secure_path drops it: run as root," \
         "or as: sudo env PATH=\"\$PATH\" Tests/test-all.sh)" >&2
    exit 2
fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

policy=/usr/sbin/policy-rc.d
saved=""
restore_policy() {
    if [[ -n $saved ]]; then
        mv -f "$saved" "$policy"
        saved=""
    else
        rm -f "$policy"
    fi
}

if ((${#missing[@]})); then
    if ! command -v apt-get >/dev/null; then
        echo "test-all: install these packages (Debian names), then run it again: ${missing[*]}" >&2
        exit 2
    fi
    echo "test-all: installing ${missing[*]}"
    if [[ -e $policy ]]; then
        saved=$(mktemp "$policy.test-all.XXXXXX")
        cp -p "$policy" "$saved"
    fi
    trap restore_policy EXIT
    printf '#!/bin/sh\n# test-all.sh: no service starts while the test packages install.\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
    restore_policy
    trap - EXIT
    if [[ " ${missing[*]} " == *" network-manager "* ]]; then
        for unit in "${nm_units[@]}"; do
            if command -v deb-systemd-helper >/dev/null; then
                deb-systemd-helper disable "$unit" >/dev/null 2>&1 || true
            fi
            if [[ -d /run/systemd/system ]]; then
                systemctl disable --quiet "$unit" 2>/dev/null || true
            fi
        done
        echo "test-all: NetworkManager installed, not started and not enabled (the tests start their own)"
    fi
    if [[ " ${missing[*]} " == *" prometheus "* ]]; then
        for unit in "${prometheus_units[@]}"; do
            if command -v deb-systemd-helper >/dev/null; then
                # It acts only when called as from a maintainer script.
                DPKG_MAINTSCRIPT_PACKAGE=prometheus deb-systemd-helper disable "$unit" >/dev/null 2>&1 || true
            fi
            if [[ -d /run/systemd/system ]]; then
                systemctl disable --quiet "$unit" 2>/dev/null || true
            fi
        done
        echo "test-all: prometheus installed for promtool, not started and not enabled"
    fi
fi
if $install_only; then
    exit 0
fi

echo "== build"
# A warning fails the run: the build is meant to print none.
log=$(mktemp)
swift build --build-tests 2>&1 | tee "$log"
if grep -q "warning:" "$log"; then
    echo "test-all: the build printed warnings:" >&2
    grep "warning:" "$log" >&2
    rm -f "$log"
    exit 1
fi
rm -f "$log"
bin=$(swift build --show-bin-path)

echo "== unit tests"
swift test --skip-build

echo "== integration tests"
# Debian's python has gi and dbusmock; a python earlier on PATH may not.
status=0
REACHABILITYD="$bin/reachabilityd" /usr/bin/python3 -m pytest Tests/Integration -v -ra "$@" || status=$?
if [[ $status -eq 5 ]]; then
    echo "test-all: no integration test ran" >&2
fi
exit $status
