/// What an entry's `claim` says: who may check its accessories out, and how a claim of them behaves.
///
/// Without `claim`, whoever sees an accessory (the entry's `access`) may claim it, a claim takes access away only,
/// waits ``defaultReturnSeconds`` for a re-enumerated accessory and has no maximum duration.
public struct ClaimPolicy: Sendable, Hashable {
    /// How long a claim waits for its accessory to come back when its connection ends, unless the entry says.
    public static let defaultReturnSeconds = 10.0
    /// The policy of an entry without `claim`.
    public static let `default` = ClaimPolicy()

    /// Who may claim, narrowing the entry's `access` (a claimer must also see the accessory); `nil`: whoever sees it.
    public var access: AccessList?
    /// The MQTT users who may claim the entry's accessories through a bridge (`remote`), by their MQTT user name.
    public var remote: [String]
    /// The local user each remote user is mapped to (`{"user": "ci", "as": "ci-runner"}` in `remote`): while that
    /// remote user holds a claim, this local user may open the nodes (read and write), and nobody else but root.
    public var remoteAs: [String: Principal]
    /// Whether a claim gives the holder access to the device nodes it lacked (`grant`): for benches where claims are
    /// the only way in. Off: a claim only takes access away from others.
    public var grant: Bool
    /// How long a claim waits for its accessory to come back after its connection ended (a reset, a bootloader).
    public var returnSeconds: Double
    /// The longest a claim of the entry's accessories may last; `nil`: no maximum.
    public var maxSeconds: Double?

    public init(
        access: AccessList? = nil, remote: [String] = [], remoteAs: [String: Principal] = [:], grant: Bool = false,
        returnSeconds: Double = ClaimPolicy.defaultReturnSeconds, maxSeconds: Double? = nil
    ) {
        self.access = access
        self.remote = remote
        self.remoteAs = remoteAs
        self.grant = grant
        self.returnSeconds = returnSeconds
        self.maxSeconds = maxSeconds
    }

    /// Whether a local user may claim an accessory of an entry whose `access` is `entryAccess`: the user sees it, and
    /// the claim list (if any) admits the user too.
    public func allowsLocal(uid: UInt32, gids: [UInt32], entryAccess: AccessList, accounts: AccountIDs) -> Bool {
        guard entryAccess.allows(uid: uid, gids: gids, accounts: accounts) else { return false }
        return access?.allows(uid: uid, gids: gids, accounts: accounts) ?? true
    }

    /// Whether the MQTT user `user` may claim through a bridge.
    public func allowsRemote(_ user: String) -> Bool { remote.contains(user) }

    /// The local uid that opens the nodes while the MQTT user `user` holds a claim; `nil`: nobody but root.
    public func localUser(for user: String, accounts: AccountIDs) -> UInt32? {
        switch remoteAs[user] {
        case .id(let uid)?: uid
        case .name(let name)?: accounts.users[name]
        case nil: nil
        }
    }
}
