import AccmonLogging
import AccmonProtocol
import AccmonSystemd

/// logind's sessions for bus callers (docs/DBUS.md, "Sessions in front"): which options need them.
extension BusFrontend {
    /// The refusal of an option that follows login sessions, when logind does not run here; `nil` when it does.
    func loginRefusal(_ method: String, _ option: String) -> BusError? {
        guard !LoginSessions.isAvailable else { return nil }
        return BusError(
            .noLoginSessions,
            "\(method): options: \(option): logind does not run here (no login sessions to follow: a system not booted"
                + " with systemd, or a bus without it)")
    }

    /// Ends claim `claimID` of `peer` when the peer's login session is no longer in front.
    func releaseWhenInactive(_ claimID: String, _ peer: BusPeer) {
        inactiveReleases[claimID] = peer.name
        watchLogin(of: peer)
        if peer.inFront == false { loginChanged(peer.name, inFront: false) }
    }

    /// Holds `session`'s events while `peer`'s login session is not in front.
    func followLogin(of peer: BusPeer, for session: Session) {
        session.busEndpoint?.followsLogin = true
        if let inFront = peer.inFront { session.setSuspendedForLogin(!inFront) }
        watchLogin(of: peer)
    }

    private func watchLogin(of peer: BusPeer) {
        if loginWatcher == nil {
            do {
                loginWatcher = try LoginWatcher(results: inbound, logger: logger)
            } catch {
                logger.warning(.bus, "logind: cannot start following login sessions: \(error)")
                return
            }
        }
        loginWatcher?.watch(peer.name, pid: peer.credentials.pid, uid: peer.credentials.uid)
    }

    /// A followed peer's login session came to the front or left it: its subscriptions that asked are held or let
    /// go, and its claims that asked end (cut, as a break: the next user must not share the accessory with it).
    func loginChanged(_ name: String, inFront: Bool) {
        guard let peer = peers[name] else { return }
        peer.inFront = inFront
        for path in peer.subscriptions {
            guard let session = subscriptions[path], session.busEndpoint?.followsLogin == true else { continue }
            session.setSuspendedForLogin(!inFront)
            state.sessions.queueFlush(session)
            logger.debug(
                .clientSession, inFront ? "bus subscriber's session in front: live" : "bus subscriber's session away: held",
                session.metadata)
        }
        guard !inFront, let claims = state.claims else { return }
        for (claimID, holder) in inactiveReleases where holder == name {
            inactiveReleases[claimID] = nil
            guard let number = UInt64(claimID.dropFirst(2)), claims.book.claims[number] != nil else { continue }
            claims.breakClaim(
                number, by: Party(user: "accmond"),
                reason: "its holder's login session is no longer in front (release-when-inactive)") {}
        }
    }
}
