import AccmonDevices
import AccmonLogging
import AccmonManifest
import AccmonProtocol

/// Turns the sources' reports into events and delivers each to every session (live and preserved) that may see it.
///
/// Each event is encoded once (twice at most: as ordinary clients see it, and as admins who asked for rejected
/// accessories see a rejected one); the same bytes are queued for every receiving session.
final class Publisher {
    let state: BrokerState
    let persistence: Persistence
    /// Where sources on threads of their own (and every source's start-up enumeration) deliver.
    private let sink: EventSink
    /// Reports the loop-driven sources returned this turn, published after the sink's.
    private var loopDrivenReports: [SourceEvent] = []

    init(state: BrokerState, persistence: Persistence, sink: EventSink) {
        self.state = state
        self.persistence = persistence
        self.sink = sink
    }

    /// Keeps a loop-driven source's reports for ``publishWaiting()``.
    func take(_ reports: [SourceEvent]) { loopDrivenReports += reports }

    /// Moves the sources' waiting reports into the registry and delivers the resulting events. The sink's come
    /// first: they include the loop-driven sources' start-up enumerations.
    func publishWaiting() {
        for report in sink.take() { apply(report) }
        for report in loopDrivenReports { apply(report) }
        loopDrivenReports.removeAll(keepingCapacity: true)
    }

    /// Applies one source report to the registry and publishes the events that result, which it returns.
    @discardableResult
    func apply(_ report: SourceEvent) -> [AccessoryEvent] {
        let events: [AccessoryEvent]
        switch report {
        case .attached(let key, let accessory):
            events = state.registry.attach(key: key, accessory)
            // The same device again (a udev `change`): a claim on it is applied again to its nodes.
            if events.isEmpty, let claims = state.claims, !claims.isIdle,
                let current = state.registry.accessory(under: key)
            {
                claims.deviceChanged(current)
            }
        case .detached(let key): events = state.registry.detach(key: key)
        case .inventory(let prefix, let keys): events = state.registry.reconcile(keyPrefix: prefix, present: keys)
        }
        for event in events {
            persistence.reserveNumbers()
            publish(event)
        }
        return events
    }

    private func publish(_ event: AccessoryEvent) {
        let logger = state.logger
        logger.debug(
            event.change == .connect ? .accessoryConnected : .accessoryDisconnected,
            "\(event.change.rawValue) \(event.accessory.kind.rawValue) \(event.accessory.usbID)",
            metadata(for: event.accessory).merging(["seq": String(event.sequence)]) { $1 })
        let verdict: Authentication
        switch event.change {
        case .connect:
            verdict = state.authorizer.admit(event.accessory)
            if let reason = verdict.rejection {
                logger.notice(.accessoryRejected, "accessory rejected: \(reason)", metadata(for: event.accessory))
            }
        case .disconnect:
            verdict = state.authorizer.release(event.accessory.connectionID) ?? .rejected(reason: "")
        }
        if event.change == .connect {
            state.launcher?.accessoryConnected(event.accessory, verdict: verdict)
        } else {
            state.launcher?.accessoryDisconnected(event.accessory)
        }
        defer {
            // After the event's own lines: a claim that follows its accessory, a waiter served by a new one.
            if let claims = state.claims, !claims.isIdle {
                if event.change == .connect {
                    claims.accessoryConnected(event.accessory)
                } else {
                    claims.accessoryDisconnected(event.accessory)
                }
            }
        }
        var announced = event
        announced.accessory = verdict.announced(event.accessory)
        announced.rejection = event.change == .connect ? verdict.rejection : nil
        let accounts = state.authorizer.accounts
        state.bus?.accessoryPublished(announced, verdict: verdict, accounts: accounts)
        // The line is written once, when someone is to get it; the history's writer copies its accessory object.
        var encoded: (line: [UInt8], accessory: ArraySlice<UInt8>)?
        for session in state.sessions.all
        where session.receives(announced.accessory, verdict: verdict, accounts: accounts) {
            let bytes = encoded?.line ?? encode(announced, into: &encoded)
            deliver(announced, bytes, to: session)
        }
        if !state.preserved.sessions.isEmpty {
            let bytes = encoded?.line ?? encode(announced, into: &encoded)
            let recorded = state.preserved.record(announced, line: bytes) {
                verdict.isVisible(to: $0, includingRejected: false, accounts: accounts)
            }
            // An app that registered a unit is relaunched when an event waits for it.
            for key in recorded where state.preserved.sessions[key]?.relaunch != nil {
                state.launcher?.relaunchWanted(key)
            }
            persistence.markDirty()
        }
        state.history.record(
            event.change == .disconnect ? .disconnect : verdict.isAllowed ? .connect : .rejected,
            accessory: announced.accessory, verdict: verdict, accounts: accounts, eventSeq: event.sequence,
            reason: announced.rejection, accessoryObject: encoded?.accessory)
    }

    /// The event's line, kept in `encoded` with its accessory object's bytes.
    private func encode(
        _ event: AccessoryEvent, into encoded: inout (line: [UInt8], accessory: ArraySlice<UInt8>)?
    ) -> [UInt8] {
        let made = state.codec.encodeEvent(event)
        encoded = made
        return made.line
    }

    /// Hands an event to one session (``Session/deliver(_:line:)``), then flushes it at the end of the turn or
    /// notes that it stopped reading.
    func deliver(_ event: AccessoryEvent, _ line: [UInt8], to session: Session) {
        if session.memory != nil { persistence.markDirty() }
        switch session.deliver(event, line: line) {
        case .written: state.sessions.queueFlush(session)
        case .queued, .dropped: break
        case .overBudget:
            state.sessions.waitForBudget(session)
            if session.busEndpoint != nil { state.sessions.queueFlush(session) }  // to tell it it is suspended
            state.logger.info(
                .clientSlow, "output budget exceeded: suspending the client, which holds more than its share",
                session.metadata.merging(["outbound.bytes": String(session.outbound.byteCount)]) { $1 })
        case .stoppedReading:
            if session.busEndpoint != nil { state.sessions.queueFlush(session) }  // to tell it it is suspended
            state.logger.info(
                .clientSlow,
                session.busEndpoint == nil
                    ? "client does not read: suspending it and queueing its events"
                    : "bus subscriber does not acknowledge its events: suspending it and queueing its events",
                session.metadata.merging(["outbound.bytes": String(session.outbound.byteCount)]) { $1 })
        }
    }

    /// What a client may see of the connected accessories, as it sees them (with the manifest's protocol strings).
    func visibleSnapshot(
        for principal: ClientPrincipal?, filter: AccessoryFilter, includeRejected: Bool, claims: Bool = false
    ) -> Snapshot {
        let all = state.registry.snapshot()
        let accounts = state.authorizer.accounts
        var accessories: [Accessory] = []
        var rejected: [ConnectionID: String] = [:]
        for accessory in all.accessories {
            guard let verdict = state.authorizer.verdict(accessory.connectionID),
                verdict.isVisible(to: principal, includingRejected: includeRejected, accounts: accounts)
            else { continue }
            let announced = verdict.announced(accessory)
            guard filter.matches(announced) else { continue }
            accessories.append(announced)
            if let reason = verdict.rejection { rejected[accessory.connectionID] = reason }
        }
        return Snapshot(
            sequence: all.sequence, accessories: accessories, rejected: rejected,
            claims: claims ? state.claims?.summaries(of: accessories.map(\.connectionID)) ?? [:] : [:])
    }
}
