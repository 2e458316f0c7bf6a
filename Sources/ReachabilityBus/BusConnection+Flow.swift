import CDBus
import Glibc
import ReachabilityLoop

/// How a connection takes in a flood and lets its answers out, so that one caller's
/// flood does not make other callers wait behind it.
///
/// The bus hands the service every caller's calls in one stream, in the order they came:
/// a call of a user who sends one now and then arrives behind everything a flooding user
/// has in flight. Left there — read 2 KiB at a time (libdbus's turn) and each call served
/// as it is read — it waits for all of them. So, while calls keep coming:
///
/// - what the bus has written is read ahead (a bounded amount a turn) and each call goes
///   to the callers' round-robin queue (`Callers`) instead of being served at once: the
///   other user's call is served after at most one call of each user with calls waiting;
/// - queued calls are served only while the answers already made are leaving: answers the
///   bus has not taken wait in one line, in order, ahead of the answer to that other call.
///   Serving resumes when the socket can be written to again — an event, not a timer;
/// - a serving connection's socket holds only a few answers (`Limits.sendBuffer`), so that line is
///   short where nothing can reorder it.
extension BusConnection {
    // The bounds (`limits`): `dispatchBatch` messages a turn, so that a flood cannot starve
    // NetworkManager, netlink or the timers; `readsPerTurn` reads ahead (libdbus reads about
    // 2 KiB a time); read ahead only after `floodedAfter` messages in a turn (below it a call is
    // served as soon as it is read); behind past `outgoingBehind` bytes in libdbus's outgoing
    // queue (the socket is full: libdbus writes into it at once and keeps only what it did not take).

    /// Dispatches what libdbus has read, reading ahead while calls keep coming; then, if
    /// anything is left, comes back in the next turn of the loop.
    func dispatchTurn() {
        var dispatched = 0
        var reads = 0
        while dispatched < limits.dispatchBatch {
            if dbus_connection_get_dispatch_status(raw) != DBUS_DISPATCH_DATA_REMAINS {
                guard dispatched >= limits.floodedAfter, reads < limits.readsPerTurn, bytesWaitingToBeRead > 0 else {
                    return
                }
                reads += 1
                // Reads what is there (and writes what can be written), without blocking.
                _ = dbus_connection_read_write(raw, 0)
                continue
            }
            _ = dbus_connection_dispatch(raw)
            dispatched += 1
        }
        scheduleDispatch()
    }

    /// Whether an incoming call should wait its turn in the callers' queue rather than be
    /// served at once: more calls have been read behind it, or the answers are not leaving.
    var isFlooded: Bool {
        dbus_connection_get_dispatch_status(raw) == DBUS_DISPATCH_DATA_REMAINS || isWritingBehind
    }

    /// Whether the answers already made wait to be written (the socket is full).
    var isWritingBehind: Bool { dbus_connection_get_outgoing_size(raw) > limits.outgoingBehind }

    /// Serving waits until the socket can be written to; then what is queued is served
    /// again. False when there is no socket to watch (not expected of a bus connection):
    /// then serving goes on.
    func waitForOutput() -> Bool {
        guard outputWatch == nil else { return true }
        guard let fd = socket else { return false }
        outputWatch = Sources.writable(fd: fd) { [unowned self] in
            // libdbus's own watch on the same socket writes what it holds, a part a turn.
            guard !self.isWritingBehind else { return true }
            self.outputWatch = nil
            self.scheduleServing()
            return false
        }
        return true
    }

    /// Whether messages the bus has sent wait to be read or dispatched: an answer may be
    /// among them.
    var isReadingBehind: Bool {
        dbus_connection_get_dispatch_status(raw) == DBUS_DISPATCH_DATA_REMAINS || bytesWaitingToBeRead > 0
    }

    /// Bytes the bus has written to this connection that it has not read yet. Wraps
    /// `ioctl(FIONREAD)` on libdbus's socket.
    private var bytesWaitingToBeRead: Int32 {
        guard let fd = socket else { return 0 }
        var count: Int32 = 0
        return ioctl(fd, UInt(FIONREAD), &count) == 0 ? count : 0
    }

    /// The socket's send buffer a serving connection asks for (`limits.sendBuffer`; the kernel doubles it, and
    /// charges each message's bookkeeping to it): a few answers. An answer the bus has not
    /// read waits there, in line, ahead of every later one — with the default (208 KiB) a
    /// few hundred of a flooding caller's answers were ahead of another user's. A smaller
    /// buffer keeps that line in libdbus's queue instead, where `isWritingBehind` sees it and
    /// the callers' queue decides what is answered next. Throughput is the bus's either way.
    /// Makes the socket's send buffer that. Wraps `setsockopt(SO_SNDBUF)`.
    func limitSendBuffer() {
        guard let fd = socket else { return }
        var size = Int32(limits.sendBuffer)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// The connection's socket. Wraps `dbus_connection_get_socket`.
    private var socket: Int32? {
        var fd: Int32 = -1
        return dbus_connection_get_socket(raw, &fd) != 0 && fd >= 0 ? fd : nil
    }
}

