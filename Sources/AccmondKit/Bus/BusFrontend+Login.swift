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
    }
}
