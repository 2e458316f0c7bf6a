// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "reachabilityd",
    products: [
        .executable(name: "reachabilityd", targets: ["reachabilityd"]),
        .executable(name: "reachctl", targets: ["reachctl"]),
        // Alamofire-shaped reachability for Swift programs: the daemon when it
        // runs, the same engine in-process when it does not. Named after this
        // package, so that it clashes with no other package's module (SwiftPM
        // refuses a graph in which two packages declare one module name;
        // Reachability.swift's module is `Reachability`).
        .library(name: "ReachabilitydClient", targets: ["ReachabilitydClient"]),
        // Apple's Network-framework path monitoring (NWPathMonitor, NWPath) on the same facts.
        .library(name: "NetworkPath", targets: ["NetworkPath"]),
    ],
    dependencies: [
        // reachctl's command line only; the daemon and the library do not link it.
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        // The log's API (swift-log's `Logger`), linked by the daemon and the libraries alike: the
        // modules that log take a `Logger`; the daemon's records go to its journal / `<N>` /
        // terminal handler (ReachabilityLoop's `SystemLogHandler`, no `LoggingSystem.bootstrap`),
        // the client library's to the application's logger. `InMemoryLogging` for tests only.
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        // The service's instruments (swift-metrics' CoreMetrics API, without Foundation) and
        // their Prometheus text (swift-prometheus, linked by the daemon only). The URL as
        // swift-prometheus spells it (".git"): two spellings of one package are two
        // locations of one identity, which SwiftPM warns of where mirrors are set (the
        // source package's vendored build) and will refuse.
        .package(url: "https://github.com/apple/swift-metrics.git", exact: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", exact: "2.4.1"),
    ],
    targets: [
        // C libraries, imported through module maps; the shim headers hold the
        // few static-inline wrappers for macros and variadics Swift cannot call.
        .systemLibrary(
            name: "CDBus", pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]),
        // GLib, GObject and GIO: the main loop and the resolver. Nothing else.
        .systemLibrary(
            name: "CGLib", pkgConfig: "glib-2.0",
            providers: [.apt(["libglib2.0-dev"])]),
        // libnm through glib-2.0's pkg-config flags (its include paths, the
        // architecture's glibconfig.h among them): libnm's own pkg-config file
        // requires gio-2.0, which privately requires gmodule, whose -pthread
        // SwiftPM rejects with a warning on every build. The shim includes
        // <libnm/NetworkManager.h> from the standard include directory.
        .systemLibrary(
            name: "CNetworkManager", pkgConfig: "glib-2.0",
            providers: [.apt(["libnm-dev"])]),
        .systemLibrary(name: "CNetlink"),

        // Pure logic: flags, status, snapshots, path escaping. No C import.
        .target(name: "ReachabilityCore", plugins: ["EmbedContract"]),
        // Fairness between callers and users: the queues, the call scheduler, the ledger of
        // unread output, quotas, holders and every limit (pure Swift, no C).
        .target(name: "ReachabilityFairness", dependencies: ["ReachabilityCore"]),
        // The GLib main loop everything runs on: sources, the loop thread, the log's vocabulary
        // and the daemon's log handler (journal, `<N>`, terminal), the instruments, the clock.
        .target(
            name: "ReachabilityLoop",
            dependencies: [
                "CGLib", .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The only module that calls libdbus, driven by the loop; the fairness rules it
        // applies to callers (queues, quotas, read receipts) are pure logic in ReachabilityCore.
        .target(
            name: "ReachabilityBus",
            dependencies: ["CDBus", "CGLib", "ReachabilityCore", "ReachabilityFairness", "ReachabilityLoop",
                           .product(name: "Logging", package: "swift-log")]),
        // Network facts: libnm, rtnetlink, and ModemManager's signal quality read over GIO's
        // D-Bus (the one thing libnm does not carry). It does not link libdbus and exports
        // nothing on the bus: that is ReachabilityBus and ReachabilityService.
        .target(
            name: "ReachabilityPlatform",
            dependencies: ["ReachabilityCore", "ReachabilityFairness", "ReachabilityLoop", "CGLib", "CNetworkManager", "CNetlink",
                           .product(name: "Logging", package: "swift-log")]),
        // The daemon's exported objects and its run loop.
        .target(
            name: "ReachabilityService",
            dependencies: ["ReachabilityCore", "ReachabilityFairness", "ReachabilityLoop", "ReachabilityBus", "ReachabilityPlatform",
                           .product(name: "Logging", package: "swift-log")]),
        // Call-cost benchmark (a libdbus client); see docs/performance.md, "Performance".
        .executableTarget(name: "reachability-bench", dependencies: ["ReachabilityBus", "ReachabilityLoop"]),
        // Build-time generation of the contract string from dbus/*.xml.
        .executableTarget(name: "embed-contract"),
        .plugin(name: "EmbedContract", capability: .buildTool(), dependencies: ["embed-contract"]),
        .executableTarget(
            name: "reachabilityd",
            dependencies: [
                "ReachabilityService", "ReachabilityLoop", "ReachabilityBus",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]),
        // The client runtime the three client products share: the daemon-or-in-process
        // choice, the daemon client, the in-process engine, the feeds, the loop thread,
        // and the library's log handed to the application's swift-log.
        .target(
            name: "ReachabilityRuntime",
            dependencies: ["ReachabilityCore", "ReachabilityLoop", "ReachabilityBus", "ReachabilityPlatform",
                           .product(name: "Logging", package: "swift-log")]),
        // Alamofire's NetworkReachabilityManager on the runtime, and the command-line client built on it.
        // The manager's code, without Foundation (reachctl links it alone); the product's module
        // re-exports it with Foundation, as Alamofire's does.
        .target(
            name: "ReachabilitydClientCore",
            dependencies: ["ReachabilityRuntime", "ReachabilityCore", .product(name: "Logging", package: "swift-log")]),
        .target(name: "ReachabilitydClient", dependencies: ["ReachabilitydClientCore"]),
        .executableTarget(
            name: "reachctl",
            dependencies: ["ReachabilitydClientCore", "ReachabilityCore", "ReachabilityRuntime",
                           .product(name: "ArgumentParser", package: "swift-argument-parser")]),
        // An application on the library (also driven by the integration tests).
        .executableTarget(name: "reachability-example", dependencies: ["ReachabilitydClient"]),
        // NWPathMonitor and friends, on the same runtime.
        .target(name: "NetworkPath", dependencies: ["ReachabilityRuntime", "ReachabilityCore"]),
        // Code written for Apple's Network framework, unchanged (driven by the integration tests).
        .executableTarget(name: "network-path-example", dependencies: ["NetworkPath"]),

        // Fuzzing: the checked properties (shared with the regression tests) and the
        // libFuzzer entry; see docs/hardening.md, "Testing and hardening".
        .target(name: "FuzzChecks", dependencies: ["ReachabilityCore", "ReachabilityBus", "ReachabilityPlatform"]),
        .systemLibrary(name: "CFuzzer"),
        .executableTarget(name: "reachability-fuzz", dependencies: ["FuzzChecks", "CFuzzer"]),

        .testTarget(name: "ReachabilityCoreTests", dependencies: ["ReachabilityCore"]),
        .testTarget(name: "ReachabilityFairnessTests", dependencies: ["ReachabilityFairness", "ReachabilityCore"]),
        // What the bus's, the platform's and the service's tests share: a resolver that answers
        // when the test says, and the in-memory logger each test that logs passes (its own: no two
        // tests share a log).
        .target(
            name: "ReachabilityTestSupport",
            dependencies: [
                "ReachabilityPlatform", "ReachabilityCore", "ReachabilityLoop",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ],
            path: "Tests/ReachabilityTestSupport"),
        .testTarget(
            name: "ReachabilityBusTests",
            dependencies: [
                "ReachabilityBus", "ReachabilityCore", "ReachabilityFairness", "ReachabilityLoop", "CDBus",
                "ReachabilityTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]),
        .testTarget(
            name: "ReachabilityPlatformTests",
            dependencies: [
                "ReachabilityPlatform", "ReachabilityCore", "ReachabilityLoop", "CNetlink", "CNetworkManager",
                "ReachabilityTestSupport", .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]),
        .testTarget(
            name: "ReachabilityServiceTests",
            dependencies: [
                "ReachabilityService", "ReachabilityBus", "ReachabilityLoop", "ReachabilityTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]),
        .testTarget(
            name: "ReachabilitydClientTests",
            dependencies: [
                "ReachabilitydClient", "ReachabilitydClientCore", "ReachabilityRuntime", "ReachabilityBus",
                "ReachabilityCore", "ReachabilityLoop",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]),
        .testTarget(name: "FuzzRegressionTests", dependencies: ["FuzzChecks"]),
        .testTarget(name: "NetworkPathTests",
                    dependencies: ["NetworkPath", "ReachabilityCore", "ReachabilityRuntime", "ReachabilityLoop"]),
        // Alamofire's NetworkReachabilityManager API, used the way its own tests use it.
        .testTarget(name: "AlamofireCompatibilityTests", dependencies: ["ReachabilitydClient"]),
        // The libraries from a Swift 5 program: a listener or path handler that captures a
        // mutable local compiles (`@preconcurrency`, as Alamofire's and Apple's), and so does
        // a global function as SystemConfiguration's callback (added below, on Linux).
        .testTarget(
            name: "Swift5ClientTests", dependencies: ["ReachabilitydClient", "NetworkPath"],
            swiftSettings: [.swiftLanguageMode(.v5)]),
    ],
    swiftLanguageModes: [.v6]
)

// Apple's SCNetworkReachability functions, for code that says `import SystemConfiguration`.
// Declared only where the platform has no SystemConfiguration of its own, so that it never
// shadows Apple's framework (the manifest is compiled for the machine that builds).
#if !canImport(Darwin)
package.products.append(.library(name: "SystemConfiguration", targets: ["SystemConfiguration"]))
package.products.append(.library(name: "SystemConfigurationC", type: .dynamic, targets: ["SystemConfigurationC"]))
package.targets += [
    .target(name: "SystemConfiguration", dependencies: ["ReachabilityRuntime", "ReachabilityCore"]),
    // Apple's SCNetworkReachability C functions, for C, Objective-C and every FFI: a
    // shared library whose functions translate C values and call the module above
    // (header, pkg-config file and install in capi/; see docs/c-api.md).
    .systemLibrary(name: "CDispatchQueue"),
    .target(name: "SystemConfigurationC", dependencies: ["SystemConfiguration", "CDispatchQueue"]),
    // Apple's Reachability sample in Swift, unchanged (driven by the integration tests).
    .executableTarget(name: "system-configuration-example", dependencies: ["SystemConfiguration"]),
    // Code written for Apple's SystemConfiguration, the way Reachability.swift uses it.
    .testTarget(name: "SystemConfigurationTests", dependencies: ["SystemConfiguration", "ReachabilitydClient", "ReachabilitydClientCore"]),
]
// A Swift 5 program passes a global function as the callback, as to Apple's functions.
for target in package.targets where target.name == "Swift5ClientTests" {
    target.dependencies.append("SystemConfiguration")
}
#endif
