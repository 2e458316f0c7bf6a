import Foundation
import Testing
import ReachabilityCore
import ReachabilityFairness

@Suite("Every limit, the bus connection's and the service's own, is named and explained in docs/hardening.md")
struct LimitsTests {
    /// The rows of the table under docs/hardening.md's heading `heading`: name → value, as
    /// written (the first code span of each column, without digit separators).
    static func documented(under heading: String) throws -> [(name: String, value: String)] {
        let repository = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: repository.appendingPathComponent("docs/hardening.md"), encoding: .utf8)
        let lines = page.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try #require(lines.firstIndex(of: "### \(heading)"), "docs/hardening.md has no heading \"\(heading)\"")
        var rows: [(String, String)] = []
        for line in lines[(start + 1)...] {
            if line.hasPrefix("#") { break }
            guard line.hasPrefix("| `") else { continue }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces) }
            // "", name, value, what it bounds, why, "".
            try #require(cells.count >= 5, "a row of the table has too few columns: \(line)")
            rows.append((codeSpan(cells[1]), codeSpan(cells[2]).replacingOccurrences(of: "_", with: "")))
        }
        return rows
    }

    private static func codeSpan(_ cell: String) -> String {
        let parts = cell.split(separator: "`", omittingEmptySubsequences: false)
        return parts.count >= 3 ? String(parts[1]) : cell
    }

    @Test("each table lists every property of its type with its value, and nothing else; no name is in both",
          arguments: [("Flow and fairness limits", "Limits"), ("The service's own limits", "ServiceLimits")])
    func tableMatchesType(heading: String, type: String) throws {
        let rows = try Self.documented(under: heading)
        let value: Any = type == "Limits" ? Limits.standard : ServiceLimits.standard
        let properties = Mirror(reflecting: value).children.map { ($0.label ?? "", "\($0.value)") }
        #expect(!properties.isEmpty)
        let documented = Dictionary(rows, uniquingKeysWith: { first, _ in first })
        #expect(documented.count == rows.count, "a property is listed twice")
        for (name, value) in properties {
            #expect(documented[name] == value,
                    "\(type).\(name) is \(value); the table says \(documented[name] ?? "nothing")")
        }
        let names = Set(properties.map(\.0))
        for (name, _) in rows {
            #expect(names.contains(name), "the table lists \(name), which is no property of \(type)")
        }
    }

    @Test("no limit is in two tables")
    func oneTableEach() throws {
        let bus = Set(try Self.documented(under: "Flow and fairness limits").map(\.name))
        let service = Set(try Self.documented(under: "The service's own limits").map(\.name))
        #expect(bus.isDisjoint(with: service), "in both tables: \(bus.intersection(service).sorted())")
    }

    @Test("the derived bounds follow the stored ones")
    func derived() {
        var limits = Limits.standard
        limits.queuedCallsPerUser = 3
        limits.receiptAfter = 10
        limits.unreadPerUser = 20
        #expect(limits.callQueue(of: Int.self).perUserItems == 3)
        #expect(limits.ledger().receiptAfter == 10 && limits.ledger().perUser == 20)
        #expect(Limits.standard.peerDescriptorBound == 509)
        #expect(limits != Limits.standard)
    }
}
