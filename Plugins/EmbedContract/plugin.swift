import Foundation
import PackagePlugin

/// Generates `Contract.swift` from `dbus/*.xml`, so the daemon serves the
/// documented interface file itself as introspection data.
@main
struct EmbedContract: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let xml = context.package.directoryURL
            .appending(path: "dbus")
            .appending(path: "io.github.reachabilityd.Reachability1.xml")
        let output = context.pluginWorkDirectoryURL.appending(path: "Contract.swift")
        return [
            .buildCommand(
                displayName: "Embedding the D-Bus interface contract",
                executable: try context.tool(named: "embed-contract").url,
                arguments: [xml.path, output.path],
                inputFiles: [xml],
                outputFiles: [output])
        ]
    }
}
