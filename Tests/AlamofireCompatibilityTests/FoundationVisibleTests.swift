import ReachabilitydClient
import Testing

// This file imports our module and the test library only, as app code imports
// Alamofire alone: Foundation's names must be in scope through it (Alamofire's module
// re-exports Foundation). Were they not, this file would not compile.
@Suite("import ReachabilitydClient brings Foundation")
struct FoundationVisibleTests {
    @Test("NotificationCenter, Notification.Name and URL are in scope")
    func foundationNames() async {
        let name = Notification.Name("reachability.test")
        let center = NotificationCenter()
        let heard = Heard()
        let token = center.addObserver(forName: name, object: nil, queue: nil) { _ in heard.mark() }
        center.post(name: name, object: nil)
        center.removeObserver(token)
        #expect(heard.value)
        #expect(URL(string: "https://example.com/")?.host == "example.com")
    }
}

private final class Heard: @unchecked Sendable {
    private let lock = NSLock()
    private var heard = false
    func mark() { lock.withLock { heard = true } }
    var value: Bool { lock.withLock { heard } }
}
