public import AccmonCore

/// A subscription: the snapshot of matching accessories at subscribe time, then an asynchronous sequence of live
/// connect and disconnect events.
///
/// The sequence ends normally after ``AccmonConnection/unsubscribe()`` or ``AccmonConnection/close()``, and throws
/// ``AccmonError`` when the daemon stops (``AccmonError/Code/daemonStopped``) or the connection breaks.
public struct AccessorySubscription: AsyncSequence, Sendable {
    public typealias Element = AccessoryEvent

    /// The accessories that matched when the subscription began; every event that follows is newer.
    public let snapshot: Snapshot
    private let events: AsyncThrowingStream<AccessoryEvent, any Error>
    private let channel: Channel

    init(snapshot: Snapshot, events: AsyncThrowingStream<AccessoryEvent, any Error>, channel: Channel) {
        self.snapshot = snapshot
        self.events = events
        self.channel = channel
    }

    /// Runs `handler` once when `accessory`'s connection ends: the `accessoryDidDisconnect` analogue.
    ///
    /// The handler runs on the connection's reader thread as soon as the disconnect arrives (before the event
    /// reaches this sequence's consumer), or at once if that connection is already gone. Keep it short.
    public func onDisconnect(of accessory: Accessory, perform handler: @escaping @Sendable (Accessory) -> Void) {
        channel.onDisconnect(of: accessory, perform: handler)
    }

    public func makeAsyncIterator() -> AsyncThrowingStream<AccessoryEvent, any Error>.AsyncIterator {
        events.makeAsyncIterator()
    }
}
