import CNetlink
import Glibc
import Logging
import ReachabilityCore
import ReachabilityLoop

/// How the TCP connections of every program in the network namespace end: the kernel's
/// socket-destroy broadcasts (sock_diag's `SKNLGRP_INET_TCP_DESTROY` and its IPv6 twin,
/// which any user may hear), each reduced to a `ConnectionOutcome`: the destination and
/// whether anything ever came back from it. Nothing else of a connection is kept (not its
/// user, program, ports or traffic). Idle, it costs nothing: the socket is read when the
/// kernel writes to it, which it does only when a TCP socket ends, and while no failure is
/// pending a socket filter drops the answered ones in the kernel.
@LoopActor
public final class ConnectionOutcomeMonitor {
    private let fd: Int32
    private var source: SourceHandle?
    private var receiveBuffer = [UInt8](repeating: 0, count: 16384)
    /// Whether the kernel drops the connections that were answered before they reach this
    /// socket (`reach_drop_answered_connections`): while no failure is pending, a working
    /// network's connections do not wake the service.
    private var dropsAnswered = false

    /// Whether answered connections are wanted (`UpstreamEvidence.wantsAnswered`). Wraps
    /// `setsockopt(SO_ATTACH_FILTER)` and `SO_DETACH_FILTER`.
    public var passesAnswered: Bool {
        get { !dropsAnswered }
        set {
            guard newValue == dropsAnswered else { return }
            if reach_drop_answered_connections(fd, newValue ? 0 : 1) == 0 { dropsAnswered = !newValue }
        }
    }

    /// Binds to the groups (`Netlink.multicastSocket`).
    public init(onOutcome: @escaping (ConnectionOutcome) -> Void) throws(NetlinkError) {
        fd = try Netlink.multicastSocket(family: NETLINK_SOCK_DIAG, groups: reach_tcp_destroy_groups())
        let socketFD = fd
        dropsAnswered = reach_drop_answered_connections(socketFD, 1) == 0
        source = Sources.readable(fd: socketFD) { [unowned self] in
            for outcome in self.readQueued() { onOutcome(outcome) }
            return true
        }
    }

    isolated deinit {
        source?.cancel()
        close(fd)
    }

    /// Every outcome the kernel has queued. A burst larger than the socket's buffer is partly
    /// lost (`ENOBUFS`): it is evidence, not an account, so nothing is done about it.
    private func readQueued() -> [ConnectionOutcome] {
        var outcomes: [ConnectionOutcome] = []
        while true {
            let n = receiveBuffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            guard n > 0 else { return outcomes }
            for (header, body) in Netlink.messages(in: receiveBuffer[0..<n])
            where header.nlmsg_type == UInt16(SOCK_DIAG_BY_FAMILY) {
                if let outcome = Self.outcome(body) { outcomes.append(outcome) }
            }
        }
    }

    /// One destroyed socket: its destination (an IPv4 address a dual-stack socket named in
    /// IPv6's mapped form, in IPv4's) and whether it ever received a segment (`tcpi_segs_in`
    /// of its `tcp_info`); `nil` for a message without them (a kernel older than 4.2).
    nonisolated static func outcome(_ body: [UInt8]) -> ConnectionOutcome? {
        let size = MemoryLayout<inet_diag_msg>.size
        guard body.count >= size else { return nil }
        let message = body.withUnsafeBytes { $0.loadUnaligned(as: inet_diag_msg.self) }
        let destination = withUnsafeBytes(of: message.id.idiag_dst) { Array($0) }
        let address: [UInt8]
        switch Int32(message.idiag_family) {
        case AF_INET: address = Array(destination.prefix(4))
        case AF_INET6 where destination.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]:
            address = Array(destination.suffix(4))
        case AF_INET6: address = destination
        default: return nil
        }
        // tcp_info: tcpi_segs_in is the u32 at byte 140 (after tcpi_segs_out).
        guard let info = Netlink.attributes(body, from: size)[UInt16(INET_DIAG_INFO)], info.count >= 144,
            let text = Netlink.addressText(address)
        else { return nil }
        let segmentsIn = info[140..<144].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
        return ConnectionOutcome(destination: text, answered: segmentsIn > 0)
    }
}
