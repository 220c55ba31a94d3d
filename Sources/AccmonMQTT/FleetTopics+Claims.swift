/// The topics of claims across the fleet (docs/MQTT.md §12):
///
/// - `<prefix>/<host>/claim-requests/<user>`: a claimer's requests to one host; the broker's ACL lets only the MQTT
///   user `<user>` write there, which makes the level the claimer's identity;
/// - `<prefix>/<host>/claim-replies/<user>/...`: the host's replies and notices to that user;
/// - `<prefix>/<host>/claims/<accessoryID>/<connectionID>`: retained, the claim on one connection while it is held.
extension FleetTopics {
    /// The topic a claimer publishes its requests to one host on.
    public func claimRequest(host: String, user: String) -> String {
        "\(prefix)/\(Self.encodeLevel(host))/claim-requests/\(Self.encodeLevel(user))"
    }

    /// The filter of every user's requests to one host (the bridge's subscription).
    public func claimRequests(host: String) -> String { "\(prefix)/\(Self.encodeLevel(host))/claim-requests/+" }

    /// The level under which a host replies to `user`, with a trailing `/`.
    public func claimReplies(host: String, user: String) -> String {
        "\(prefix)/\(Self.encodeLevel(host))/claim-replies/\(Self.encodeLevel(user))/"
    }

    /// The filter of every host's replies to `user` (a claimer's subscription).
    public func claimReplies(user: String) -> String { "\(prefix)/+/claim-replies/\(Self.encodeLevel(user))/#" }

    /// The retained claim topic of one connection.
    public func claim(host: String, accessoryID: String, connectionID: UInt64) -> String {
        "\(prefix)/\(Self.encodeLevel(host))/claims/\(Self.encodeLevel(accessoryID))/\(connectionID)"
    }

    /// The filter of one host's retained claim topics.
    public func claims(host: String) -> String { "\(prefix)/\(Self.encodeLevel(host))/claims/+/+" }

    /// The filter of one host's retained claim topics, from its topic level as it appears in topics.
    public func claims(hostLevel: String) -> String { "\(prefix)/\(hostLevel)/claims/+/+" }

    /// The filter of every host's retained claim topics.
    public var allClaims: String { "\(prefix)/+/claims/+/+" }

    /// The MQTT user (decoded) whose request topic to `host` this is, or `nil` when it is not one.
    public func claimRequester(_ topic: String, host: String) -> String? {
        let start = "\(prefix)/\(Self.encodeLevel(host))/claim-requests/"
        guard topic.hasPrefix(start) else { return nil }
        let level = topic.dropFirst(start.count)
        guard !level.isEmpty, !level.contains("/") else { return nil }
        return Self.decodeLevel(String(level))
    }

    /// Host, accessory id and connection id (decoded) of a retained claim topic, or `nil`.
    public func parseClaim(_ topic: String) -> (host: String, accessoryID: String, connectionID: UInt64)? {
        guard topic.hasPrefix(prefix + "/") else { return nil }
        let levels = topic.dropFirst(prefix.count + 1).split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count == 4, levels[1] == "claims", let connection = UInt64(levels[3]) else { return nil }
        return (Self.decodeLevel(String(levels[0])), Self.decodeLevel(String(levels[2])), connection)
    }
}
