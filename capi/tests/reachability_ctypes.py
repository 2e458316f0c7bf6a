"""The C API from Python's ctypes: the same commands and lines as reachability-test.c.

    python3 reachability_ctypes.py LIBDIR basics
    python3 reachability_ctypes.py LIBDIR watch queue|runloop ADDRESS LOCAL

LIBDIR holds the installed libreachability-sc.so.1 and its runtime (reachability-sc/):
Core Foundation and dispatch are called from the runtime's libFoundation and libdispatch,
the ones the library itself uses. Run by Tests/Integration/test_c_api.py.
"""

from __future__ import annotations

import ctypes
import socket
import sys
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char_p, c_double, c_int, c_int32, c_long, c_uint32,
                    c_ulong, c_void_p)

Ref = c_void_p
CallBack = CFUNCTYPE(None, Ref, c_uint32, c_void_p)
Retain = CFUNCTYPE(c_void_p, c_void_p)
Release = CFUNCTYPE(None, c_void_p)
Describe = CFUNCTYPE(c_void_p, c_void_p)
REACHABLE, IS_LOCAL = 1 << 1, 1 << 16
INVALID_ARGUMENT = 1002


class Context(Structure):
    _fields_ = [("version", c_long), ("info", c_void_p), ("retain", Retain), ("release", Release),
                ("copyDescription", Describe)]


class SockaddrIn(Structure):
    _fields_ = [("sin_family", ctypes.c_ushort), ("sin_port", ctypes.c_ushort), ("sin_addr", ctypes.c_ubyte * 4),
                ("sin_zero", ctypes.c_ubyte * 8)]


def ipv4(text: str | None) -> SockaddrIn:
    address = SockaddrIn()
    address.sin_family = socket.AF_INET
    if text:
        address.sin_addr[:] = socket.inet_pton(socket.AF_INET, text)
    return address


class Library:
    def __init__(self, libdir: str):
        self.sc = ctypes.CDLL(f"{libdir}/libreachability-sc.so.1")
        self.cf = ctypes.CDLL(f"{libdir}/reachability-sc/libFoundation.so")
        self.dispatch = ctypes.CDLL(f"{libdir}/reachability-sc/libdispatch.so")
        sc, cf = self.sc, self.cf
        for name in ("SCNetworkReachabilityCreateWithAddress",):
            getattr(sc, name).restype, getattr(sc, name).argtypes = Ref, [c_void_p, c_void_p]
        sc.SCNetworkReachabilityCreateWithName.restype = Ref
        sc.SCNetworkReachabilityCreateWithName.argtypes = [c_void_p, c_char_p]
        sc.SCNetworkReachabilityCreateWithAddressPair.restype = Ref
        sc.SCNetworkReachabilityCreateWithAddressPair.argtypes = [c_void_p, c_void_p, c_void_p]
        sc.SCNetworkReachabilityGetFlags.restype, sc.SCNetworkReachabilityGetFlags.argtypes = c_bool, [Ref, c_void_p]
        sc.SCNetworkReachabilitySetCallback.restype = c_bool
        sc.SCNetworkReachabilitySetCallback.argtypes = [Ref, CallBack, POINTER(Context)]
        sc.SCNetworkReachabilitySetDispatchQueue.restype = c_bool
        sc.SCNetworkReachabilitySetDispatchQueue.argtypes = [Ref, c_void_p]
        for name in ("SCNetworkReachabilityScheduleWithRunLoop", "SCNetworkReachabilityUnscheduleFromRunLoop"):
            getattr(sc, name).restype, getattr(sc, name).argtypes = c_bool, [Ref, c_void_p, c_void_p]
        sc.SCNetworkReachabilityGetTypeID.restype = c_ulong
        sc.SCError.restype = c_int
        sc.SCErrorString.restype, sc.SCErrorString.argtypes = c_char_p, [c_int]
        cf.CFRetain.restype, cf.CFRetain.argtypes = c_void_p, [c_void_p]
        cf.CFRelease.restype, cf.CFRelease.argtypes = None, [c_void_p]
        cf.CFGetTypeID.restype, cf.CFGetTypeID.argtypes = c_ulong, [c_void_p]
        cf.CFRunLoopGetMain.restype = c_void_p
        cf.CFRunLoopRun.restype = None
        cf.CFRunLoopStop.restype, cf.CFRunLoopStop.argtypes = None, [c_void_p]
        cf.CFRunLoopRunInMode.restype, cf.CFRunLoopRunInMode.argtypes = c_int32, [c_void_p, c_double, c_bool]
        cf.CFStringCreateWithCString.restype = c_void_p
        cf.CFStringCreateWithCString.argtypes = [c_void_p, c_char_p, c_uint32]
        self.default_mode = c_void_p.in_dll(cf, "kCFRunLoopDefaultMode").value
        self.dispatch.dispatch_queue_create.restype = c_void_p
        self.dispatch.dispatch_queue_create.argtypes = [c_char_p, c_void_p]
        self.dispatch.dispatch_release.argtypes = [c_void_p]

    def flags(self, reference) -> int:
        value = c_uint32(0xFFFFFFFF)
        assert self.sc.SCNetworkReachabilityGetFlags(reference, ctypes.byref(value)), self.error()
        return value.value

    def error(self) -> str:
        status = self.sc.SCError()
        return f"SCError {status}: {self.sc.SCErrorString(status).decode()}"


output = threading.Lock()


def say(event: str, label: str, flags: int) -> None:
    with output:
        print(f"{event} {label} flags=0x{flags:x}", flush=True)


class Probe:
    """A counted context: retain and release counts, its label handed to the callback."""

    def __init__(self, lib: Library, label: str, expect_main: bool | None):
        self.lib, self.label, self.expect_main = lib, label, expect_main
        self.retains = self.releases = 0
        self.counted = threading.Condition()
        self.wrong_thread = 0
        self.retain = Retain(self._retain)
        self.release = Release(self._release)
        self.describe = Describe(lambda _info: lib.cf.CFStringCreateWithCString(None, label.encode(), 0x08000100))
        self.callback = CallBack(self._callback)
        # `info` must not be NULL for retain and release to run: the address of a token of its own.
        self.token = ctypes.c_int(0)
        self.context = Context(0, ctypes.addressof(self.token), self.retain, self.release, self.describe)

    def _retain(self, info):
        with self.counted:
            self.retains += 1
        return info

    def _release(self, _info):
        with self.counted:
            self.releases += 1
            self.counted.notify_all()

    def balanced(self, timeout: float) -> bool:
        """Every retain released, at once or within `timeout` (a callout already running on the
        queue's thread holds its reference until it returns, as Apple's do)."""
        with self.counted:
            return self.counted.wait_for(lambda: self.retains == self.releases, timeout)

    def _callback(self, target, flags, _info):
        assert target
        if self.expect_main is not None and (threading.current_thread() is threading.main_thread()) != self.expect_main:
            self.wrong_thread += 1
        say("callback", self.label, flags)


def basics(lib: Library) -> int:
    sc, cf = lib.sc, lib.cf
    zero, loopback = ipv4(None), ipv4("127.0.0.1")
    internet = sc.SCNetworkReachabilityCreateWithAddress(None, ctypes.byref(zero))
    name = sc.SCNetworkReachabilityCreateWithName(None, b"localhost")
    pair = sc.SCNetworkReachabilityCreateWithAddressPair(None, ctypes.byref(loopback), ctypes.byref(loopback))
    local = sc.SCNetworkReachabilityCreateWithAddress(None, ctypes.byref(loopback))
    assert internet and name and pair and local, lib.error()
    assert lib.flags(local) & (REACHABLE | IS_LOCAL) == REACHABLE | IS_LOCAL, hex(lib.flags(local))
    assert lib.flags(pair) & REACHABLE, hex(lib.flags(pair))
    assert lib.flags(name) == lib.flags(internet), "a name not scheduled reads as the internet"
    say("flags", "internet", lib.flags(internet))
    assert cf.CFRetain(internet) == internet
    cf.CFRelease(internet)
    assert cf.CFGetTypeID(internet) == sc.SCNetworkReachabilityGetTypeID()
    assert not sc.SCNetworkReachabilityCreateWithName(None, b"")
    assert not sc.SCNetworkReachabilityCreateWithAddressPair(None, None, None)
    assert sc.SCError() == INVALID_ARGUMENT, lib.error()
    probe = Probe(lib, "basics", None)
    assert sc.SCNetworkReachabilitySetCallback(name, probe.callback, ctypes.byref(probe.context))
    assert sc.SCNetworkReachabilitySetCallback(name, CallBack(), None)
    assert (probe.retains, probe.releases) == (1, 1), (probe.retains, probe.releases)
    for reference in (internet, name, pair, local):
        cf.CFRelease(reference)
    print("basics ok", flush=True)
    return 0


def watch(lib: Library, scheduling: str, address: str, local_address: str) -> int:
    sc, cf = lib.sc, lib.cf
    on_queue = scheduling == "queue"
    zero, remote, local = ipv4(None), ipv4(address), ipv4(local_address)
    references = {
        "internet": sc.SCNetworkReachabilityCreateWithAddress(None, ctypes.byref(zero)),
        "address": sc.SCNetworkReachabilityCreateWithAddress(None, ctypes.byref(remote)),
        "pair": sc.SCNetworkReachabilityCreateWithAddressPair(None, ctypes.byref(local), ctypes.byref(remote)),
        "host": sc.SCNetworkReachabilityCreateWithName(None, b"localhost"),
    }
    probes = {label: Probe(lib, label, not on_queue) for label in references}
    queue = lib.dispatch.dispatch_queue_create(b"reachability-ctypes", None) if on_queue else None
    main_loop = cf.CFRunLoopGetMain()
    for label, reference in references.items():
        assert reference, lib.error()
        probe = probes[label]
        assert sc.SCNetworkReachabilitySetCallback(reference, probe.callback, ctypes.byref(probe.context))
        if on_queue:
            assert sc.SCNetworkReachabilitySetDispatchQueue(reference, queue), lib.error()
        else:
            assert sc.SCNetworkReachabilityScheduleWithRunLoop(reference, main_loop, lib.default_mode), lib.error()
        say("flags", label, lib.flags(reference))
    if on_queue:
        lib.dispatch.dispatch_release(queue)  # the references hold it while scheduled
    say("scheduled", "all", 0)

    def read_commands():
        for line in sys.stdin:
            if line.startswith("stop"):
                break
        if not on_queue:
            cf.CFRunLoopStop(main_loop)

    reader = threading.Thread(target=read_commands)
    reader.start()
    if not on_queue:
        # The references' run loop sources keep it running until the reader stops it.
        cf.CFRunLoopRun()
    reader.join()
    for reference in references.values():
        if on_queue:
            assert sc.SCNetworkReachabilitySetDispatchQueue(reference, None)
        else:
            assert sc.SCNetworkReachabilityUnscheduleFromRunLoop(reference, main_loop, lib.default_mode)
    say("stopped", "all", 0)
    for reference in references.values():
        cf.CFRelease(reference)
    unbalanced = {label: (p.retains, p.releases) for label, p in probes.items() if not p.balanced(10)}
    wrong = {label: p.wrong_thread for label, p in probes.items() if p.wrong_thread}
    if unbalanced or wrong:
        print(f"unbalanced retains/releases {unbalanced}, callbacks on the wrong thread {wrong}", file=sys.stderr)
        return 1
    return 0


def main(argv: list) -> int:
    lib = Library(argv[1])
    if argv[2:] == ["basics"]:
        return basics(lib)
    if len(argv) == 6 and argv[2] == "watch":
        return watch(lib, argv[3], argv[4], argv[5])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
