import CNetlink
import Glibc
import Logging
import ReachabilityCore
import ReachabilityFairness
import ReachabilityLoop

/// Listens to the kernel's link, address, route, rule, next-hop, neighbour and
/// device-configuration multicast groups, reports that something changed, and
/// says which cached route answers the events may have made stale
/// (`StalenessClassifier`, whose table lists every event and why). The facts
/// themselves are re-read once per coalesced evaluation.
@LoopActor
public final class NetlinkMonitor {
    private let fd: Int32
    private var source: SourceHandle?
    /// Where events are read into; kept, since every evaluation reads the socket once more.
    private var receiveBuffer = [UInt8](repeating: 0, count: 32768)
    /// What each event makes stale.
    public private(set) var classifier = StalenessClassifier()
    /// The socket's receive buffer asked for.
    static let receiveBufferSize = Int32(ServiceLimits.standard.netlinkReceiveBuffer)
    private let logger: Logger

    /// Binds to the groups (`Netlink.multicastSocket`).
    public init(logger: Logger, onChange: @escaping (RouteInvalidation) -> Void) throws(NetlinkError) {
        self.logger = logger
        // Room for a burst (a neighbour table filling, a thousand routes): events that do not
        // fit are lost, and losing them costs an evaluation of everything. Beyond `rmem_max`
        // only with CAP_NET_ADMIN (`SO_RCVBUFFORCE`); otherwise as much as the system allows.
        fd = try Netlink.multicastSocket(family: NETLINK_ROUTE, groups: reach_rtmgrp_all()) { socketFD in
            var size: Int32 = Self.receiveBufferSize
            let length = socklen_t(MemoryLayout<Int32>.size)
            if setsockopt(socketFD, SOL_SOCKET, SO_RCVBUFFORCE, &size, length) != 0 {
                _ = setsockopt(socketFD, SOL_SOCKET, SO_RCVBUF, &size, length)
            }
        }
        let socketFD = fd
        source = Sources.readable(fd: socketFD) { [unowned self] in
            if let invalidation = self.readQueued() { onChange(invalidation) }
            return true
        }
    }

    /// Reads every event the kernel has queued on the socket; `nil` when there was none
    /// that can move an answer. Also called right before an evaluation, so that a change
    /// the kernel made before it counts in it (its route lookups would see the change,
    /// its cache would not).
    public func readQueued() -> RouteInvalidation? {
        var sawSomething = false
        var invalidation = RouteInvalidation()
        reading: while true {
            switch Syscall.call({
                receiveBuffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            }) {
            case .success(let n) where n > 0:
                for (header, body) in Netlink.messages(in: receiveBuffer[0..<n]) {
                    let event = Self.event(header.nlmsg_type, body)
                    let stale = classifier.classify(event)
                    // Neighbours of addresses that are no followed gateway, other device settings:
                    // read, and nothing more (no evaluation is scheduled for them).
                    guard !stale.isEmpty || event.changesFacts else { continue }
                    sawSomething = true
                    invalidation.formUnion(stale)
                }
            case .failure(.noBufferSpace):
                // The kernel dropped events; forget every cached answer.
                logger.debug("kernel events were lost (ENOBUFS): every answer is asked again")
                sawSomething = true
                invalidation.formUnion(classifier.classify(.lost))
            default:
                break reading
            }
        }
        return sawSomething ? invalidation : nil
    }

    /// Takes the links' state from a dump made after the socket was bound, so that a
    /// link's first event is compared with it instead of being taken as "everything
    /// about this link changed".
    public func seed(_ links: [Int32: LinkFact]) {
        classifier.seed(links: links.values.map {
            ($0.index, $0.isUp, $0.hasCarrier, LinkSelectors(name: $0.name, group: $0.group, master: $0.master),
             $0.hasNoARP)
        })
    }

    /// Follows the neighbour state of these gateways (those of the cached answers).
    public func follow(gateways: Set<String>) {
        classifier.follow(gateways: gateways)
    }

    /// One rtnetlink message as the classifier's event.
    nonisolated static func event(_ type: UInt16, _ body: [UInt8]) -> KernelEvent {
        switch Int32(type) {
        case Int32(RTM_NEWLINK), Int32(RTM_DELLINK):
            guard body.count >= MemoryLayout<ifinfomsg>.size else { return .lost }
            let info = body.withUnsafeBytes { $0.loadUnaligned(as: ifinfomsg.self) }
            if Int32(type) == Int32(RTM_DELLINK) { return .linkRemoved(index: info.ifi_index) }
            let attrs = Netlink.attributes(body, from: MemoryLayout<ifinfomsg>.size)
            let selectors = Netlink.string(attrs[UInt16(IFLA_IFNAME)]).map { name in
                LinkSelectors(name: name, group: Netlink.int32(attrs[UInt16(IFLA_GROUP)]).map { UInt32(bitPattern: $0) } ?? 0,
                              master: Netlink.int32(attrs[UInt16(IFLA_MASTER)]) ?? 0)
            }
            return .link(index: info.ifi_index, isUp: info.ifi_flags & UInt32(IFF_UP) != 0,
                         hasCarrier: info.ifi_flags & reach_iff_lower_up() != 0, selectors: selectors,
                         hasNoARP: info.ifi_flags & UInt32(IFF_NOARP) != 0)
        case Int32(RTM_NEWNEIGH), Int32(RTM_DELNEIGH):
            guard body.count >= MemoryLayout<ndmsg>.size else { return .other }
            let message = body.withUnsafeBytes { $0.loadUnaligned(as: ndmsg.self) }
            let attrs = Netlink.attributes(body, from: MemoryLayout<ndmsg>.size)
            guard let destination = attrs[UInt16(NDA_DST)], let address = Netlink.addressText(destination)
            else { return .other }
            let state = Int32(type) == Int32(RTM_DELNEIGH) ? NeighbourState.absent : NeighbourState(nud: message.ndm_state)
            return .neighbour(address: address, state: state,
                              linkLayer: Int32(type) == Int32(RTM_DELNEIGH) ? nil : attrs[UInt16(NDA_LLADDR)])
        case Int32(RTM_NEWNETCONF), Int32(RTM_DELNETCONF):
            // struct netconfmsg { u8 ncm_family; }, then attributes from NLMSG_ALIGN(1).
            let attrs = Netlink.attributes(body, from: 4)
            return .deviceConfiguration(ignoresLinkdownRoutes: attrs[UInt16(NETCONFA_IGNORE_ROUTES_WITH_LINKDOWN)] != nil)
        case Int32(RTM_NEWROUTE), Int32(RTM_DELROUTE), Int32(RTM_NEWADDR), Int32(RTM_DELADDR),
            Int32(RTM_NEWRULE), Int32(RTM_DELRULE), Int32(RTM_NEWNEXTHOP), Int32(RTM_DELNEXTHOP):
            return .routing
        default:
            return .other
        }
    }

    isolated deinit {
        source?.cancel()
        close(fd)
    }
}
