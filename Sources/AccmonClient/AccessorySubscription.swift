@_exported public import AccmonProtocol

/// A subscription: the snapshot of matching accessories at subscribe time, then an asynchronous sequence of live
/// connect and disconnect events.
///
/// The sequence ends normally after ``AccmonConnection/unsubscribe()`` or ``AccmonConnection/close()``, and throws
/// ``AccmonError`` when the daemon stops (``AccmonError/Code/daemonStopped``) or the connection breaks.
public struct AccessorySubscription: AsyncSequence, Sendable {
    public typealias Element = AccessoryEvent

    /// The accessories that matched when the subscription began; every event that follows is newer.
    public let snapshot: Snapshot
    private let pushes: AsyncThrowingStream<Push, any Error>
    private let channel: Channel

    init(snapshot: Snapshot, pushes: AsyncThrowingStream<Push, any Error>, channel: Channel) {
        self.snapshot = snapshot
        self.pushes = pushes
        self.channel = channel
    }

    /// Runs `handler` once when `accessory`'s connection ends: the `accessoryDidDisconnect` analogue.
    ///
    /// The handler runs on the connection's reader thread as soon as the disconnect arrives (before the event
    /// reaches this sequence's consumer), or at once if that connection is already gone. Keep it short.
    public func onDisconnect(of accessory: Accessory, perform handler: @escaping @Sendable (Accessory) -> Void) {
        channel.onDisconnect(of: accessory, perform: handler)
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(pushes: pushes.makeAsyncIterator())
    }

    /// Yields the events among the daemon's pushes.
    public struct Iterator: AsyncIteratorProtocol {
        var pushes: AsyncThrowingStream<Push, any Error>.AsyncIterator

        public mutating func next() async throws -> AccessoryEvent? {
            while let push = try await pushes.next() {
                if case .event(let event) = push { return event }
            }
            return nil
        }
    }
}
