import AccmonDevices
import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys
import Glibc

/// Who a client is: from the socket's peer credentials (`SO_PEERCRED`, `SO_PEERGROUPS`) and the account databases.
struct ClientPrincipal: Sendable, Hashable {
    var uid: UInt32
    /// The primary group and the supplementary groups.
    var gids: [UInt32]
    var userName: String?
    var groupNames: [String]

    /// Resolves names for the given ids.
    init(uid: UInt32, gids: [UInt32]) {
        self.uid = uid
        self.gids = gids
        userName = Accounts.userName(uid)
        groupNames = gids.compactMap { Accounts.groupName($0) }
    }

    /// The principal behind a connected socket; `nil` when the kernel gave no credentials.
    static func of(_ descriptor: FileDescriptor, peer: PeerCredentials?) -> ClientPrincipal? {
        guard let peer else { return nil }
        let supplementary = (try? UnixSocket.peerGroups(descriptor)) ?? []  // try?: then the primary group only
        var gids = [peer.gid]
        for gid in supplementary where !gids.contains(gid) { gids.append(gid) }
        return ClientPrincipal(uid: peer.uid, gids: gids)
    }

    func isAllowed(by list: AccessList) -> Bool {
        list.allows(uid: uid, gids: gids, userName: userName, groupNames: groupNames)
    }

    var description: String { userName.map { "\($0) (uid \(uid))" } ?? "uid \(uid)" }
}

/// The manifest in force, where it came from, and each connected accessory's verdict.
struct Authorizer {
    private(set) var manifest = Manifest.empty
    private(set) var files: [String] = []
    private(set) var loadedAt: Double = 0
    private(set) var lastFailure: [String] = []
    /// The verdict for each connection, decided when it connected or at the last reload.
    private(set) var verdicts: [ConnectionID: Authentication] = [:]

    let mainPath: String
    let dropInDirectory: String
    let logger: Logger

    init(mainPath: String, dropInDirectory: String, logger: Logger) {
        self.mainPath = mainPath
        self.dropInDirectory = dropInDirectory
        self.logger = logger
    }

    /// Reads and validates the manifest completely; replaces the one in force only when it has no problem.
    /// - Returns: the problems, empty on success.
    mutating func load() -> [ManifestProblem] {
        let (paths, listing) = ManifestFiles.paths(explicit: nil, main: mainPath, directory: dropInDirectory)
        let (read, unreadable) = ManifestFiles.read(paths)
        var problems = listing + unreadable
        var parsed: Manifest?
        switch Manifest.parse(files: read) {
        case .success(let manifest): parsed = manifest
        case .failure(let found): problems += found.problems
        }
        guard problems.isEmpty, let parsed else {
            lastFailure = problems.map(\.description)
            return problems
        }
        manifest = parsed
        files = read.map(\.path)
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
        return principal.uid == 0
            || manifest.isAdmin(
                uid: principal.uid, gids: principal.gids, userName: principal.userName,
                groupNames: principal.groupNames)
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

    /// Whether a client sees the accessory: an allowed one when the entry's access list admits it, a rejected one
    /// only when it is an admin who asked for rejected accessories.
    func isVisible(to principal: ClientPrincipal?, includingRejected: Bool) -> Bool {
        switch self {
        case .allowed(_, _, let access): principal.map { $0.isAllowed(by: access) } ?? false
        case .rejected: includingRejected
        }
    }

    var rejection: String? {
        if case .rejected(let reason) = self { reason } else { nil }
    }
}
