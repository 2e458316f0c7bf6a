// swift-tools-version: 6.0
// A package with a module of its own named `Reachability` (as the most used Swift
// reachability library has) on reachabilityd's SystemConfiguration product.
// Tests/Integration/test_system_configuration.py builds and runs it.
//
// SwiftPM refuses a graph in which two packages declare a module of one name,
// whether or not a product anyone uses contains it. No module of reachabilityd
// bears the name of a well-known package's module, so this package depends on it
// as on any other: no module alias. reachabilityd is found at
// REACHABILITYD_CHECKOUT, a path whose last component is `reachabilityd` (the
// package's identity).
import PackageDescription

let checkout = Context.environment["REACHABILITYD_CHECKOUT"] ?? "../../../../reachabilityd"

let package = Package(
    name: "OwnReachabilityModule",
    dependencies: [.package(path: checkout)],
    targets: [
        .target(
            name: "Reachability",
            dependencies: [.product(name: "SystemConfiguration", package: "reachabilityd")]),
        .executableTarget(name: "own-reachability", dependencies: ["Reachability"]),
    ],
    swiftLanguageModes: [.v6]
)
