import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

/// One-shot calls to the daemon, and the Manager method that holds each kind of target.
extension DaemonBackend {
    /// One answer (`Query`). An address pair is not named by `Query`'s one string: the
    /// runtime asks for it through its feed (`Runtime.query`), never here.
    func query(_ key: FeedKey, _ completion: @escaping (Result<ReachabilityState, ReachabilityError>) -> Void) {
        let text: String
        switch key {
        case .unresolvable: return completion(.success(Runtime.answer(key)!))  // never sent here
        case .input(.pair): return completion(.failure(.failed("an address pair is queried through its watch")))
        case .input(let input): text = input.name
        case .internet: text = ""
        }
        call(Self.root, ServiceNames.managerInterface, Contract.Manager.query.name, [.string(text)]) { result in
            completion(result.mapError(ReachabilityError.init).flatMap { values in
                guard values.count == 3, case .uint32(let flags) = values[0], case .int32(let status) = values[1],
                    case .dictionary(_, _, let details) = values[2]
                else { return .failure(.failed("unexpected reply to Query: \(values.signature)")) }
                return .success(ReachabilityState(flags: flags, status: status, details: details))
            })
        }
    }

    /// Every target object below the root (the daemon's `GetManagedObjects`).
    func watchedTargets(_ completion: @escaping (Result<[ReachabilitySnapshot], ReachabilityError>) -> Void) {
        call(Self.root, Self.objectManager, "GetManagedObjects") { result in
            completion(result.mapError(ReachabilityError.init).map { values in
                guard case .dictionary(_, _, let objects)? = values.first else { return [] }
                return objects.compactMap { object -> ReachabilitySnapshot? in
                    guard case .dictionary(_, _, let interfaces) = object.value,
                        let target = interfaces.first(where: { $0.key == .string(ServiceNames.targetInterface) }),
                        case .dictionary(_, _, let entries) = target.value
                    else { return nil }
                    let properties = Self.dictionary(entries)
                    let name = properties[Contract.Target.name.name]?.stringValue ?? ""
                    let kind = properties[Contract.Target.kind.name]?.stringValue
                    let watched: ReachabilityTarget = Self.target(kind: kind, name: name)
                    return ReachabilitySnapshot(target: watched, state: ReachabilityState(properties: properties))
                }.sorted { $0.target.description < $1.target.description }
            })
        }
    }

    /// The address the internet is watched as (Apple's internet target is 0.0.0.0): a held
    /// target whose properties and signals carry this caller's own answer (the root object's
    /// internet target is the system's: with uid rules, it may not be this user's).
    static let internetAddress = "0.0.0.0"

    /// The Manager method that holds `key`'s target, and its arguments.
    static func watchCall(_ key: FeedKey) -> (member: String, arguments: [DBusValue]) {
        switch key {
        case .internet, .unresolvable: (Contract.Manager.watchAddress.name, [.string(internetAddress)])
        case .input(let input):
            switch input {
            case .host: (Contract.Manager.watchHost.name, [.string(input.name)])
            case .address: (Contract.Manager.watchAddress.name, [.string(input.name)])
            case .pair(let local, let remote):
                (Contract.Manager.watchAddressPair.name,
                 [.string(local?.description ?? ""), .string(remote?.description ?? "")])
            }
        }
    }

    /// A listed target from its `Kind` and `Name` (a pair's name is its two literals joined by a comma).
    static func target(kind: String?, name: String) -> ReachabilityTarget {
        switch kind {
        case TargetKind.internet.rawValue: return .internet
        case TargetKind.address.rawValue: return .address(name)
        case TargetKind.pair.rawValue:
            let sides = name.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            return .addressPair(local: sides.first ?? "", remote: sides.count > 1 ? sides[1] : "")
        default: return .host(name)
        }
    }
}
