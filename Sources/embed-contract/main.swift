import Foundation

// embed-contract INPUT.xml OUTPUT.swift: writes the contract as Swift — the document
// itself (served as introspection data) and every interface, method, property and
// signal name with its signature, so that no other file spells them again.
let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: embed-contract INPUT.xml OUTPUT.swift\n".utf8))
    exit(2)
}
let xml = try String(contentsOfFile: arguments[1], encoding: .utf8)

/// The text with every `<!-- … -->` comment blanked out (names in prose are not members).
func withoutComments(_ text: String) -> String {
    var out = ""
    var rest = Substring(text)
    while let open = rest.range(of: "<!--") {
        out += rest[..<open.lowerBound]
        guard let close = rest[open.upperBound...].range(of: "-->") else { return out }
        rest = rest[close.upperBound...]
    }
    return out + rest
}

/// The value of `attribute` in the start tag that begins `tag`.
func attribute(_ attribute: String, in tag: Substring) -> String? {
    guard let start = tag.range(of: attribute + "=\"") else { return nil }
    let value = tag[start.upperBound...]
    return value.firstIndex(of: "\"").map { String(value[..<$0]) }
}

/// Each element `<name …>…</name>` or `<name …/>` in `text`, whole.
func elements(_ name: String, in text: Substring) -> [Substring] {
    var found: [Substring] = []
    var rest = text
    while let open = rest.range(of: "<\(name) ") {
        let afterOpen = rest[open.lowerBound...]
        guard let tagEnd = afterOpen.firstIndex(of: ">") else { break }
        let selfClosing = afterOpen[afterOpen.index(before: tagEnd)] == "/"
        let end = selfClosing ? afterOpen.index(after: tagEnd)
            : (afterOpen.range(of: "</\(name)>")?.upperBound ?? afterOpen.index(after: tagEnd))
        found.append(rest[open.lowerBound..<end])
        rest = rest[end...]
    }
    return found
}

func camel(_ name: String) -> String { name.prefix(1).lowercased() + name.dropFirst() }

func arguments(_ element: Substring, direction: String?) -> String {
    elements("arg", in: element).filter { arg in
        let d = attribute("direction", in: arg) ?? "in"
        return direction == nil || d == direction
    }.compactMap { attribute("type", in: $0) }.joined()
}

var body = ""
for interface in elements("interface", in: Substring(withoutComments(xml))) {
    guard let name = attribute("name", in: interface) else { continue }
    let short = String(name.split(separator: ".").last!)
    body += "\n    /// `\(name)`\n    public enum \(short) {\n        public static let interfaceName = \"\(name)\"\n"
    func list(_ kind: String, _ plural: String, _ type: String) -> String {
        let names = elements(kind, in: interface).map { camel(attribute("name", in: $0)!) }
        return "        public static let \(plural): [\(type)] = [\(names.joined(separator: ", "))]\n"
    }
    body += list("method", "methods", "ContractMethod") + list("property", "properties", "ContractProperty")
        + list("signal", "signals", "ContractSignal")
    for method in elements("method", in: interface) {
        let member = attribute("name", in: method)!
        body += "        public static let \(camel(member)) = ContractMethod("
            + "name: \"\(member)\", input: \"\(arguments(method, direction: "in"))\", "
            + "output: \"\(arguments(method, direction: "out"))\")\n"
    }
    for property in elements("property", in: interface) {
        let member = attribute("name", in: property)!
        let emits = elements("annotation", in: property)
            .first { attribute("name", in: $0) == "org.freedesktop.DBus.Property.EmitsChangedSignal" }
            .flatMap { attribute("value", in: $0) } ?? "true"
        body += "        public static let \(camel(member)) = ContractProperty("
            + "name: \"\(member)\", type: \"\(attribute("type", in: property)!)\", emitsChanged: \"\(emits)\", "
            + "access: \"\(attribute("access", in: property) ?? "read")\")\n"
    }
    for signal in elements("signal", in: interface) {
        let member = attribute("name", in: signal)!
        body += "        public static let \(camel(member)) = ContractSignal("
            + "name: \"\(member)\", signature: \"\(arguments(signal, direction: nil))\")\n"
    }
    body += "    }\n"
}

// A raw string with enough # that nothing inside can end it.
var hashes = "#"
while xml.contains("\"" + hashes) { hashes += "#" }
let source = """
    // Generated from dbus/\(URL(fileURLWithPath: arguments[1]).lastPathComponent); do not edit.

    /// The D-Bus contract of `dbus/`: every interface with its members' names and
    /// signatures, and the document itself, which the daemon serves as introspection data.
    public enum Contract {
        public static let xml = \(hashes)\"\"\"
    \(xml)
    \"\"\"\(hashes)
    \(body)}

    """
try source.write(toFile: arguments[2], atomically: true, encoding: .utf8)
