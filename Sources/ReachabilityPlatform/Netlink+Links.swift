import CNetlink
import Glibc
import ReachabilityCore

// The kernel's links (`RTM_GETLINK`) and the interface type each one is: ARPHRD, the
// link kind, and sysfs.

extension Netlink {
    /// Every link, by index (`RTM_GETLINK` dump).
    public func links() throws(NetlinkError) -> [Int32: LinkFact] {
        var payload = ifinfomsg()
        payload.ifi_family = UInt8(AF_UNSPEC)
        let answer = try request(type: UInt16(RTM_GETLINK), flags: NLM_F_DUMP,
                                 payload: withUnsafeBytes(of: payload) { Array($0) })
        var links: [Int32: LinkFact] = [:]
        for (type, body) in answer where type == RTM_NEWLINK {
            guard let link = parseLink(body) else { continue }
            links[link.index] = link
        }
        return links
    }

    func parseLink(_ body: [UInt8]) -> LinkFact? {
        let size = MemoryLayout<ifinfomsg>.size
        guard body.count >= size else { return nil }
        let info = body.withUnsafeBytes { $0.loadUnaligned(as: ifinfomsg.self) }
        let attrs = Self.attributes(body, from: size)
        guard let name = Self.string(attrs[UInt16(IFLA_IFNAME)]) else { return nil }
        let kind = attrs[UInt16(IFLA_LINKINFO)].flatMap {
            Self.string(Self.attributes($0, from: 0)[UInt16(IFLA_INFO_KIND)])
        }
        let operState: LinkFact.OperState =
            switch attrs[UInt16(IFLA_OPERSTATE)]?.first.map(Int32.init) {
            case Int32(REACH_IF_OPER_UP): .up
            case Int32(REACH_IF_OPER_UNKNOWN), nil: .unknown
            default: .down
            }
        let (type, tunnel) = kernelType(name: name, arphrd: info.ifi_type, kind: kind, flags: info.ifi_flags)
        return LinkFact(
            index: info.ifi_index, name: name,
            isUp: info.ifi_flags & UInt32(IFF_UP) != 0,
            hasCarrier: info.ifi_flags & reach_iff_lower_up() != 0,
            operState: operState, kernelType: type, isTunnel: tunnel,
            isPointToPoint: info.ifi_flags & UInt32(IFF_POINTOPOINT) != 0,
            group: Self.int32(attrs[UInt16(IFLA_GROUP)]).map { UInt32(bitPattern: $0) } ?? 0,
            master: Self.int32(attrs[UInt16(IFLA_MASTER)]) ?? 0,
            hasNoARP: info.ifi_flags & UInt32(IFF_NOARP) != 0,
            carrierChanges: Self.int32(attrs[UInt16(IFLA_CARRIER_CHANGES)]).map { UInt32(bitPattern: $0) } ?? 0)
    }

    /// The type the kernel tells: ARPHRD, the link kind, and sysfs `DEVTYPE` / `wireless`.
    private func kernelType(name: String, arphrd: UInt16, kind: String?, flags: UInt32) -> (InterfaceType, Bool) {
        let key = "\(name)/\(arphrd)/\(kind ?? "")"
        if let cached = kernelTypes[key] { return cached }
        let tunnelKinds: Set<String> = ["tun", "wireguard", "ppp", "gre", "gretap", "ipip", "sit", "ip6tnl", "vti", "vti6"]
        var result: (InterfaceType, Bool)
        switch Int32(arphrd) {
        case ARPHRD_LOOPBACK:
            result = (.loopback, false)
        case ARPHRD_ETHER:
            let devtype = Sysfs.devtype(name)
            if devtype == "wlan" || Sysfs.isWireless(name) {
                result = (.wifi, false)
            } else if devtype == "wwan" {
                result = (.wwan, false)
            } else if devtype == "bluetooth" {
                result = (.bluetooth, false)
            } else {
                result = (.ethernet, kind.map(tunnelKinds.contains) ?? false)
            }
        case ARPHRD_PPP, ARPHRD_NONE, ARPHRD_TUNNEL, ARPHRD_TUNNEL6, ARPHRD_IPGRE, ARPHRD_SIT:
            let devtype = Sysfs.devtype(name)
            result = devtype == "wwan" ? (.wwan, false) : (.other, true)
        case ARPHRD_IEEE80211, ARPHRD_IEEE80211_RADIOTAP:
            result = (.wifi, false)
        default:
            result = (.other, flags & UInt32(IFF_POINTOPOINT) != 0)
        }
        if kernelTypes.count > 4096 { kernelTypes.removeAll() }
        kernelTypes[key] = result
        return result
    }
}

/// `/sys/class/net/IF/…` reads for the interface type.
enum Sysfs {
    /// A file's text (a file of `/sys` or `/proc`, or with `limit`, up to that many bytes).
    static func read(_ path: String, limit: Int? = nil) -> String? { Syscall.readFile(path, limit: limit ?? 4096) }

    static func isSafeName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.contains("/")
    }

    /// `DEVTYPE=` from `/sys/class/net/IF/uevent`.
    static func devtype(_ name: String) -> String? {
        guard isSafeName(name), let uevent = read("/sys/class/net/\(name)/uevent") else { return nil }
        for line in uevent.split(separator: "\n") where line.hasPrefix("DEVTYPE=") {
            return String(line.dropFirst("DEVTYPE=".count))
        }
        return nil
    }

    /// `/sys/class/net/IF/wireless` exists.
    static func isWireless(_ name: String) -> Bool {
        guard isSafeName(name) else { return false }
        return access("/sys/class/net/\(name)/wireless", F_OK) == 0
    }
}
