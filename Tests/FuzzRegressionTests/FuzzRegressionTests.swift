import Foundation
import FuzzChecks
import Testing

/// Every input the fuzzers found interesting enough to keep (the committed
/// corpus) and every input that once crashed (the regressions) goes through
/// the same checks again; a violated property traps the test run.
@Suite("Fuzz corpus and regressions replayed")
struct FuzzRegressionTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Fuzz").standardized

    static func inputs(_ target: String) throws -> [URL] {
        try ["Corpus", "Regressions"].flatMap { kind -> [URL] in
            let directory = root.appendingPathComponent("\(kind)/\(target)")
            guard FileManager.default.fileExists(atPath: directory.path) else { return [] }
            return try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        }
    }

    @Test("every saved input passes its target's checks", arguments: ["names", "paths", "messages"])
    func replay(target: String) throws {
        let files = try Self.inputs(target)
        #expect(!files.isEmpty, "no saved inputs for \(target) under Fuzz/")
        let check = try #require(FuzzChecks.targets[target])
        for file in files { check(Array(try Data(contentsOf: file))) }
    }

    @Test("the message seeds decode to what was encoded")
    func seeds() {
        #expect(FuzzChecks.messageSeeds.count == 7)
        for seed in FuzzChecks.messageSeeds { FuzzChecks.messages(seed) }
    }
}
