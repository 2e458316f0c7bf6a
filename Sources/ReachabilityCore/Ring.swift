/// A FIFO queue on an array with a moving head: O(1) amortised at both ends.
public struct Ring<Element> {
    private var storage: [Element] = []
    private var head = 0

    public init() {}

    public var count: Int { storage.count - head }
    public var isEmpty: Bool { count == 0 }

    public mutating func append(_ element: Element) { storage.append(element) }

    public mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let element = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: storage.count <= 1024)
            head = 0
        } else if head >= 1024 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }
}
