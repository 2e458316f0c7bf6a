import Dispatch

// Alamofire 4's spellings, which connectivity wrappers written for it still use: a
// `listener` property set before or after `startListening()`, a `listenerQueue`, the
// connection type named `NetworkReachabilityManager.ConnectionType` with `.wwan` for
// cellular, and `isReachableOnWWAN` / `networkReachabilityStatus`. Each means what it
// meant in Alamofire 4 and is deprecated for Alamofire 5's name, as Alamofire 5 did.

extension NetworkReachabilityManager {
    /// Alamofire 4's `ConnectionType` (`.ethernetOrWiFi`, `.wwan`): the same type as
    /// `NetworkReachabilityStatus.ConnectionType`, so `.reachable(.wwan)` still matches.
    @available(*, deprecated, renamed: "NetworkReachabilityStatus.ConnectionType")
    public typealias ConnectionType = NetworkReachabilityStatus.ConnectionType

    /// Alamofire 4's listener and its queue (Alamofire 5 passes them to `startListening`).
    struct Alamofire4Listening: Sendable {
        var listener: Listener?
        var queue: DispatchQueue = .main
    }

    /// Alamofire 4's listener: called on `listenerQueue` with the status at
    /// `startListening()` and with each change after, whether set before or after it.
    @available(*, deprecated, message: "Pass the listener to startListening(onQueue:onUpdatePerforming:)")
    public var listener: Listener? {
        get { alamofire4.withLock { $0.listener } }
        set { alamofire4.withLock { $0.listener = newValue } }
    }

    /// Alamofire 4's queue for `listener` (the main queue unless set).
    @available(*, deprecated, message: "Pass the queue to startListening(onQueue:onUpdatePerforming:)")
    public var listenerQueue: DispatchQueue {
        get { alamofire4.withLock { $0.queue } }
        set { alamofire4.withLock { $0.queue = newValue } }
    }

    /// Alamofire 4's `startListening()`: starts calling `listener` (as it is at each
    /// call) on `listenerQueue`; `false` when the target cannot be watched.
    @available(*, deprecated, message: "Use startListening(onQueue:onUpdatePerforming:)")
    @discardableResult
    public func startListening() -> Bool {
        let legacy = alamofire4
        // Updates are handed on through `reachabilityQueue`, then to the queue set at that
        // time, where the listener set by then is called.
        return startListening(onQueue: reachabilityQueue) { status in
            legacy.withLock { $0.queue }.async { legacy.withLock { $0.listener }?(status) }
        }
    }

    /// Alamofire 4's `networkReachabilityStatus`: `status`.
    @available(*, deprecated, renamed: "status")
    public var networkReachabilityStatus: NetworkReachabilityStatus { status }

    /// Alamofire 4's `isReachableOnWWAN`: `isReachableOnCellular`.
    @available(*, deprecated, renamed: "isReachableOnCellular")
    public var isReachableOnWWAN: Bool { isReachableOnCellular }
}

extension NetworkReachabilityManager.NetworkReachabilityStatus.ConnectionType {
    /// Alamofire 4's name for a connection over mobile broadband: `.cellular`.
    @available(*, deprecated, renamed: "cellular")
    public static var wwan: Self { .cellular }
}
