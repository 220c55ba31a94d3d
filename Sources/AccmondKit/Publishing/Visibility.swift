import AccmonLogging
import AccmonManifest
import AccmonProtocol

extension Publisher {
    /// Puts a loaded manifest in force when it has no problem; after a reload, re-decides every connected accessory
    /// and tells each client what it now sees or no longer sees. A manifest with problems changes nothing.
    /// - Returns: the problems, empty on success.
    @discardableResult
    func install(_ loaded: LoadedManifest, initial: Bool) -> [ManifestProblem] {
        let logger = state.logger
        let oldAccounts = state.authorizer.accounts
        let problems = state.authorizer.install(loaded)
        guard problems.isEmpty else {
            for problem in problems { logger.error(.manifestRefused, "manifest: \(problem)") }
            logger.error(
                .manifestRefused,
                initial
                    ? "manifest: not loaded; every accessory is rejected until a reload succeeds"
                    : "manifest: reload refused; the previous manifest stays in force")
            return problems
        }
        logger.notice(
            .manifestLoaded, "manifest loaded: \(loaded.manifest.entries.count) entries",
            ["manifest.files": loaded.files.joined(separator: ",")])
        if !initial {
            reevaluateVisibility(oldAccounts: oldAccounts)
            state.claims?.manifestReloaded()
        }
        return []
    }

    /// After a reload: for each connected accessory whose visibility changed for some client (live or preserved),
    /// a connect (to those who now see it) or a disconnect (to those who no longer do), each with a sequence
    /// number of its own. Visibility changes with an accessory's verdict, or with the ids the manifest's names
    /// resolve to.
    private func reevaluateVisibility(oldAccounts: AccountIDs) {
        let connected = state.registry.snapshot().accessories
        let old = state.authorizer.reevaluate(connected)
        let accounts = state.authorizer.accounts
        for accessory in connected {
            let before = old[accessory.connectionID] ?? .rejected(reason: "")
            let after = state.authorizer.verdict(accessory.connectionID) ?? before
            guard before != after || oldAccounts != accounts else { continue }
            if before != after, let reason = after.rejection {
                state.logger.notice(
                    .accessoryRejected, "accessory rejected after reload: \(reason)", metadata(for: accessory))
            }
            state.bus?.visibilityChanged(
                accessory, before: before, oldAccounts: oldAccounts, after: after, accounts: accounts)
            var lost: [Session] = []
            var gained: [Session] = []
            for session in state.sessions.all {  // closing ones too: a kept session needs the event
                let was = session.receives(before.announced(accessory), verdict: before, accounts: oldAccounts)
                let now = session.receives(after.announced(accessory), verdict: after, accounts: accounts)
                if was && !now { lost.append(session) }
                if now && !was { gained.append(session) }
            }
            /// Whether a preserved session (which never includes rejected accessories) sees it under `verdict`.
            func sees(_ verdict: Authentication, _ accounts: AccountIDs, _ kept: PreservedSession) -> Bool {
                verdict.isVisible(to: kept.principal, includingRejected: false, accounts: accounts)
                    && kept.memory.filter.matches(verdict.announced(accessory))
            }
            var lostPreserved: [RestoreKey] = []
            var gainedPreserved: [RestoreKey] = []
            for (key, kept) in state.preserved.sessions {
                let was = sees(before, oldAccounts, kept)
                let now = sees(after, accounts, kept)
                if was && !now { lostPreserved.append(key) }
                if now && !was { gainedPreserved.append(key) }
            }
            if !lost.isEmpty || !lostPreserved.isEmpty {
                persistence.reserveNumbers()
                let event = state.registry.visibilityEvent(.disconnect, before.announced(accessory))
                let line = state.codec.encode(.event(event))
                for session in lost { deliver(event, line, to: session) }
                state.preserved.record(event, line: line, for: lostPreserved)
            }
            if !gained.isEmpty || !gainedPreserved.isEmpty {
                persistence.reserveNumbers()
                var event = state.registry.visibilityEvent(.connect, after.announced(accessory))
                event.rejection = after.rejection
                let line = state.codec.encode(.event(event))
                for session in gained { deliver(event, line, to: session) }
                state.preserved.record(event, line: line, for: gainedPreserved)
            }
        }
        persistence.markDirty()
    }
}
