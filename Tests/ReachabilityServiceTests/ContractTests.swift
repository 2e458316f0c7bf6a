import Foundation
import Testing
import ReachabilityCore
@testable import ReachabilityBus
@testable import ReachabilityService

#if canImport(FoundationXML)
import FoundationXML
#endif

/// Reads the interface XML in `dbus/` the way a client would see it.
private final class ContractReader: NSObject, XMLParserDelegate {
    struct Member: Hashable, CustomStringConvertible {
        var kind: String  // method, property, signal
        var name: String
        var detail: String  // signatures, access, emits annotation
        var description: String { "\(kind) \(name) \(detail)" }
    }

    var interfaces: [String: Set<Member>] = [:]
    var undocumented: [String] = []
    private var interface: String?
    private var member: (kind: String, name: String)?
    private var inArgs: String = ""
    private var outArgs: String = ""
    private var access: String = ""
    private var emits: String = "true"
    private var type: String = ""
    private var lastWasComment = false

    func parser(_ parser: XMLParser, foundComment comment: String) { lastWasComment = true }

    func parser(_ parser: XMLParser, didStartElement element: String, namespaceURI: String?,
                qualifiedName: String?, attributes: [String: String] = [:]) {
        defer { lastWasComment = false }
        switch element {
        case "interface":
            interface = attributes["name"]
            interfaces[interface!] = []
            if !lastWasComment { undocumented.append(interface!) }
        case "method", "signal", "property":
            member = (element, attributes["name"] ?? "")
            if !lastWasComment { undocumented.append("\(interface ?? "").\(member!.name)") }
            inArgs = ""
            outArgs = ""
            access = attributes["access"] ?? ""
            type = attributes["type"] ?? ""
            emits = "true"
        case "arg":
            if attributes["direction"] == "out" { outArgs += attributes["type"] ?? "" } else { inArgs += attributes["type"] ?? "" }
        case "annotation":
            if attributes["name"] == "org.freedesktop.DBus.Property.EmitsChangedSignal" {
                emits = attributes["value"] ?? ""
            }
        default: break
        }
    }

    func parser(_ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?) {
        guard let m = member, element == m.kind, let interface else { return }
        let detail = switch m.kind {
        case "method": "(\(inArgs))->(\(outArgs))"
        case "signal": "(\(inArgs))"
        default: "\(type) \(access) emits=\(emits)"
        }
        interfaces[interface]!.insert(Member(kind: m.kind, name: m.name, detail: detail))
        member = nil
    }
}

/// The members of the generated contract, described like the reader describes the XML.
private func members(_ methods: [ContractMethod], _ properties: [ContractProperty], _ signals: [ContractSignal])
    -> Set<ContractReader.Member>
{
    var set = Set<ContractReader.Member>()
    for m in methods { set.insert(.init(kind: "method", name: m.name, detail: "(\(m.input))->(\(m.output))")) }
    for p in properties {
        set.insert(.init(kind: "property", name: p.name, detail: "\(p.type) \(p.access) emits=\(p.emitsChanged)"))
    }
    for s in signals { set.insert(.init(kind: "signal", name: s.name, detail: "(\(s.signature))")) }
    return set
}

/// The members of an exported table, described like the reader describes the XML.
private func members<Owner>(_ interface: Interface<Owner>) -> Set<ContractReader.Member> {
    var set = Set<ContractReader.Member>()
    for m in interface.methods {
        set.insert(.init(kind: "method", name: m.name, detail: "(\(m.input))->(\(m.output))"))
    }
    for p in interface.properties {
        let access = p.set == nil ? "read" : "readwrite"
        set.insert(.init(kind: "property", name: p.name, detail: "\(p.signature) \(access) emits=\(p.emits.rawValue)"))
    }
    for s in interface.signals {
        set.insert(.init(kind: "signal", name: s.name, detail: "(\(s.signature))"))
    }
    return set
}

@Suite("The D-Bus contract in dbus/ and the daemon's tables agree")
struct ContractTests {
    static let xmlURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("dbus/io.github.reachabilityd.Reachability1.xml")

    private func read() throws -> ContractReader {
        let parser = try #require(XMLParser(contentsOf: Self.xmlURL))
        let reader = ContractReader()
        parser.delegate = reader
        #expect(parser.parse(), "the contract XML does not parse: \(String(describing: parser.parserError))")
        return reader
    }

    @Test("every interface and member of the XML has a prose comment")
    func documented() throws {
        let reader = try read()
        #expect(reader.undocumented == [])
    }

    @Test("the tables declare exactly the XML's members")
    func tablesMatchXML() throws {
        let reader = try read()
        let tables = [
            Names.managerInterface: members(ManagerObject.interface),
            Names.targetInterface: members(TargetObject.interface),
            Names.pathInterface: members(PathObject.interface),
            Names.logControlInterface: members(LogControlObject.interface),
            Names.metricsInterface: members(MetricsObject.interface),
        ]
        #expect(Set(reader.interfaces.keys) == Set(tables.keys))
        for (name, declared) in tables {
            let documented = reader.interfaces[name] ?? []
            #expect(declared.subtracting(documented).isEmpty,
                    "in the tables but not in the XML: \(declared.subtracting(documented))")
            #expect(documented.subtracting(declared).isEmpty,
                    "in the XML but not in the tables: \(documented.subtracting(declared))")
        }
    }

    @Test("the generated Contract, which the daemon's tables and the client both use, is the XML's")
    func generatedContract() throws {
        let reader = try read()
        let generated: [String: Set<ContractReader.Member>] = [
            Contract.Manager.interfaceName: members(Contract.Manager.methods, Contract.Manager.properties,
                                                     Contract.Manager.signals),
            Contract.Target.interfaceName: members(Contract.Target.methods, Contract.Target.properties,
                                                    Contract.Target.signals),
            Contract.Path.interfaceName: members(Contract.Path.methods, Contract.Path.properties,
                                                  Contract.Path.signals),
            Contract.LogControl1.interfaceName: members(Contract.LogControl1.methods, Contract.LogControl1.properties,
                                                         Contract.LogControl1.signals),
            Contract.Metrics.interfaceName: members(Contract.Metrics.methods, Contract.Metrics.properties,
                                                     Contract.Metrics.signals),
        ]
        #expect(generated == reader.interfaces)
    }

    @Test("the client's Query detail keys are the contract's, each with its Target property")
    func clientDetails() throws {
        let text = try String(contentsOf: Self.xmlURL, encoding: .utf8)
        let query = try #require(text.range(of: "Query:"))
        let prose = text[query.lowerBound...].prefix(2000)
        for key in QueryDetail.allCases {
            #expect(prose.contains("\"\(key.rawValue)\""), "Query's documentation does not list \(key.rawValue)")
            #expect(Contract.Target.properties.contains(key.property))
        }
    }

    @Test("the daemon serves the file's interface elements")
    func served() throws {
        let text = try String(contentsOf: Self.xmlURL, encoding: .utf8)
        #expect(Contract.xml.trimmingCharacters(in: .whitespacesAndNewlines)
                == text.trimmingCharacters(in: .whitespacesAndNewlines))
        for name in [Names.managerInterface, Names.targetInterface, Names.pathInterface, Names.logControlInterface,
                     Names.metricsInterface] {
            #expect(text.contains(Names.contract.elements[name]!.trimmingCharacters(in: .whitespaces)))
        }
    }

    @Test("every comment of the file is served, the header and the interfaces' own included")
    func everyComment() throws {
        let text = try String(contentsOf: Self.xmlURL, encoding: .utf8)
        let comments = text.split(separator: "<!--").dropFirst().map { "<!--" + $0.prefix(through: $0.firstRange(of: "-->")!.upperBound).dropLast() }
        let served = [Names.managerInterface, Names.targetInterface, Names.pathInterface, Names.logControlInterface,
                      Names.metricsInterface]
            .map { Names.contract[$0] }.joined()
        #expect(comments.count >= 30)
        for comment in comments {
            #expect(served.contains(comment), "not served: \(comment.prefix(80))")
        }
        // The header once, with the first interface only.
        #expect(Names.contract.firstInterface == Names.managerInterface)
        #expect(!Names.contract[Names.targetInterface].contains(Names.contract.header))
    }
}
