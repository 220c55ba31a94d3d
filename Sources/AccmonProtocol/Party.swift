/// Someone who acts on an accessory: the holder of a claim, a claimer who waits or asks, an admin who breaks a claim.
///
/// A local party is a client of accmond, known by the kernel's credentials of its socket (`uid`, `pid`) and the name
/// it gave in `hello` (`client`); `user` is the uid's name as accmond resolved it (empty until resolved, or when the
/// uid has none). A remote party is an MQTT user whose claim a bridge forwarded: `remote` is true, `user` is the MQTT
/// user name, and `uid` and `pid` are absent.
///
/// On the wire: `{"client":"accmon","pid":4242,"remote":false,"uid":1000,"user":"alice"}`; absent fields are left out.
public struct Party: Codable, Sendable, Hashable, CustomStringConvertible {
    /// The user name: the local uid's name, or the remote MQTT user; empty when unknown.
    public var user: String
    /// The local user id; `nil` for a remote party.
    public var uid: UInt32?
    /// The local process id; `nil` when unknown and for a remote party.
    public var pid: Int32?
    /// The client name given in `hello`; `nil` when none was given.
    public var client: String?
    /// Whether the party is a remote (MQTT) user.
    public var remote: Bool

    /// Creates a party.
    public init(user: String, uid: UInt32? = nil, pid: Int32? = nil, client: String? = nil, remote: Bool = false) {
        self.user = user
        self.uid = uid
        self.pid = pid
        self.client = client
        self.remote = remote
    }

    /// `alice (uid 1000, pid 4242, accmon)`, `uid 1000` when the name is unknown, `ci (remote)` for a remote user.
    public var description: String {
        if remote { return "\(user.isEmpty ? "?" : user) (remote)" }
        var details: [String] = []
        if let uid, !user.isEmpty { details.append("uid \(uid)") }
        if let pid, pid > 0 { details.append("pid \(pid)") }
        if let client, !client.isEmpty { details.append(client) }
        let name = user.isEmpty ? uid.map { "uid \($0)" } ?? "?" : user
        return details.isEmpty ? name : "\(name) (\(details.joined(separator: ", ")))"
    }
}
