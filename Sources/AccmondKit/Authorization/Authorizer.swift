import AccmonManifest
import AccmonProtocol
import AccmonSys

/// The manifest in force, where it came from, the ids of the names it holds, and each connected accessory's verdict.
struct Authorizer {
    private(set) var manifest = Manifest.empty
    private(set) var files: [String] = []
    /// The ids of the user and group names the manifest mentions, resolved when it loaded.
    private(set) var accounts = AccountIDs()
    private(set) var loadedAt: Double = 0
    private(set) var lastFailure: [String] = []
    /// The verdict for each connection, decided when it connected or at the last reload.
    private(set) var verdicts: [ConnectionID: Authentication] = [:]

    /// Puts a loaded manifest in force when it has no problem; otherwise keeps the one in force and remembers why.
    /// - Returns: the problems, empty on success.
    mutating func install(_ loaded: LoadedManifest) -> [ManifestProblem] {
        guard loaded.problems.isEmpty else {
            lastFailure = loaded.problems.map(\.description)
            return loaded.problems
        }
        manifest = loaded.manifest
        files = loaded.files
        accounts = loaded.accounts
        loadedAt = wallClockSeconds()
        lastFailure = []
        return []
    }

    /// Decides and remembers the verdict for a connecting accessory.
    mutating func admit(_ accessory: Accessory) -> Authentication {
        let verdict = manifest.authenticate(accessory)
        verdicts[accessory.connectionID] = verdict
        return verdict
    }

    /// Forgets a connection that ended; returns its verdict.
    mutating func release(_ connection: ConnectionID) -> Authentication? {
        verdicts.removeValue(forKey: connection)
    }

    /// Re-decides every connected accessory under the manifest now in force; returns the old verdicts.
    mutating func reevaluate(_ accessories: [Accessory]) -> [ConnectionID: Authentication] {
        let old = verdicts
        verdicts = Dictionary(uniqueKeysWithValues: accessories.map { ($0.connectionID, manifest.authenticate($0)) })
        return old
    }

    func verdict(_ connection: ConnectionID) -> Authentication? { verdicts[connection] }

    /// Whether `principal` may do admin operations: root, or the manifest's admins.
    func isAdmin(_ principal: ClientPrincipal?) -> Bool {
        guard let principal else { return false }
        return principal.uid == 0 || manifest.isAdmin(uid: principal.uid, gids: principal.gids, accounts: accounts)
    }

    var status: ManifestStatus {
        ManifestStatus(
            files: files, entries: manifest.entries.count, loadedAt: loadedAt, lastFailure: lastFailure,
            rejectedAccessories: verdicts.values.filter { !$0.isAllowed }.count)
    }
}

extension Authentication {
    /// The accessory as clients see it: when allowed, the entry's protocol strings, then any the source reported
    /// (a simulated accessory's); when rejected, none.
    func announced(_ accessory: Accessory) -> Accessory {
        let protocolStrings =
            if case .allowed(_, let protocols, _) = self {
                protocols + accessory.protocolStrings.filter { !protocols.contains($0) }
            } else {
                [String]()
            }
        // Unchanged (an entry without protocols, a device that reports none): the accessory's storage stays shared.
        guard protocolStrings != accessory.protocolStrings else { return accessory }
        var announced = accessory
        announced.protocolStrings = protocolStrings
        return announced
    }

    /// Whether a client sees the accessory: an allowed one when the entry's access list admits it (names counting
    /// through `accounts`), a rejected one only when it is an admin who asked for rejected accessories.
    func isVisible(to principal: ClientPrincipal?, includingRejected: Bool, accounts: AccountIDs) -> Bool {
        switch self {
        case .allowed(_, _, let access): principal.map { $0.isAllowed(by: access, accounts: accounts) } ?? false
        case .rejected: includingRejected
        }
    }

    var rejection: String? {
        if case .rejected(let reason) = self { reason } else { nil }
    }
}
