import AccmonLogging
import AccmonManifest
import AccmonProtocol

/// The admin requests: `reload` and `simulate`.
extension RequestHandler {
    /// Asks the manifest loader for a load; the reply waits for its result (``manifestLoaded(_:)``), and so do the
    /// client's later requests.
    func reload(_ session: Session, id: RequestID?) {
        guard requireAdmin(session, id: id, for: "reload") else { return }
        let generation = manifestLoader.requestLoad()
        session.awaitsReload = true
        reloadsWaiting.append((session, id, generation))
    }

    /// A load finished: puts it in force (or refuses it) and answers the `reload` requests it covers.
    func manifestLoaded(_ loaded: LoadedManifest) {
        let problems = publisher.install(loaded, initial: false)
        state.bus?.manifestLoaded(generation: loaded.generation, problems: problems)
        let answered = reloadsWaiting.filter { $0.generation <= loaded.generation }
        reloadsWaiting.removeAll { $0.generation <= loaded.generation }
        for (session, id, _) in answered {
            session.awaitsReload = false
            guard !session.isClosing else { continue }
            if problems.isEmpty {
                state.reply(to: session, .ok(id: id, connectionID: nil))
            } else {
                reply(
                    to: session, id: id,
                    ProtocolError(
                        .manifestInvalid,
                        "reload: manifest: \(problems.count) \(problems.count == 1 ? "problem" : "problems"), the "
                            + "previous manifest stays in force: " + problems.map(\.description).joined(separator: "; ")
                    ))
            }
            // Its requests that came after the reload were waiting.
            handlePendingLines(of: session)
            state.sessions.queueFlush(session)
        }
    }

    func simulateConnect(_ session: Session, id: RequestID?, _ accessory: Accessory) {
        guard requireAdmin(session, id: id, for: "simulate") else { return }
        guard let simulated = simulatedSource(replyingTo: session, id: id) else { return }
        var accessory = accessory
        if accessory.accessoryID.isEmpty { accessory.accessoryID = accessory.derivedAccessoryID }
        let report = simulated.connect(accessory)
        publisher.publishWaiting()  // what other sources reported first goes first
        // A simulated device's key is new: its report is one connect, which gives the connection id.
        let connected = publisher.apply(report).last { $0.change == .connect }
        // A simulated accessory stands for hardware: the state file is what keeps it across a restart.
        persistence.markDirty()
        state.reply(to: session, .ok(id: id, connectionID: connected?.accessory.connectionID))
    }

    func simulateDisconnect(_ session: Session, id: RequestID?, _ connectionID: ConnectionID) {
        guard requireAdmin(session, id: id, for: "simulate") else { return }
        guard let simulated = simulatedSource(replyingTo: session, id: id) else { return }
        guard let key = state.registry.key(of: connectionID), key.hasPrefix(SimulatedEventSource.keyPrefix) else {
            reply(
                to: session, id: id,
                ProtocolError(
                    .noSuchConnection, "simulate: connectionID: no simulated accessory is connected as \(connectionID)"
                ))
            return
        }
        publisher.publishWaiting()
        publisher.apply(simulated.disconnect(key: key))
        persistence.markDirty()
        state.reply(to: session, .ok(id: id, connectionID: connectionID))
    }

    private func simulatedSource(replyingTo session: Session, id: RequestID?) -> SimulatedEventSource? {
        if state.simulated == nil {
            reply(
                to: session, id: id,
                ProtocolError(
                    .simulationDisabled,
                    "simulate: accmond: simulation is off; start accmond with --simulate to drive simulated"
                        + " accessories"))
        }
        return state.simulated
    }
}
