import Foundation

// embed-contract INPUT.xml OUTPUT.swift: writes the XML as a Swift string constant.
let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: embed-contract INPUT.xml OUTPUT.swift\n".utf8))
    exit(2)
}
let xml = try String(contentsOfFile: arguments[1], encoding: .utf8)
// A raw string with enough # that nothing inside can end it.
var hashes = "#"
while xml.contains("\"" + hashes) { hashes += "#" }
let source = """
    // Generated from dbus/\(URL(fileURLWithPath: arguments[1]).lastPathComponent); do not edit.
    /// The D-Bus interface contract, as documented in `dbus/`.
    let contractXML = \(hashes)\"\"\"
    \(xml)
    \"\"\"\(hashes)

    """
try source.write(toFile: arguments[2], atomically: true, encoding: .utf8)
