#!/usr/bin/env bash
# Builds reachabilityd and reachctl (release, Swift runtime linked in) and
# installs everything the service needs, then tells the system about it.
#
#   ./install.sh                          # as root: into /usr, then reachctl doctor
#   ./install.sh --prefix /usr/local
#   DESTDIR=/tmp/stage ./install.sh       # a package's staging root: files only
#   ./install.sh --uninstall              # as root: remove what it installed
#
# Options (or the variables in brackets):
#   --prefix DIR            [PREFIX]   default /usr
#   --destdir DIR           [DESTDIR]  staging root prepended to every path;
#                                      implies --files-only
#   --shared-swift-runtime             link the Swift runtime dynamically: the
#                                      binaries then need the toolchain's
#                                      libraries at run time (smaller files)
#   --files-only                       copy the files; do not create the user,
#                                      reload the bus or systemd
#   --no-strip                         keep the symbol tables and debug
#                                      information (for a -dbgsym package)
#   --no-c-api                         leave out the C API (libreachability-sc, its
#                                      headers and pkg-config file: docs/c-api.md)
#   --libdir DIR                       the C API's library directory (default
#                                      PREFIX/lib; the Debian package's is
#                                      /usr/lib/<triplet>)
#   --uninstall                        stop the service and remove every file
#                                      this script installs under PREFIX (the
#                                      user stays, as a package leaves it)
#
# Installed (PREFIX /usr):
#   /usr/libexec/reachabilityd, /usr/bin/reachctl, the man pages (docs/man),
#   the bash, zsh and fish completions, the D-Bus policy (share/dbus-1/system.d),
#   the bus activation file (share/dbus-1/system-services), the interface
#   definitions (share/dbus-1/interfaces), the systemd units
#   (lib/systemd/system) and the sysusers.d file. The activation file and the
#   units name PREFIX/libexec/reachabilityd and PREFIX/bin/reachctl.
#   The GIO module (gio/, GLib's GNetworkMonitor answered by the service) in
#   GIO's module directory (pkg-config's giomoduledir, under PREFIX). The C API
#   (unless --no-c-api; it needs patchelf): LIBDIR/libreachability-sc.so.1 with
#   the Swift runtime it runs on (LIBDIR/reachability-sc/), the headers
#   (PREFIX/include/SystemConfiguration) and LIBDIR/pkgconfig/reachability-sc.pc, by
#   capi/install-library.sh (LIBDIR: --libdir, PREFIX/lib unless told).
#
# Then (not with DESTDIR or --files-only): the user reachabilityd is created
# (systemd-sysusers, or useradd without systemd), the system bus reloads its
# configuration (so the policy applies and the name becomes activatable), and
# systemd reloads its units, and gio-querymodules refreshes GIO's module
# cache (a package leaves that to GLib's trigger on the directory). Nothing is enabled or started: the bus starts the
# service on the first call. `reachctl doctor` checks the result.
set -euo pipefail
cd "$(dirname "$0")"

prefix=${PREFIX:-/usr}
destdir=${DESTDIR:-}
libdir=
static=true
files_only=false
uninstall=false
c_api=true
strip=-s
while (($#)); do
    case $1 in
        --prefix) prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#*=}; shift ;;
        --destdir) destdir=$2; shift 2 ;;
        --destdir=*) destdir=${1#*=}; shift ;;
        --libdir) libdir=$2; shift 2 ;;
        --libdir=*) libdir=${1#*=}; shift ;;
        --shared-swift-runtime) static=false; shift ;;
        --files-only) files_only=true; shift ;;
        --no-strip) strip=; shift ;;
        --no-c-api) c_api=false; shift ;;
        --uninstall) uninstall=true; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ $prefix == /* ]] || { echo "install.sh: the prefix must be an absolute path: $prefix" >&2; exit 2; }
prefix=${prefix%/}
[[ -z $libdir || $libdir == /* ]] || { echo "install.sh: the libdir must be an absolute path: $libdir" >&2; exit 2; }
[[ -n $destdir ]] && files_only=true

service=io.github.reachabilityd.Reachability1
# Every file installed, relative to the prefix (the man pages are added below).
units=(reachabilityd.service reachabilityd-metrics-textfile.service
       reachabilityd-units.service reachability-online.target reachability-unmetered.target
       reachability-wait@.service)
files=(libexec/reachabilityd bin/reachctl
       share/bash-completion/completions/reachctl share/zsh/vendor-completions/_reachctl
       share/fish/vendor_completions.d/reachctl.fish
       "share/dbus-1/system.d/$service.conf" "share/dbus-1/system-services/$service.service"
       "share/dbus-1/interfaces/$service.xml"
       lib/sysusers.d/reachabilityd.conf "${units[@]/#/lib/systemd/system/}")
for page in docs/man/*.[1-8]; do
    files+=("share/man/man${page##*.}/${page##*/}")
done
# GIO's module directory under the prefix (/usr/lib/<triplet>/gio/modules for /usr).
gio_module=libgioreachabilityd.so
giomoduledir=
if pkg-config --exists gio-2.0 2>/dev/null; then
    giomoduledir=$(pkg-config --define-variable=prefix="$prefix" --variable=giomoduledir gio-2.0)
    files+=("${giomoduledir#"$prefix"/}/$gio_module")
fi
gio_querymodules() {
    local tool
    tool=$(pkg-config --variable=gio_querymodules gio-2.0 2>/dev/null || true)
    [[ -x $tool ]] || tool=$(command -v gio-querymodules || true)
    if [[ -n $tool && -d $1 ]]; then
        "$tool" "$1" && echo "GIO's module cache in $1 refreshed"
    fi
}

if $uninstall; then
    root=$destdir$prefix
    if [[ -z $destdir && -d /run/systemd/system ]]; then
        systemctl stop "${units[@]/reachability-wait@.service/reachability-wait@*.service}" 2>/dev/null || true
        # Enabled units would leave links to files that are gone.
        systemctl disable --quiet "${units[@]}" 2>/dev/null || true
    fi
    # The metrics writer's file (its stopped writer leaves one): only when the writer wrote it.
    textfile=/var/lib/prometheus/node-exporter/reachability.prom
    if [[ -z $destdir ]] && grep -qs '^reachctl_textfile_' "$textfile"; then
        rm -fv "$textfile"
    fi
    for file in "${files[@]}"; do
        rm -fv "$root/$file"
    done
    capi/install-library.sh --uninstall --prefix "$prefix" ${libdir:+--libdir "$libdir"} ${destdir:+--destdir "$destdir"}
    if [[ -z $destdir && -n $giomoduledir ]]; then
        gio_querymodules "$giomoduledir"
    fi
    if [[ -z $destdir ]]; then
        [[ -d /run/systemd/system ]] && systemctl daemon-reload
        dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
            org.freedesktop.DBus.ReloadConfig >/dev/null 2>&1 || true
    fi
    echo "uninstalled (the user reachabilityd stays: userdel reachabilityd removes it)"
    exit 0
fi

if ! command -v swift >/dev/null; then
    echo "install.sh: swift is not on PATH (a Swift 6 toolchain builds it: https://www.swift.org/install/linux/;" \
         "under sudo, keep PATH: sudo env PATH=\"\$PATH\" ./install.sh)" >&2
    exit 2
fi
for module in dbus-1 libnm gio-2.0; do
    if ! pkg-config --exists "$module" 2>/dev/null; then
        echo "install.sh: the build needs $module's headers:" \
             "apt-get install -y libdbus-1-dev libnm-dev libglib2.0-dev pkg-config make gcc" >&2
        exit 2
    fi
done

# A scratch directory of its own: a static build next to .build would rebuild
# everything each time one alternates with `swift build`.
flags=(-c release)
if $static; then
    flags+=(--static-swift-stdlib --scratch-path .build-static)
fi
echo "== building (swift build ${flags[*]})"
for product in reachabilityd reachctl; do
    swift build "${flags[@]}" --product "$product"
done
bin=$(swift build "${flags[@]}" --show-bin-path)
echo "== building the GIO module (make -C gio)"
make -C gio BUILDDIR="$PWD/.build-gio" module
# The C API's library runs on the toolchain's shared Swift runtime (a static one would be
# a second Core Foundation, unusable beside the program's): never --static-swift-stdlib.
if $c_api && ! command -v patchelf >/dev/null; then
    echo "install.sh: note: leaving out the C API: it needs patchelf (apt-get install -y patchelf)" >&2
    c_api=false
fi
if $c_api; then
    swift build -c release --product SystemConfigurationC
    c_library=$(swift build -c release --show-bin-path)/libSystemConfigurationC.so
fi

root=$destdir$prefix
echo "== installing into ${destdir:+$destdir }$prefix"
# Stripped: the symbol table and debug information are half of each file.
install -D -m 755 $strip "$bin/reachabilityd" "$root/libexec/reachabilityd"
install -D -m 755 $strip "$bin/reachctl" "$root/bin/reachctl"
install -D -m 644 $strip ".build-gio/$gio_module" "$destdir$giomoduledir/$gio_module"
for page in docs/man/*.[1-8]; do
    install -D -m 644 "$page" "$root/share/man/man${page##*.}/${page##*/}"
done
# A completion file is sourced, never run: without the generator's #! line.
install -d -m 755 "$root/share/bash-completion/completions"
sed '1{/^#!/d}' docs/completions/reachctl.bash > "$root/share/bash-completion/completions/reachctl"
chmod 644 "$root/share/bash-completion/completions/reachctl"
install -D -m 644 docs/completions/reachctl.zsh "$root/share/zsh/vendor-completions/_reachctl"
install -D -m 644 docs/completions/reachctl.fish "$root/share/fish/vendor_completions.d/reachctl.fish"
install -D -m 644 "dbus/$service.conf" "$root/share/dbus-1/system.d/$service.conf"
install -D -m 644 data/reachabilityd.sysusers.conf "$root/lib/sysusers.d/reachabilityd.conf"
# The introspection data, where D-Bus tools and binding generators look for it.
install -D -m 644 "dbus/$service.xml" "$root/share/dbus-1/interfaces/$service.xml"
if $c_api; then
    capi/install-library.sh --library "$c_library" --prefix "$prefix" ${libdir:+--libdir "$libdir"} \
        ${destdir:+--destdir "$destdir"} \
        ${strip:+--strip}
fi
# The command the bus (without systemd) and the unit run is the installed daemon.
install -d -m 755 "$root/share/dbus-1/system-services" "$root/lib/systemd/system"
sed "s|^Exec=/usr/libexec/reachabilityd|Exec=$prefix/libexec/reachabilityd|" "dbus/$service.service" \
    > "$root/share/dbus-1/system-services/$service.service"
chmod 644 "$root/share/dbus-1/system-services/$service.service"
for unit in "${units[@]}"; do
    sed -e "s|^ExecStart=/usr/libexec/reachabilityd|ExecStart=$prefix/libexec/reachabilityd|" \
        -e "s|^ExecStart=/usr/bin/reachctl|ExecStart=$prefix/bin/reachctl|" "data/$unit" \
        > "$root/lib/systemd/system/$unit"
    chmod 644 "$root/lib/systemd/system/$unit"
done

if [[ $prefix != /usr ]]; then
    echo "install.sh: note: dbus-daemon reads policies only from /usr/share/dbus-1/system.d and" \
         "/etc/dbus-1/system.d; with the prefix $prefix, link $prefix/share/dbus-1/system.d/$service.conf" \
         "into /etc/dbus-1/system.d"
fi
if [[ $prefix != /usr ]]; then
    echo "install.sh: note: GLib loads modules from its own directory; with the prefix $prefix, programs" \
         "find the GIO module with GIO_EXTRA_MODULES=$giomoduledir"
fi
if $files_only; then
    echo "installed (files only)"
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "install.sh: installed the files; creating the user and reloading the bus need root" >&2
    exit 1
fi

echo "== setting up"
# The user first: the bus resolves the policy's user name when it loads it.
if ! getent passwd reachabilityd >/dev/null; then
    if command -v systemd-sysusers >/dev/null; then
        systemd-sysusers "$root/lib/sysusers.d/reachabilityd.conf"
    else
        useradd --system --no-create-home --home-dir / --shell /usr/sbin/nologin \
            --comment "Network reachability daemon" reachabilityd
    fi
fi
if [[ -d /run/systemd/system ]]; then
    systemctl daemon-reload
fi
gio_querymodules "$giomoduledir"
# dbus-daemon usually notices new files by itself; ReloadConfig makes sure.
if command -v dbus-send >/dev/null && dbus-send --system --print-reply --dest=org.freedesktop.DBus \
        /org/freedesktop/DBus org.freedesktop.DBus.ReloadConfig >/dev/null 2>&1; then
    echo "the system bus reloaded its configuration"
else
    echo "install.sh: could not ask the system bus to reload (is it running?); it reads the files when it starts"
fi
echo "installed; the bus starts the service on the first call (nothing to enable). Check it: $prefix/bin/reachctl doctor"
