/// Why a connection made before may be broken although `Status`/`Flags` may be unchanged
/// (docs/dbus-api.md, "The network under a connection"): the `Path` object's `Invalidated(s reason)`, once per event.
public enum InvalidationReason: String, Sendable, Hashable, CaseIterable {
    /// The machine resumed from sleep (logind's `PrepareForSleep(false)`, or without logind a
    /// jump of the wall clock): everything was read again.
    case resumed
    /// The network the default route leads to is another (`NetworkIdentity` changed).
    case networkChanged = "network-changed"
    /// A source address connections were made from (a default route's preferred source, now
    /// or before) left its link; another preferred source alone is not this.
    case sourceChanged = "source-changed"
    /// A VPN came or went on the default path.
    case vpnChanged = "vpn-changed"
    /// The DNS configuration changed (name servers, search domains).
    case dnsChanged = "dns-changed"
}
