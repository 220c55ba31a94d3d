import AccmonManifest
import AccmonProtocol

/// One history entry and who may see it, as decided when it was recorded: the accessory's verdict then, and the ids
/// the manifest's names resolved to then.
///
/// Immutable and shared: the loop's ring, the writer's queue and its copy of the file's content hold the same
/// object, so handing an entry on is a retain.
final class HistoryRecord: Sendable {
    let entry: HistoryEntry
    /// The accessory's verdict when the entry was recorded.
    let verdict: Authentication
    /// The ids of the names the verdict's access list holds, as resolved when the entry was recorded.
    let accounts: AccountIDs

    init(entry: HistoryEntry, verdict: Authentication, accounts: AccountIDs) {
        self.entry = entry
        self.verdict = verdict
        self.accounts = accounts
    }

    /// Whether `principal` may see the entry: whoever could see the accessory when it was recorded
    /// (``Authentication/isVisible(to:includingRejected:accounts:)``); a rejected accessory, and a `rejected` entry
    /// always, only root and the manifest's admins (`isAdmin`, decided now).
    func isVisible(to principal: ClientPrincipal?, isAdmin: Bool) -> Bool {
        if entry.kind == .rejected { return isAdmin }
        return verdict.isVisible(to: principal, includingRejected: isAdmin, accounts: accounts)
    }

    /// Who may see the entry, as ids alone (for the history file): `nil` for admins only; else the uids and gids the
    /// access list admits (root is always admitted).
    var audience: (uids: [UInt32], gids: [UInt32])? {
        guard entry.kind != .rejected, case .allowed(_, _, let access) = verdict else { return nil }
        func ids(_ principals: [Principal], _ names: [String: UInt32]) -> [UInt32] {
            var ids: [UInt32] = []
            for principal in principals {
                let id: UInt32? =
                    switch principal {
                    case .id(let id): id
                    case .name(let name): names[name]
                    }
                if let id, !ids.contains(id) { ids.append(id) }
            }
            return ids
        }
        return (ids(access.users, accounts.users), ids(access.groups, accounts.groups))
    }

    /// A record read back from the history file: visible to the ids it names, or to admins only.
    convenience init(entry: HistoryEntry, audience: (uids: [UInt32], gids: [UInt32])?) {
        let verdict: Authentication =
            if let audience {
                .allowed(
                    entryName: "", protocols: [],
                    access: AccessList(users: audience.uids.map(Principal.id), groups: audience.gids.map(Principal.id)))
            } else {
                .rejected(reason: "")
            }
        self.init(entry: entry, verdict: verdict, accounts: AccountIDs())
    }
}
