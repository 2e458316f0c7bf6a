import ReachabilityLoop

/// Level-triggered delivery: what a peer that has fallen behind is not sent now, it
/// is sent once it reads again — not every change it missed, but the *current* state
/// of every object that changed meanwhile. Intermediate states may be coalesced; the
/// last one never is.
///
/// Per peer and object the tree keeps one entry: what the peer was last told of the
/// object (a fingerprint of its announced properties, or nothing if the object is
/// new to it) and the signals it is owed. So a peer costs at most one entry per object
/// it hears, whatever happens and however long it does not read. Once it reads again
/// (`resume`), each entry becomes what differs: `InterfacesAdded` for an object new
/// to it, `InterfacesRemoved` for one gone (or no longer its), else one
/// `PropertiesChanged` per interface with every property that differs from what it
/// was told and the object's follow-up (`StatusChanged` when `Flags` differs), and the
/// owed signals with their latest values.
struct Withheld {
    /// What the peer was last told of the object's properties; `nil`: it does not know
    /// the object (it was added for it meanwhile).
    var told: ExportedObject.Fingerprint?
    /// The object's interfaces, for `InterfacesRemoved` once it is gone.
    var interfaces: [String]
    /// Declared signals owed to the peer, by name, with their latest arguments.
    var owed: [String: (signal: Signal, interface: String, values: [DBusValue])] = [:]
}

extension ObjectTree {
    /// `peer`, behind, is not told that `path`'s properties changed; it was last told `told`.
    func withhold(_ path: ObjectPath, from peer: String, told: ExportedObject.Fingerprint, interfaces: [String]) {
        guard withheld[peer]?[path] == nil else { return }
        withheld[peer, default: [:]][path] = Withheld(told: told, interfaces: interfaces)
    }

    /// `peer`, behind, is not told now that `path` was added for it. Returns `false`.
    func withholdAdded(_ path: ObjectPath, from peer: String) -> Bool {
        // An entry already there says what it was told before; else it was told nothing.
        if withheld[peer]?[path] == nil {
            withheld[peer, default: [:]][path] = Withheld(told: nil, interfaces: objects[path]?.interfaceNames ?? [])
        }
        return false
    }

    /// `peer`, behind, is not told now that `object` went away for it. Returns `false`.
    func withholdRemoved(_ object: ExportedObject, from peer: String) -> Bool {
        switch withheld[peer]?[object.path] {
        case .some(let entry) where entry.told == nil:
            // Added and removed while it was not reading: nothing to tell.
            withheld[peer]![object.path] = nil
            if withheld[peer]!.isEmpty { withheld[peer] = nil }
        case .some:
            break  // It knows the object as it was told: once it reads, the object is gone.
        case .none:
            withheld[peer, default: [:]][object.path] = Withheld(told: object.told(to: peer), interfaces: object.interfaceNames)
        }
        return false
    }

    /// `peer`, behind, is owed `signal` of `object` (its latest arguments win).
    func owe(_ signal: Signal, interface: String, _ values: [DBusValue], on object: ExportedObject, to peer: String) {
        var entry = withheld[peer]?[object.path] ?? Withheld(told: object.told(to: peer), interfaces: object.interfaceNames)
        entry.owed[signal.name] = (signal, interface, values)
        withheld[peer, default: [:]][object.path] = entry
    }

    /// Whether anything is kept for `peer`.
    func isWithholding(from peer: String) -> Bool { withheld[peer] != nil }

    /// The number of entries kept for `peer` (what it would be sent once it reads).
    func withheldCount(for peer: String) -> Int { withheld[peer]?.count ?? 0 }

    /// `peer` reads again: sends it the current state of everything it missed, until it
    /// falls behind again (what is left then waits for its next turn).
    func resume(_ peer: String) {
        guard var entries = withheld.removeValue(forKey: peer) else { return }
        while let (path, entry) = entries.popFirst() {
            guard !isBehind(peer) else {
                entries[path] = entry
                withheld[peer, default: [:]].merge(entries) { newer, _ in newer }
                return
            }
            catchUp(peer, on: path, entry)
        }
    }

    private func catchUp(_ peer: String, on path: ObjectPath, _ entry: Withheld) {
        guard let object = objects[path], object.audience?.hears(peer) ?? true else {
            // Gone, or no longer its: it hears of it only if it knew of it.
            if entry.told != nil, let manager = managerAbove(path) {
                emit(manager, StandardInterface.objectManager.name, "InterfacesRemoved",
                     [.objectPath(path), .strings(entry.interfaces)], [peer])
            }
            return
        }
        if let told = entry.told {
            object.catchUp(peer, told: told)
        } else {
            announceAdded(path, to: [peer])
        }
        for (_, owed) in entry.owed { object.send(owed.signal, interface: owed.interface, owed.values, to: [peer]) }
    }

    /// `peer` left the bus: nothing is kept for it.
    func forgetWithheld(_ peer: String) { withheld[peer] = nil }
}
