// swift-tools-version: 6.0
// A package with a module of its own named `Reachability` (as the most used Swift
// reachability library has) on reachabilityd's SystemConfiguration product.
// Tests/Integration/test_system_configuration.py builds and runs it.
//
// SwiftPM refuses a graph in which two packages declare a module of one name,
// whether or not a product anyone uses contains it. reachabilityd's own
// `Reachability` module (Alamofire's manager) is in its graph, so this package
// renames it in its own graph with a module alias; that product is then built but
// never imported. reachabilityd is found at REACHABILITYD_CHECKOUT, a path whose
// last component is `reachabilityd` (the package's identity).
import PackageDescription

let checkout = Context.environment["REACHABILITYD_CHECKOUT"] ?? "../../../../reachabilityd"

let package = Package(
    name: "OwnReachabilityModule",
    dependencies: [.package(path: checkout)],
    targets: [
        .target(
            name: "Reachability",
            dependencies: [
                .product(name: "SystemConfiguration", package: "reachabilityd"),
                .product(name: "Reachability", package: "reachabilityd",
                         moduleAliases: ["Reachability": "ReachabilitydReachability"]),
            ]),
        .executableTarget(name: "own-reachability", dependencies: ["Reachability"]),
    ],
    swiftLanguageModes: [.v6]
)
