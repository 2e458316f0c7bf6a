import CDBus
import Glibc
import ReachabilityCore
import ReachabilityFairness
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
///
/// What is decided — whether to read ahead, serve at once, wait for the socket — the
/// scheduler decides (`CallScheduler`); here the bytes move, and the socket and libdbus's
/// queues are read for it (`SocketGauge`).
extension BusConnection {
    /// Dispatches what libdbus has read, reading ahead while calls keep coming; then, if
    /// anything is left, comes back in the next turn of the loop.
    func dispatchTurn() {
        var dispatched = 0
        var reads = 0
        while true {
            switch callers.scheduler.dispatchStep(dispatched: dispatched, reads: reads, flow) {
            case .dispatch:
                _ = dbus_connection_dispatch(raw)
                dispatched += 1
            case .readAhead:
                reads += 1
                // Reads what is there (and writes what can be written), without blocking.
                _ = dbus_connection_read_write(raw, 0)
            case .done:
                return
            case .nextTurn:
                return scheduleDispatch()
            }
        }
    }

    /// What the scheduler sees of this connection's socket and queues.
    var flow: SocketGauge { SocketGauge(raw: raw) }

    /// Whether the answers already made wait to be written (the socket is full).
    var isWritingBehind: Bool { callers.scheduler.isWritingBehind(flow) }

    /// Serving waits until the socket can be written to; then what is queued is served
    /// again. False when there is no socket to watch (not expected of a bus connection):
    /// then serving goes on.
    func waitForOutput() -> Bool {
        guard outputWatch == nil else { return true }
        guard let fd = flow.socket else { return false }
        outputWatch = Sources.writable(fd: fd) { [unowned self] in
            // libdbus's own watch on the same socket writes what it holds, a part a turn.
            guard !self.isWritingBehind else { return true }
            self.outputWatch = nil
            self.scheduleServing()
            return false
        }
        return true
    }

    /// The socket's send buffer a serving connection asks for (`limits.sendBuffer`; the kernel doubles it, and
    /// charges each message's bookkeeping to it): a few answers. An answer the bus has not
    /// read waits there, in line, ahead of every later one — with the default (208 KiB) a
    /// few hundred of a flooding caller's answers were ahead of another user's. A smaller
    /// buffer keeps that line in libdbus's queue instead, where `isWritingBehind` sees it and
    /// the callers' queue decides what is answered next. Throughput is the bus's either way.
    /// Makes the socket's send buffer that. Wraps `setsockopt(SO_SNDBUF)`.
    func limitSendBuffer() {
        guard let fd = flow.socket else { return }
        var size = Int32(callers.scheduler.sendBuffer)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }
}

/// A libdbus connection's socket and queues, read when the scheduler asks.
struct SocketGauge: FlowGauge {
    let raw: OpaquePointer

    /// Whether libdbus has read messages not yet dispatched. Wraps `dbus_connection_get_dispatch_status`.
    var messagesWaiting: Bool { dbus_connection_get_dispatch_status(raw) == DBUS_DISPATCH_DATA_REMAINS }

    /// Bytes in libdbus's outgoing queue: libdbus writes into the socket at once and keeps only
    /// what it did not take. Wraps `dbus_connection_get_outgoing_size`.
    var outgoingBytes: Int { Int(dbus_connection_get_outgoing_size(raw)) }

    /// Bytes the bus has written to this connection that it has not read yet. Wraps
    /// `ioctl(FIONREAD)` on libdbus's socket.
    var bytesToRead: Int {
        guard let fd = socket else { return 0 }
        var count: Int32 = 0
        return ioctl(fd, UInt(FIONREAD), &count) == 0 ? Int(count) : 0
    }

    /// The connection's socket. Wraps `dbus_connection_get_socket`.
    var socket: Int32? {
        var fd: Int32 = -1
        return dbus_connection_get_socket(raw, &fd) != 0 && fd >= 0 ? fd : nil
    }
}
