#!/usr/bin/python3
"""A GLib program in Python that knows nothing of reachabilityd: GIO's
network monitor only (Gio.NetworkMonitor.get_default() and its API). The
same arguments and output as monitor-test.c (see there):

    monitor-test.py [--follow] [HOST-OR-ADDRESS ...]
"""

import sys
import time

from gi.repository import Gio, GLib


def code(error):
    return error.code if error.domain == GLib.quark_to_string(Gio.io_error_quark()) else -1


def main():
    args = sys.argv[1:]
    follow = bool(args) and args[0] == "--follow"
    targets = args[1:] if follow else args
    monitor = Gio.NetworkMonitor.get_default()
    loop = GLib.MainLoop()
    pending = [0]
    following = [False]
    print("ready", type(monitor).__gtype__.name, int(monitor.get_network_available()),
          int(monitor.get_network_metered()), int(monitor.get_connectivity()), flush=True)

    def changed(_monitor, available):
        print(f"changed {time.monotonic():.6f} {int(available)} {int(monitor.get_network_metered())} "
              f"{int(monitor.get_connectivity())} {int(monitor.get_network_available())}", flush=True)
    monitor.connect("network-changed", changed)

    def connectable(target):
        if not GLib.hostname_is_ip_address(target):
            return Gio.NetworkAddress.new(target, 80)
        return Gio.InetSocketAddress.new(Gio.InetAddress.new_from_string(target), 80)

    def answer(how, target, call):
        try:
            call()
            print("reach", how, target, "ok", flush=True)
        except GLib.Error as error:
            print("reach", how, target, "error", code(error), error.message, flush=True)

    def ask(target):
        def reached(source, result):
            answer("async", target, lambda: source.can_reach_finish(result))
            pending[0] -= 1
            if pending[0] == 0 and not following[0]:
                loop.quit()
        pending[0] += 1
        monitor.can_reach_async(connectable(target), None, reached)

    for target in targets:
        answer("sync", target, lambda: monitor.can_reach(connectable(target), None))
        ask(target)
    if pending[0]:
        loop.run()
    if follow:
        following[0] = True

        def line(channel, _condition):
            status, text, _length, _end = channel.read_line()
            if status == GLib.IOStatus.NORMAL:
                words = text.split()
                if words[:1] == ["sync"] and len(words) == 2:
                    answer("sync", words[1], lambda: monitor.can_reach(connectable(words[1]), None))
                elif words:
                    ask(text.strip())
                return True
            loop.quit()
            return False
        channel = GLib.IOChannel.unix_new(0)
        GLib.io_add_watch(channel, GLib.PRIORITY_DEFAULT, GLib.IOCondition.IN | GLib.IOCondition.HUP, line)
        loop.run()


if __name__ == "__main__":
    main()
