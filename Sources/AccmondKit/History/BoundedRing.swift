/// The newest `capacity` elements appended, oldest first: appending to a full ring evicts its oldest element.
///
/// Pure. The storage grows with the elements up to `capacity`, then each append overwrites the oldest slot: no
/// element is ever moved, so an append costs the same whatever the capacity.
struct BoundedRing<Element> {
    /// The most elements kept.
    let capacity: Int
    private var storage: [Element] = []
    /// The slot of the oldest element once the ring is full (before that, 0).
    private var start = 0
    /// Elements evicted since the ring was made.
    private(set) var evicted = 0

    /// An empty ring that keeps at most `capacity` (at least 0) elements.
    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// An empty ring, shaped like this one, with `evicted` reset.
    var emptied: BoundedRing { BoundedRing(capacity: capacity) }

    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }

    /// Appends `element`; when the ring is full, evicts and returns the oldest. A ring of capacity 0 keeps nothing
    /// (and returns `element`).
    @discardableResult
    mutating func append(_ element: Element) -> Element? {
        guard capacity > 0 else {
            evicted += 1
            return element
        }
        if storage.count < capacity {
            storage.append(element)
            return nil
        }
        let oldest = storage[start]
        storage[start] = element
        start = start + 1 == capacity ? 0 : start + 1
        evicted += 1
        return oldest
    }

    /// Appends every element of `elements`, in order.
    mutating func append(contentsOf elements: some Sequence<Element>) {
        for element in elements { append(element) }
    }

    /// The element at `index`, 0 being the oldest.
    subscript(index: Int) -> Element {
        get { storage[slot(of: index)] }
        set { storage[slot(of: index)] = newValue }
    }

    private func slot(of index: Int) -> Int {
        precondition(index >= 0 && index < storage.count, "ring index out of range")
        let slot = start + index
        return slot < storage.count ? slot : slot - storage.count
    }

    /// The elements, oldest first.
    var elements: [Element] { Array(storage[start...] + storage[..<start]) }

    /// Calls `body` with each element, newest first, until it returns `false`.
    func forEachNewestFirst(_ body: (Element) -> Bool) {
        var index = storage.count - 1
        while index >= 0 {
            if !body(self[index]) { return }
            index -= 1
        }
    }

    /// The newest element, if any.
    var last: Element? { storage.isEmpty ? nil : self[storage.count - 1] }
}

extension BoundedRing: Sendable where Element: Sendable {}
