// The fuzz targets (see docs/hardening.md, "Testing and hardening"). Built with
// `-sanitize=fuzzer,address -DFUZZING`, this is a libFuzzer binary whose target
// is chosen by REACHABILITY_FUZZ_TARGET (names, paths, messages). Built
// normally, it replays the files it is given through the same checks, or
// writes the seed corpus of the message target.
import FuzzChecks

#if FUZZING
import CFuzzer
import Glibc

@main
enum Fuzz {
    static func main() {
        let name = getenv("REACHABILITY_FUZZ_TARGET").map { String(cString: $0) } ?? ""
        guard FuzzChecks.targets[name] != nil else {
            fatalError("set REACHABILITY_FUZZ_TARGET to one of \(FuzzChecks.targets.keys.sorted())")
        }
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
            let name = String(cString: getenv("REACHABILITY_FUZZ_TARGET"))
            FuzzChecks.targets[name]!(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
            return 0
        })
    }
}
#else
import Foundation

@main
enum Replay {
    static func main() throws {
        var arguments = CommandLine.arguments.dropFirst()
        if arguments.first == "--write-message-seeds", let directory = arguments.dropFirst().first {
            for (index, seed) in FuzzChecks.messageSeeds.enumerated() {
                try Data(seed).write(to: URL(fileURLWithPath: "\(directory)/seed-\(index)"))
            }
            return
        }
        guard let name = arguments.popFirst(), let check = FuzzChecks.targets[name] else {
            print("usage: reachability-fuzz TARGET FILE… (replays the files); TARGET is one of "
                  + FuzzChecks.targets.keys.sorted().joined(separator: ", "))
            return
        }
        for path in arguments { check(Array(try Data(contentsOf: URL(fileURLWithPath: path)))) }
        print("\(name): \(arguments.count) inputs checked")
    }
}
#endif
