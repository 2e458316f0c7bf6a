import Glibc
import ReachabilityLoop
import Testing
@testable import ReachabilityPlatform

/// A resolver configuration file of the test's own, in a directory of its own, and a watch of it.
@LoopActor
private final class WatchedFile {
    let directory: String
    var path: String { directory + "/resolv.conf" }
    private(set) var changes = 0
    private var watch: ResolverConfigurationWatch?

    /// The file at `path`, or (`linked`) a symbolic link there to the file in `run/`, made
    /// unless `dangling`.
    init(linked: Bool = false, dangling: Bool = false) throws {
        var template = Array("/tmp/reach-resolv-XXXXXX".utf8CString)
        directory = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
            .map { String(cString: $0) })
        if linked {
            mkdir(directory + "/run", 0o755)
            if !dangling { write("nameserver 192.0.2.1\n", to: directory + "/run/resolv.conf") }
            symlink("run/resolv.conf", path)
        } else {
            write("nameserver 192.0.2.1\n", to: path)
        }
    }

    func start(also others: [String] = []) {
        watch = ResolverConfigurationWatch(paths: [path] + others.map { directory + "/" + $0 }) {
            [unowned self] in self.changes += 1
        }
    }

    func stop() { watch = nil }

    func write(_ text: String, to path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
        close(fd)
    }

    /// Writes `text` to a new file in `directory` and renames it over `name` there, as
    /// NetworkManager and resolvconf replace the file.
    func replace(_ name: String, in directory: String, with text: String) {
        write(text, to: directory + "/.new")
        rename(directory + "/.new", directory + "/" + name)
    }

    /// How many changes were told after `action`, once the loop has read what it caused:
    /// an idle source below every other priority runs only after the watch's fd source.
    func changes(after action: () -> Void) async -> Int {
        let before = changes
        action()
        var handle: SourceHandle?
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            handle = Sources.idle(priority: 300) { done.resume() }
        }
        _ = handle
        return changes - before
    }

    func remove() {
        for name in ["resolv.conf", ".new", "hosts", "run/resolv.conf", "run/.new", "run/link"] {
            _ = unlink(directory + "/" + name)
        }
        rmdir(directory + "/run")
        rmdir(directory)
    }
}

@Suite("The resolver's configuration file, watched")
struct ResolverConfigurationWatchTests {
    init() { LoopThread.start() }

    @Test("written in place, or replaced by a rename (and then written again): a change each time")
    @LoopActor func writtenAndReplaced() async throws {
        let file = try WatchedFile()
        defer { file.remove() }
        file.start()
        defer { file.stop() }
        #expect(await file.changes { file.write("nameserver 192.0.2.2\n", to: file.path) } == 1)
        #expect(await file.changes { file.replace("resolv.conf", in: file.directory, with: "search test\n") } == 1)
        #expect(await file.changes { file.write("nameserver 192.0.2.3\n", to: file.path) } == 1,
                "the new file is watched")
        #expect(await file.changes { _ = unlink(file.path) } == 1, "removed")
        #expect(await file.changes { file.write("nameserver 192.0.2.4\n", to: file.path) } == 1, "made again")
    }

    @Test("written through another path to it (a hard link; a bind mount alike): a change, after a replacement too")
    @LoopActor func otherPath() async throws {
        let file = try WatchedFile()
        defer { file.remove() }
        mkdir(file.directory + "/run", 0o755)
        let other = file.directory + "/run/link"
        Glibc.link(file.path, other)
        file.start()
        defer { file.stop() }
        #expect(await file.changes { file.write("nameserver 192.0.2.2\n", to: other) } == 1)
        #expect(await file.changes { file.replace("resolv.conf", in: file.directory, with: "search test\n") } == 1)
        // The old file's last link goes (its watch ends: told or not), and the new one gets one.
        _ = await file.changes {
            _ = unlink(other)
            Glibc.link(file.path, other)
        }
        #expect(await file.changes { file.write("nameserver 192.0.2.3\n", to: other) } == 1, "the new file is watched")
    }

    @Test("another file of its directory is no change")
    @LoopActor func otherFiles() async throws {
        let file = try WatchedFile()
        defer { file.remove() }
        file.start()
        defer { file.stop() }
        #expect(await file.changes { file.write("127.0.0.1 localhost\n", to: file.directory + "/hosts") } == 0)
        #expect(await file.changes { file.replace("hosts", in: file.directory, with: "::1 localhost\n") } == 0)
    }

    @Test("several files in one watch (the hosts file beside it): each one's change, written in place while kept open too")
    @LoopActor func severalFiles() async throws {
        let file = try WatchedFile()
        defer { file.remove() }
        let hosts = file.directory + "/hosts"
        file.write("127.0.0.1 localhost\n", to: hosts)
        file.start(also: ["hosts"])
        defer { file.stop() }
        #expect(await file.changes { file.write("192.0.2.20 added.test\n", to: hosts) } == 1)
        #expect(await file.changes { file.replace("hosts", in: file.directory, with: "::1 localhost\n") } == 1)
        #expect(await file.changes { file.write("nameserver 192.0.2.2\n", to: file.path) } == 1)
        // A writer that keeps the file open: its write alone is the change.
        let fd = open(hosts, O_WRONLY | O_APPEND | O_CLOEXEC)
        defer { close(fd) }
        #expect(await file.changes { _ = "192.0.2.21 more.test\n".withCString { Glibc.write(fd, $0, strlen($0)) } } == 1)
    }

    @Test("rewritten in place: the truncation before the write is no change, the written file is")
    @LoopActor func truncatedFirst() async throws {
        let file = try WatchedFile()
        defer { file.remove() }
        file.start()
        defer { file.stop() }
        let fd = open(file.path, O_WRONLY | O_TRUNC | O_CLOEXEC)
        #expect(fd >= 0)
        #expect(await file.changes { _ = ftruncate(fd, 0) } == 0, "empty while its writer is not done")
        #expect(await file.changes {
            _ = "nameserver 192.0.2.4\n".withCString { Glibc.write(fd, $0, strlen($0)) }
            close(fd)
        } == 1)
    }

    @Test("a symbolic link: its target replaced in the target's directory is a change")
    @LoopActor func symbolicLink() async throws {
        let file = try WatchedFile(linked: true)
        defer { file.remove() }
        file.start()
        defer { file.stop() }
        let run = file.directory + "/run"
        #expect(await file.changes { file.replace("resolv.conf", in: run, with: "nameserver 192.0.2.9\n") } == 1)
        #expect(await file.changes { file.write("nameserver 192.0.2.10\n", to: run + "/resolv.conf") } == 1)
        #expect(await file.changes { file.write("other\n", to: run + "/.new") } == 0)
    }

    @Test("a symbolic link whose target is made later (systemd-resolved's, before it starts): its making is a change")
    @LoopActor func danglingLink() async throws {
        let file = try WatchedFile(linked: true, dangling: true)
        defer { file.remove() }
        file.start()
        defer { file.stop() }
        let run = file.directory + "/run"
        #expect(await file.changes { file.replace("resolv.conf", in: run, with: "nameserver 127.0.0.53\n") } == 1)
        #expect(await file.changes { file.write("nameserver 192.0.2.10\n", to: run + "/resolv.conf") } == 1)
    }
}
