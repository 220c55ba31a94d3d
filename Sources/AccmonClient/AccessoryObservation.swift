@_exported public import AccmonProtocol
import Synchronization

/// What a subscription with a handler hands it, in order: the snapshot once, first, then each live event.
public enum SubscriptionUpdate: Sendable, Hashable {
    /// The accessories that matched when the subscription began; always the first update.
    case snapshot(Snapshot)
    /// A connect or disconnect, newer than the snapshot and than every event before it.
    case event(AccessoryEvent)
}

/// A subscription whose updates go to a handler on the connection's reader thread, made by
/// ``AccmonConnection/subscribe(_:includeRejected:onUpdate:)``.
///
/// It ends after ``AccmonConnection/unsubscribe()`` or ``AccmonConnection/close()``, or when the daemon stops or the
/// connection breaks; ``waitForEnd()`` says which.
public struct AccessoryObservation: Sendable {
    /// The accessories that matched when the subscription began: the handler's first update.
    public let snapshot: Snapshot
    private let channel: Channel
    private let end: SubscriptionEnd

    init(snapshot: Snapshot, channel: Channel, end: SubscriptionEnd) {
        self.snapshot = snapshot
        self.channel = channel
        self.end = end
    }

    /// Runs `handler` once when `accessory`'s connection ends: the `accessoryDidDisconnect` analogue.
    ///
    /// The handler runs on the connection's reader thread as soon as the disconnect arrives, before the subscription's
    /// handler gets that event, or at once if that connection is already gone. Keep it short.
    public func onDisconnect(of accessory: Accessory, perform handler: @escaping @Sendable (Accessory) -> Void) {
        channel.onDisconnect(of: accessory, perform: handler)
    }

    /// Waits until the subscription ends; the handler gets no update after that.
    ///
    /// Returns after ``AccmonConnection/unsubscribe()`` or ``AccmonConnection/close()``, and at once if the waiting task
    /// is cancelled (the subscription then goes on).
    /// - Throws: ``AccmonError`` with ``AccmonError/Code/daemonStopped`` when the daemon stops, or another code when
    ///   the connection breaks or the daemon could not read a line of ours.
    public func waitForEnd() async throws(AccmonError) {
        try await end.wait()
    }
}

/// The end of a subscription with a handler, which its owner can wait for.
final class SubscriptionEnd: Sendable {
    private typealias Waiter = CheckedContinuation<Result<Void, AccmonError>, Never>
    private struct State {
        var outcome: Result<Void, AccmonError>?
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
    }
    private let state = Mutex(State())

    /// Ends the subscription, normally or with `error`; only the first call counts.
    func finish(throwing error: AccmonError?) {
        let outcome: Result<Void, AccmonError> = error.map { .failure($0) } ?? .success(())
        let waiters = state.withLock { state -> [Waiter] in
            guard state.outcome == nil else { return [] }
            state.outcome = outcome
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }

    /// Waits for ``finish(throwing:)``, or for the task's cancellation.
    func wait() async throws(AccmonError) {
        let key = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: Waiter) in
                let known = state.withLock { state -> Result<Void, AccmonError>? in
                    if let outcome = state.outcome { return outcome }
                    if Task.isCancelled { return .success(()) }
                    state.waiters[key] = waiter
                    return nil
                }
                if let known { waiter.resume(returning: known) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: key) }?.resume(returning: .success(()))
        }
        try outcome.get()
    }
}
