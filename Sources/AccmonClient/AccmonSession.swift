@_exported public import AccmonProtocol
import Synchronization

/// A subscription that survives restarts of the app and of the daemon: the analogue of Core Bluetooth's state
/// preservation and restoration.
///
/// The session registers `restoreID` with accmond. While the app is away the daemon keeps the session and queues
/// (and coalesces) its events; when the app starts again with the same id, it is handed the accessories it knew as
/// of its last acknowledged event (``initialAccessories``, with ``wasRestored`` set), then what it missed, in order,
/// in ``events``. When the daemon goes away the session reconnects by itself with backoff, and presents what
/// changed meanwhile as ordinary events of the same sequence, so the app sees each net change exactly once.
///
/// ```swift
/// let session = try await AccmonSession.start(clientName: "my-app", restoreID: "com.example.my-app")
/// for accessory in session.initialAccessories { show(accessory) }
/// for await event in session.events { handle(event) }   // acknowledged when the next one is asked for
/// ```
///
/// An event counts as consumed, and is acknowledged to the daemon, when the app asks for the next one.
public final class AccmonSession: Sendable {
    /// The state of the link to the daemon.
    public enum ConnectionState: Sendable, Hashable {
        /// Connected and subscribed.
        case connected
        /// The daemon is unreachable; the session retries after the given delay.
        case reconnecting(attempt: Int, delaySeconds: Double, reason: String)
        /// The session ended (``close()``).
        case closed
    }

    /// The accessories connected (or, when restored, known) when the session started.
    public let initialAccessories: [Accessory]
    /// Whether the daemon handed back a preserved session at start.
    public let wasRestored: Bool
    /// The events after ``initialAccessories``, across reconnections; ends after ``close()``.
    public let events: Events
    /// Changes of ``ConnectionState``.
    public let connectionStates: AsyncStream<ConnectionState>

    private let core: SessionCore
    private let task: Task<Void, Never>

    private init(core: SessionCore, initial: [Accessory], restored: Bool, task: Task<Void, Never>) {
        self.core = core
        self.initialAccessories = initial
        self.wasRestored = restored
        self.events = Events(core: core)
        self.connectionStates = core.states
        self.task = task
    }

    /// Starts the session: connects, restores or subscribes, and keeps the link up until ``close()``.
    ///
    /// - Parameters:
    ///   - socketPath: the socket; `nil` uses ``AccmonConnection/resolveSocketPath(_:)``.
    ///   - clientName: a name for the daemon's logs and status.
    ///   - restoreID: the identifier the daemon keeps the session under, for this user.
    ///   - filter: what to subscribe to on a first start (a restored session keeps its own).
    ///   - relaunch: a systemd template (`accmon-NAME@.service`) the daemon starts for this user (instance: the uid)
    ///     when an event waits for the session while the app is not running; the manifest's `relaunch` must let
    ///     this user register it, and the unit must run as this user (docs/SESSIONS.md, "Relaunch").
    /// - Throws: ``AccmonError`` when the first connection fails (later failures are retried), with
    ///   ``AccmonError/Code/permissionDenied`` when the manifest does not let this user register `relaunch`.
    public static func start(
        socketPath: String? = nil, clientName: String, restoreID: String, filter: AccessoryFilter = .all,
        relaunch: String? = nil
    ) async throws(AccmonError) -> AccmonSession {
        let core = SessionCore(
            socketPath: socketPath, clientName: clientName, restoreID: restoreID, filter: filter, relaunch: relaunch)
        let connection = try await AccmonConnection.connect(
            socketPath: socketPath, clientName: clientName, restoreID: restoreID, relaunch: relaunch)
        let start: SessionCore.Start
        do {
            start = try await core.begin(on: connection)
        } catch {
            connection.close()
            throw error
        }
        let task = Task { await core.maintain(first: connection) }
        return AccmonSession(core: core, initial: start.accessories, restored: start.restored, task: task)
    }

    /// Ends the session: the daemon forgets it (it is not preserved), and ``events`` finishes.
    public func close() {
        task.cancel()
        core.close()
    }

    /// The session's events; each is acknowledged when the next one is asked for.
    public struct Events: AsyncSequence, Sendable {
        public typealias Element = AccessoryEvent
        let core: SessionCore

        public func makeAsyncIterator() -> Iterator { Iterator(core: core, inner: core.output.makeAsyncIterator()) }

        /// Acknowledges the previous event, then waits for the next.
        public struct Iterator: AsyncIteratorProtocol {
            let core: SessionCore
            var inner: AsyncStream<AccessoryEvent>.AsyncIterator
            var previous: UInt64?

            public mutating func next() async -> AccessoryEvent? {
                if let previous { core.acknowledge(previous) }
                let event = await inner.next()
                previous = event?.sequence
                return event
            }
        }
    }
}

/// The session's machinery: the app's view, the link, and the reconciliation after a reconnection.
final class SessionCore: Sendable {
    struct Start {
        var accessories: [Accessory]
        var restored: Bool
    }

    private struct State {
        /// What the app has been handed: its view of the connected accessories.
        var view: [ConnectionID: Accessory] = [:]
        /// The highest sequence number handed to the app.
        var lastHanded: UInt64 = 0
        var connection: AccmonConnection?
        var closed = false
    }

    let socketPath: String?
    let clientName: String
    let restoreID: String
    let filter: AccessoryFilter
    let relaunch: String?
    let output: AsyncStream<AccessoryEvent>
    let states: AsyncStream<AccmonSession.ConnectionState>
    private let outputContinuation: AsyncStream<AccessoryEvent>.Continuation
    private let statesContinuation: AsyncStream<AccmonSession.ConnectionState>.Continuation
    private let state = Mutex(State())

    init(socketPath: String?, clientName: String, restoreID: String, filter: AccessoryFilter, relaunch: String?) {
        self.socketPath = socketPath
        self.clientName = clientName
        self.restoreID = restoreID
        self.filter = filter
        self.relaunch = relaunch
        (output, outputContinuation) = AsyncStream.makeStream()
        (states, statesContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(16))
    }

    /// The first connection: a restore hands back the known accessories and queues the missed events as events;
    /// otherwise the subscription's snapshot is the start.
    func begin(on connection: AccmonConnection) async throws(AccmonError) -> Start {
        if connection.restored, let pushes = connection.restorePushes {
            var iterator = pushes.makeAsyncIterator()
            guard case .restore(let restore)? = try await Self.next(&iterator) else {
                throw AccmonError(.invalidResponse, "accmon: restore: accmond did not send the restored state")
            }
            state.withLock { state in
                state.view = Dictionary(restore.accessories.map { ($0.connectionID, $0) }) { first, _ in first }
                state.lastHanded = restore.acknowledged
                state.connection = connection
            }
            // What was missed: ordinary events up to the `restored` marker.
            while let push = try await Self.next(&iterator) {
                if case .event(let event) = push { hand(event) }
                if case .restored = push { break }
            }
            statesContinuation.yield(.connected)
            Task { await self.forward(iterator) }
            return Start(accessories: restore.accessories, restored: true)
        }
        guard let pushes = connection.restorePushes else {
            throw AccmonError(.invalidResponse, "accmon: restore id missing on the session's connection")
        }
        let snapshot = try await connection.subscribe(filter, pushes: pushes)
        state.withLock { state in
            state.view = Dictionary(snapshot.accessories.map { ($0.connectionID, $0) }) { first, _ in first }
            state.lastHanded = snapshot.sequence
            state.connection = connection
        }
        statesContinuation.yield(.connected)
        Task { await self.forward(pushes.makeAsyncIterator()) }
        return Start(accessories: snapshot.accessories, restored: false)
    }

    /// Keeps the link up: waits for the current connection to end, then reconnects with backoff and reconciles.
    func maintain(first: AccmonConnection) async {
        var attempt = 0
        while !Task.isCancelled && !isClosed {
            guard let connection = state.withLock({ $0.connection }) else { break }
            await connection.channel.ended()
            state.withLock { $0.connection = nil }
            if Task.isCancelled || isClosed { break }
            var reason = "accmon: accmond closed the connection"
            while !Task.isCancelled && !isClosed {
                attempt += 1
                let delay = min(0.05 * Double(1 << min(attempt, 7)), 5.0)
                statesContinuation.yield(.reconnecting(attempt: attempt, delaySeconds: delay, reason: reason))
                try? await Task.sleep(for: .seconds(delay))  // try?: cancellation is checked by the loop
                do {
                    let next = try await AccmonConnection.connect(
                        socketPath: socketPath, clientName: clientName, restoreID: restoreID, relaunch: relaunch)
                    try await reconcile(on: next)
                    attempt = 0
                    statesContinuation.yield(.connected)
                    break
                } catch {
                    reason = error.message
                }
            }
        }
        statesContinuation.yield(.closed)
        statesContinuation.finish()
        outputContinuation.finish()
    }

    /// After a reconnection: learns the daemon's view of the session (restored, or a fresh snapshot when the daemon
    /// lost it), and hands the app the difference from what it has, as events.
    private func reconcile(on connection: AccmonConnection) async throws(AccmonError) {
        guard let pushes = connection.restorePushes else { return }
        var iterator = pushes.makeAsyncIterator()
        var truth: [ConnectionID: Accessory]
        var asOf: UInt64
        if connection.restored {
            guard case .restore(let restore)? = try await Self.next(&iterator) else {
                connection.close()
                throw AccmonError(.invalidResponse, "accmon: restore: accmond did not send the restored state")
            }
            truth = Dictionary(restore.accessories.map { ($0.connectionID, $0) }) { first, _ in first }
            asOf = restore.acknowledged
            while let push = try await Self.next(&iterator) {
                if case .event(let event) = push {
                    truth[event.accessory.connectionID] = event.change == .connect ? event.accessory : nil
                    asOf = event.sequence
                }
                if case .restored(let sequence) = push {
                    asOf = max(asOf, sequence)
                    break
                }
            }
        } else {
            let snapshot = try await connection.subscribe(filter, pushes: pushes)
            truth = Dictionary(snapshot.accessories.map { ($0.connectionID, $0) }) { first, _ in first }
            asOf = snapshot.sequence
        }
        let (gone, new) = state.withLock { state in
            let gone = state.view.values.filter { truth[$0.connectionID] == nil }.sorted {
                $0.connectionID < $1.connectionID
            }
            let new = truth.values.filter { state.view[$0.connectionID] == nil }.sorted {
                $0.connectionID < $1.connectionID
            }
            state.connection = connection
            return (gone, new)
        }
        for accessory in gone { hand(AccessoryEvent(.disconnect, sequence: asOf, accessory: accessory), force: true) }
        for accessory in new { hand(AccessoryEvent(.connect, sequence: asOf, accessory: accessory), force: true) }
        // A fresh subscription after the daemon lost the session (its state was wiped, or the session expired) may
        // number events from lower than before: continue from its numbering.
        state.withLock { $0.lastHanded = connection.restored ? max($0.lastHanded, asOf) : asOf }
        Task { await self.forward(iterator) }
    }

    /// Hands the live events of one connection to the app until it ends.
    private func forward(_ iterator: AsyncThrowingStream<Push, any Error>.AsyncIterator) async {
        var iterator = iterator
        while let push = try? await iterator.next() {  // try?: the end of a connection is handled by maintain()
            if case .event(let event) = push { hand(event) }
        }
    }

    /// Hands `event` to the app unless it is a repeat (already handed) or does not fit the app's view.
    private func hand(_ event: AccessoryEvent, force: Bool = false) {
        let accepted = state.withLock { state -> Bool in
            guard force || event.sequence > state.lastHanded else { return false }
            let id = event.accessory.connectionID
            switch event.change {
            case .connect:
                guard state.view[id] == nil else { return false }
                state.view[id] = event.accessory
            case .disconnect:
                guard state.view.removeValue(forKey: id) != nil else { return false }
            }
            state.lastHanded = max(state.lastHanded, event.sequence)
            return true
        }
        if accepted { outputContinuation.yield(event) }
    }

    func acknowledge(_ sequence: UInt64) {
        state.withLock { $0.connection }?.channel.send(.acknowledge(sequence))
    }

    var isClosed: Bool { state.withLock { $0.closed } }

    func close() {
        let connection = state.withLock { state in
            state.closed = true
            return state.connection
        }
        if let connection {
            // Unsubscribing makes the daemon forget the session instead of preserving it.
            Task {
                _ = try? await connection.unsubscribe()  // try?: closing anyway
                connection.close()
            }
        } else {
            outputContinuation.finish()
        }
    }

    private static func next(
        _ iterator: inout AsyncThrowingStream<Push, any Error>.AsyncIterator
    )
        async throws(AccmonError) -> Push?
    {
        do {
            return try await iterator.next()
        } catch let error as AccmonError {
            throw error
        } catch {
            throw AccmonError(.connectionClosed, "accmon: \(error)")
        }
    }
}
