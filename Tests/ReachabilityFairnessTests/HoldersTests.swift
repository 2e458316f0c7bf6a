import Testing
import ReachabilityCore
@testable import ReachabilityFairness

@Suite("Holders of watched targets")
struct HoldersTests {
    @Test("holding is idempotent per client")
    func idempotent() throws {
        var registry = HolderRegistry<String>()
        #expect(try registry.hold("example.com", client: ":1.1", user: 1))
        #expect(try !registry.hold("example.com", client: ":1.1", user: 1))
        #expect(registry.count == 1)
        #expect(registry.holders(of: "example.com") == [":1.1"])
        #expect(registry.targets(of: ":1.1") == ["example.com"])
        // Held twice, released once: gone.
        #expect(try registry.release("example.com", client: ":1.1"))
        #expect(registry.count == 0)
        #expect(!registry.contains("example.com"))
    }

    @Test("clients share a target; only the first hold creates it, only the last release removes it")
    func sharing() throws {
        var registry = HolderRegistry<String>()
        #expect(try registry.hold("example.com", client: ":1.1", user: 1))
        #expect(try !registry.hold("example.com", client: ":1.2", user: 2))
        #expect(registry.count == 1)
        #expect(registry.holders(of: "example.com") == [":1.1", ":1.2"])
        #expect(try !registry.release("example.com", client: ":1.1"))
        #expect(registry.holders(of: "example.com") == [":1.2"])
        #expect(registry.targets(of: ":1.1").isEmpty)
        #expect(registry.contains("example.com"))
        #expect(try registry.release("example.com", client: ":1.2"))
        #expect(registry.holders(of: "example.com").isEmpty)
        #expect(registry.count == 0)
        // Held again after it went away: created again.
        #expect(try registry.hold("example.com", client: ":1.2", user: 2))
    }

    @Test("releasing what a client does not hold is UnknownTarget")
    func unknownRelease() throws {
        var registry = HolderRegistry<String>()
        #expect(throws: HoldError.self) { try registry.release("example.com", client: ":1.1") }
        _ = try registry.hold("example.com", client: ":1.1", user: 1)
        let error = #expect(throws: HoldError.self) { try registry.release("example.com", client: ":1.2") }
        guard case .unknownTarget(let message)? = error else {
            Issue.record("expected unknownTarget, got \(String(describing: error))")
            return
        }
        #expect(message.contains(":1.2"))
        #expect(message.contains("does not hold"))
        // The failed release changed nothing.
        #expect(registry.holders(of: "example.com") == [":1.1"])
        #expect(try registry.release("example.com", client: ":1.1"))
        #expect(throws: HoldError.self) { try registry.release("example.com", client: ":1.1") }
    }

    @Test("the per-client limit: the 257th target is refused, a released slot is reusable")
    func perClientLimit() throws {
        var registry = HolderRegistry<Int>()
        #expect(registry.perClientLimit == 256)
        for key in 0..<256 {
            #expect(try registry.hold(key, client: ":1.1", user: 1))
        }
        let error = #expect(throws: HoldError.self) { try registry.hold(256, client: ":1.1", user: 1) }
        guard case .tooManyTargets(let message)? = error else {
            Issue.record("expected tooManyTargets, got \(String(describing: error))")
            return
        }
        #expect(message.contains("per-client limit is 256"))
        #expect(message.contains(":1.1"))
        // Re-holding one it already has is still fine (idempotent, not counted).
        #expect(try !registry.hold(0, client: ":1.1", user: 1))
        // A target another client created is refused as well: the limit counts holds.
        _ = try registry.hold(1000, client: ":1.2", user: 2)
        #expect(throws: HoldError.self) { try registry.hold(1000, client: ":1.1", user: 1) }
        // Another client is not affected.
        #expect(try registry.hold(256, client: ":1.2", user: 2))
        #expect(registry.targets(of: ":1.1").count == 256)
        // After a release the slot can be used again.
        #expect(try registry.release(5, client: ":1.1"))
        #expect(try !registry.hold(256, client: ":1.1", user: 1))
        #expect(throws: HoldError.self) { try registry.hold(257, client: ":1.1", user: 1) }
    }

    @Test("the global limit counts distinct targets")
    func globalLimit() throws {
        var registry = HolderRegistry<Int>(perClientLimit: 10, globalLimit: 4)
        #expect(try registry.hold(1, client: ":1.1", user: 1))
        #expect(try registry.hold(2, client: ":1.1", user: 1))
        #expect(try registry.hold(3, client: ":1.2", user: 2))
        #expect(try registry.hold(4, client: ":1.3", user: 3))
        let error = #expect(throws: HoldError.self) { try registry.hold(5, client: ":1.4", user: 4) }
        guard case .tooManyTargets(let message)? = error else {
            Issue.record("expected tooManyTargets, got \(String(describing: error))")
            return
        }
        #expect(message.contains("global limit is 4"))
        #expect(registry.targets(of: ":1.4").isEmpty)
        // Sharing an existing target adds no distinct target, so it is allowed.
        #expect(try !registry.hold(1, client: ":1.4", user: 4))
        #expect(registry.count == 4)
        // Releasing a shared target frees nothing; releasing the last holder does.
        #expect(try !registry.release(1, client: ":1.1"))
        #expect(throws: HoldError.self) { try registry.hold(5, client: ":1.4", user: 4) }
        #expect(try registry.release(2, client: ":1.1"))
        #expect(try registry.hold(5, client: ":1.4", user: 4))
    }

    @Test("the default limits are the specification's")
    func defaults() {
        let registry = HolderRegistry<String>()
        #expect(registry.perClientLimit == 256)
        #expect(registry.globalLimit == 16384)
    }

    @Test("a key's holders, grouped by their user")
    func holdersByUser() throws {
        var registry = HolderRegistry<String>()
        _ = try registry.hold("a", client: ":1.1", user: 7)
        _ = try registry.hold("a", client: ":1.2", user: 7)
        _ = try registry.hold("a", client: ":1.3", user: 8)
        _ = try registry.hold("b", client: ":1.4", user: 9)
        let grouped = registry.holdersByUser(of: "a").mapValues { Set($0) }
        #expect(grouped == [7: [":1.1", ":1.2"], 8: [":1.3"]])
        #expect(registry.holdersByUser(of: "none").isEmpty)
    }

    @Test("releaseAll returns exactly the targets that lost their last holder")
    func releaseAll() throws {
        var registry = HolderRegistry<String>()
        _ = try registry.hold("only-a", client: ":1.1", user: 1)
        _ = try registry.hold("shared", client: ":1.1", user: 1)
        _ = try registry.hold("shared", client: ":1.2", user: 2)
        _ = try registry.hold("also-only-a", client: ":1.1", user: 1)
        _ = try registry.hold("only-b", client: ":1.2", user: 2)
        let orphaned = registry.releaseAll(client: ":1.1")
        #expect(orphaned.count == 2)
        #expect(Set(orphaned) == ["only-a", "also-only-a"])
        #expect(registry.targets(of: ":1.1").isEmpty)
        #expect(registry.holders(of: "shared") == [":1.2"])
        #expect(registry.count == 2)
        // A client that holds nothing (or left already) releases nothing.
        #expect(registry.releaseAll(client: ":1.1").isEmpty)
        #expect(registry.releaseAll(client: ":1.99").isEmpty)
        #expect(Set(registry.releaseAll(client: ":1.2")) == ["shared", "only-b"])
        #expect(registry.count == 0)
    }

    @Test("after releaseAll the client's per-client quota is free again")
    func releaseAllFreesQuota() throws {
        var registry = HolderRegistry<Int>(perClientLimit: 2, globalLimit: 100)
        _ = try registry.hold(1, client: ":1.1", user: 1)
        _ = try registry.hold(2, client: ":1.1", user: 1)
        #expect(throws: HoldError.self) { try registry.hold(3, client: ":1.1", user: 1) }
        _ = registry.releaseAll(client: ":1.1")
        #expect(try registry.hold(3, client: ":1.1", user: 1))
    }
}
