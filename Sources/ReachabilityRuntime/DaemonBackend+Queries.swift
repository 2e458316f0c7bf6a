import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

/// One-shot calls to the daemon, and the Manager method that holds each kind of target.
extension DaemonBackend {
    /// One answer (`Query`). An address pair is not named by `Query`'s one string: the
    /// runtime asks for it through its feed (`Runtime.query`), never here.
    func query(_ key: FeedKey, _ completion: @escaping (Result<ReachabilityState, ReachabilityError>) -> Void) {
        guard case .input(let input) = key else { return completion(.success(Runtime.answer(key)!)) }  // never sent here
        guard let text = input.queryText else {
            return completion(.failure(.failed("an address pair is queried through its watch")))
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
                    let kind = properties[Contract.Target.kind.name]?.stringValue ?? ""
                    // A kind this version does not know (a newer daemon's) is not taken for another.
                    guard let listed = TargetDescription<String>(kind: kind, name: name) else { return nil }
                    let watched = ReachabilityTarget(listed)
                    return ReachabilitySnapshot(target: watched, state: ReachabilityState(properties: properties))
                }.sorted { $0.target.description < $1.target.description }
            })
        }
    }

    /// The Manager method that holds `key`'s target, and its arguments (a name no lookup can
    /// succeed for is never sent: the internet's, should it be).
    static func watchCall(_ key: FeedKey) -> (member: String, arguments: [DBusValue]) {
        let call = if case .input(let input) = key { input.holdingCall } else { TargetDescription<String>.internet(nil).holdingCall }
        return (call.member, call.arguments.map { .string($0) })
    }
}
