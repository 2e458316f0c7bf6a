import ReachabilityBus
import ReachabilityLoop

/// Where the registries put their objects: the bus connection, or, in a unit test,
/// the object tree alone (the dispatcher answers it by hand, its signals are
/// recorded), so that watching, sharing and releasing are tested without a bus.
@LoopActor
protocol ObjectExporter: AnyObject {
    /// Exports `interfaces` at `path` (`BusConnection.export(at:interfaces:audience:)`).
    @discardableResult
    func export(at path: ObjectPath, interfaces: [BoundInterface], audience: ObjectAudience?) -> ExportedObject
    /// Removes the object at `path`, announcing it to `listeners` (`nil`: its audience's).
    func unexport(_ path: ObjectPath, to listeners: [String]?)
    /// Announces the object at `path` to listeners that can see it from now on.
    func announceAdded(_ path: ObjectPath, to listeners: [String])
    /// Announces the object at `path` as gone to listeners that cannot see it any more.
    func announceRemoved(_ path: ObjectPath, to listeners: [String])
    /// Gives back the storage left by many unexported objects.
    func compactObjects()
}

extension BusConnection: ObjectExporter {}
