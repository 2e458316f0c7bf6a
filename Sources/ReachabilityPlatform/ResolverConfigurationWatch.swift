import Glibc
import ReachabilityLoop

/// Says when one of the system resolver's configuration files changes (`/etc/resolv.conf`;
/// `/etc/hosts` and `/etc/nsswitch.conf` through a watch of their own): glibc and musl read
/// them again when they have, so a name may now resolve otherwise than at its last lookup
/// (a name server or a search domain came, a name was added to the hosts file) — a fact
/// that changed, like a route. NetworkManager tells its own DNS configuration
/// (`dns-configuration`), which stands for resolv.conf while its facts are used.
///
/// inotify (`inotify_init1`), read on the loop through an fd source: it wakes the loop only
/// when something is written, created, renamed or removed in a directory that holds a
/// file — its own, and its target's when it is a symbolic link (resolvconf's, systemd-resolved's),
/// or that directory's nearest ancestor while it is not made yet — and only an event that names
/// the file (or the directory on the way to it) is a change. A file replaced by renaming another
/// over it (NetworkManager, resolvconf and systemd-resolved do so) is watched again; the
/// file's own watch sees writes made in place and through any other path (a bind mount).
@LoopActor
final class ResolverConfigurationWatch {
    private let paths: [String]
    private let fd: Int32
    private var source: SourceHandle?
    /// Each watched directory, by watch descriptor, with the names in it that are the files.
    private var directories: [Int32: Set<String>] = [:]
    /// The files' own watches (the inodes the paths lead to), with the path of each.
    private var files: [Int32: String] = [:]
    private let onChange: () -> Void

    private static let directoryEvents = UInt32(IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)
        | UInt32(IN_ONLYDIR)
    /// Written and closed, or written by a writer that keeps it open. A write that leaves the
    /// file empty is no change until it is closed: a file rewritten in place (`cat >`, Python's
    /// `write_text`) is truncated first, and read in between it named no server — one change
    /// would be told as two, the first of them wrong.
    private static let fileEvents = UInt32(IN_CLOSE_WRITE | IN_MODIFY)

    /// Watches `paths`; `onChange` after each burst of their changes. `nil` when inotify cannot be
    /// used (the instances of this user are all taken): then nothing is watched.
    init?(paths: [String], onChange: @escaping () -> Void) {
        guard case .success(let fd) = Syscall.call({ inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }) else {
            return nil
        }
        self.paths = paths
        self.fd = fd
        self.onChange = onChange
        watch()
        source = Sources.readable(fd: fd) { [unowned self] in
            self.readEvents()
            return true
        }
    }

    isolated deinit {
        source?.cancel()
        close(fd)
    }

    /// Watches the directories of each file and of its target, and the file; drops the watches
    /// of what they no longer are. Wraps `inotify_add_watch(2)` and `inotify_rm_watch(2)`.
    private func watch() {
        var wanted: [Int32: Set<String>] = [:]
        var newFiles: [Int32: String] = [:]
        for path in paths {
            for path in [path] + (Self.target(of: path).map { [$0] } ?? []) {
                // A directory not made yet (a link into /run/systemd/resolve/ before
                // systemd-resolved starts): its nearest ancestor is watched for the name that
                // leads to it, and once that is made, the next level.
                var (directory, name) = Self.split(path)
                while true {
                    let added = Syscall.call { inotify_add_watch(fd, directory, Self.directoryEvents) }
                    if case .success(let wd) = added {
                        wanted[wd, default: []].insert(name)
                        break
                    }
                    guard case .failure(let error) = added, [ENOENT, ENOTDIR].contains(error.rawValue), directory != "/"
                    else { break }
                    (directory, name) = Self.split(directory)
                }
            }
            if case .success(let wd) = Syscall.call({ inotify_add_watch(fd, path, Self.fileEvents) }) {
                newFiles[wd] = path
            }
        }
        // One inode watched twice (a directory, a file) is one descriptor: the last mask wins.
        for wd in directories.keys where wanted[wd] == nil && newFiles[wd] == nil { inotify_rm_watch(fd, wd) }
        for wd in files.keys where newFiles[wd] == nil && wanted[wd] == nil { inotify_rm_watch(fd, wd) }
        directories = wanted
        files = newFiles
    }

    /// Where `path` leads (`realpath(3)`), or, for a symbolic link whose target is not made
    /// yet (systemd-resolved's, before it starts), where it points (`readlink(2)`).
    private static func target(of path: String) -> String? {
        if let real = realpath(path, nil) {
            defer { free(real) }
            return String(cString: real)
        }
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX))
        guard case .success(let count) = Syscall.call({ readlink(path, &buffer, buffer.count) }), count > 0 else {
            return nil
        }
        let link = String(decoding: buffer[..<count], as: UTF8.self)
        return link.hasPrefix("/") ? link : split(path).directory + "/" + link
    }

    /// Whether the file at `path` holds nothing (truncated by a writer not done yet). Wraps `stat(2)`.
    private static func isEmpty(_ path: String) -> Bool {
        var status = stat()
        guard case .success = Syscall.call({ stat(path, &status) }) else { return false }
        return status.st_size == 0
    }

    /// A path's directory and last name.
    private static func split(_ path: String) -> (directory: String, name: String) {
        let slash = path.lastIndex(of: "/") ?? path.startIndex
        return (slash == path.startIndex ? "/" : String(path[..<slash]), String(path[path.index(after: slash)...]))
    }

    /// Reads every queued event (`struct inotify_event`: descriptor, mask, cookie, name length,
    /// name); the file changed when one names it, comes from its own watch, or events were lost.
    private func readEvents() {
        var changed = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let read = buffer.withUnsafeMutableBytes { raw in Syscall.call { Glibc.read(fd, raw.baseAddress, raw.count) } }
            guard case .success(let count) = read, count > 0 else { break }
            buffer.withUnsafeBytes { raw in
                var offset = 0
                while offset + 16 <= count {
                    let wd = raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                    let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let name = String(decoding: raw[(offset + 16)..<min(count, offset + 16 + length)].prefix { $0 != 0 },
                                      as: UTF8.self)
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 || directories[wd]?.contains(name) == true {
                        changed = true
                    } else if let path = files[wd], mask & UInt32(IN_CLOSE_WRITE) != 0 || !Self.isEmpty(path) {
                        changed = true
                    }
                    offset += 16 + length
                }
            }
        }
        guard changed else { return }
        watch()
        onChange()
    }
}
