#!/usr/bin/env bash
# Installs what the tests need (Debian/Ubuntu), builds, and runs every test:
# the Swift unit tests and the integration tests against a real
# NetworkManager, dbus-daemon and dnsmasq in private network namespaces.
#
#   sudo Tests/test-all.sh            # everything
#   sudo Tests/test-all.sh -k portal  # extra arguments go to pytest
#
# Needs root (network namespaces, NetworkManager). With CI set, any skipped
# integration test is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"

packages=(
    # build
    libdbus-1-dev libnm-dev pkg-config
    # integration tests
    dbus-daemon dbus-bin network-manager dnsmasq-base iproute2 util-linux
    python3 python3-pytest python3-gi gir1.2-nm-1.0 python3-dbusmock systemd
)

if [[ $(id -u) -ne 0 ]]; then
    echo "test-all: the integration tests need root (network namespaces); run it with sudo" >&2
    exit 2
fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "test-all: installing ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

echo "== build"
swift build --build-tests
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
