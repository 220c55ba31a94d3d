import AccmonManifest
import AccmonSys

/// Who a client is: the ids the kernel gives for its socket (`SO_PEERCRED`, `SO_PEERGROUPS`).
///
/// No account database is asked: the names a manifest holds are resolved to ids when it loads (``AccountIDs``), off
/// the broker's loop, so a slow directory service never holds up a client.
struct ClientPrincipal: Sendable, Hashable, Codable, CustomStringConvertible {
    var uid: UInt32
    /// The primary group and the supplementary groups.
    var gids: [UInt32]

    /// The principal behind a connected socket; `nil` when the kernel gave no credentials.
    static func of(_ descriptor: FileDescriptor, peer: PeerCredentials?) -> ClientPrincipal? {
        guard let peer else { return nil }
        let supplementary = (try? UnixSocket.peerGroups(descriptor)) ?? []  // try?: then the primary group only
        var gids = [peer.gid]
        for gid in supplementary where !gids.contains(gid) { gids.append(gid) }
        return ClientPrincipal(uid: peer.uid, gids: gids)
    }

    func isAllowed(by list: AccessList, accounts: AccountIDs) -> Bool {
        list.allows(uid: uid, gids: gids, accounts: accounts)
    }

    var description: String { "uid \(uid)" }
}
