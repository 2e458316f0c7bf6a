extension FeedKey {
    /// What Apple's `SCNetworkReachabilityGetFlags` answers for this key when no answer
    /// of its own has come (not scheduled, or scheduled and not yet answered): for a name
    /// (a host, or a string no lookup can succeed for) the internet's, without a lookup,
    /// as configd evaluates a name's path without resolving it; else the key itself. The
    /// SystemConfiguration functions and Alamofire's manager both read through it, so
    /// the two agree on any name.
    package var readWithoutLookup: FeedKey {
        switch self {
        case .input(.internet), .input(.address), .input(.pair): self
        case .input(.host), .unresolvable: .internet
        }
    }
}
