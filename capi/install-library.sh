#!/usr/bin/env bash
# Installs the C API: the shared library (with its SONAME and run path), the Swift
# runtime it runs on, the headers and the pkg-config file. install.sh calls it after
# building; the tests call it on a debug build with a scratch prefix.
#
#   capi/install-library.sh --library .build/release/libSystemConfigurationC.so --prefix /usr
#   capi/install-library.sh --prefix /usr --uninstall
#
# Options: --library FILE (the built libSystemConfigurationC.so), --prefix DIR
# (default /usr), --libdir DIR (default PREFIX/lib), --destdir DIR (staging root),
# --strip (the library's symbol table and debug information left out), --uninstall
# (remove what this installs).
#
# Installed: LIBDIR/libreachability-sc.so.1.0.0 with the SONAME
# libreachability-sc.so.MAJOR and the links libreachability-sc.so.MAJOR and
# libreachability-sc.so (for -lreachability-sc); LIBDIR/reachability-sc/, the Swift
# runtime libraries the library needs, copied from the toolchain that built it (its
# run path is $ORIGIN/reachability-sc: it never depends on where the toolchain is);
# PREFIX/include/SystemConfiguration/*.h; LIBDIR/pkgconfig/reachability-sc.pc.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=/usr libdir= destdir= library= uninstall=false strip=
while (($#)); do
    case $1 in
        --library) library=$2; shift 2 ;;
        --prefix) prefix=$2; shift 2 ;;
        --libdir) libdir=$2; shift 2 ;;
        --destdir) destdir=$2; shift 2 ;;
        --strip) strip=-s; shift ;;
        --uninstall) uninstall=true; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "install-library.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
prefix=${prefix%/}
libdir=${libdir:-$prefix/lib}
# The pkg-config version is the service's; the library's file carries its ABI version
# (1.0.0: Apple's C API, which does not change; the SONAME names the major).
version=$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' Sources/ReachabilityCore/ServiceNames.swift)
abi=1.0.0
major=${abi%%.*}
name=libreachability-sc.so
root=$destdir
headers=(SystemConfiguration.h SCBase.h SCNetwork.h SCNetworkReachability.h)

if $uninstall; then
    rm -fv "$root$libdir/$name" "$root$libdir/$name.$major" "$root$libdir/$name.$major".* \
        "$root$libdir/pkgconfig/reachability-sc.pc" "${headers[@]/#/$root$prefix/include/SystemConfiguration/}"
    rm -rfv "$root$libdir/reachability-sc"
    rmdir "$root$prefix/include/SystemConfiguration" 2>/dev/null || true
    exit 0
fi

[[ -f $library ]] || { echo "install-library.sh: --library names no file: $library" >&2; exit 2; }
command -v patchelf >/dev/null || { echo "install-library.sh: needs patchelf (apt-get install -y patchelf)" >&2; exit 2; }

# The Swift runtime: every library the built one loads from the toolchain's directory
# (the one libswiftCore.so resolves to), copied beside it. Core Foundation and dispatch
# are among them: a program that calls CFRelease or dispatch_queue_create uses these.
runtime=$(ldd "$library" | awk '$1 == "libswiftCore.so" { print $3 }')
[[ -n $runtime ]] || { echo "install-library.sh: $library does not link the Swift runtime" >&2; exit 2; }
runtime=$(dirname "$runtime")
install -d -m 755 "$root$libdir/reachability-sc" "$root$libdir/pkgconfig" "$root$prefix/include/SystemConfiguration"
ldd "$library" | awk -v dir="$runtime/" 'index($3, dir) == 1 { print $3 }' | while read -r dependency; do
    install -m 644 "$dependency" "$root$libdir/reachability-sc/"
    # Each finds the others beside itself.
    patchelf --set-rpath '$ORIGIN' "$root$libdir/reachability-sc/${dependency##*/}"
done

install -m 755 $strip "$library" "$root$libdir/$name.$abi"
patchelf --set-soname "$name.$major" "$root$libdir/$name.$abi"
patchelf --set-rpath '$ORIGIN/reachability-sc' "$root$libdir/$name.$abi"
ln -sf "$name.$abi" "$root$libdir/$name.$major"
ln -sf "$name.$major" "$root$libdir/$name"
for header in "${headers[@]}"; do
    install -m 644 "capi/include/SystemConfiguration/$header" "$root$prefix/include/SystemConfiguration/$header"
done
sed -e "s|@prefix@|$prefix|" -e "s|@libdir@|$libdir|" -e "s|@includedir@|$prefix/include|" \
    -e "s|@runtimedir@|$libdir/reachability-sc|" -e "s|@swiftincludedir@|${runtime%/*}|" \
    -e "s|@version@|$version|" capi/reachability-sc.pc.in > "$root$libdir/pkgconfig/reachability-sc.pc"
chmod 644 "$root$libdir/pkgconfig/reachability-sc.pc"
echo "installed the C API: $libdir/$name.$abi (SONAME $name.$major), its Swift runtime in" \
     "$libdir/reachability-sc, the headers and reachability-sc.pc"
