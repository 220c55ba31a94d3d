import FoundationEssentials

// MARK: Claim requests on the wire

struct ClaimBody: Decodable {
    var connections: [ConnectionID]?
    var filter: AccessoryFilter?
    var serial: String?
    var count: Int?
    var token: String?
    var wait: Bool?
    var reason: String?
    var maxSeconds: Double?
    var preserve: Bool?
    var remoteUser: String?
}

struct ReleaseBody: Decodable {
    var claimID: String?
    var connectionID: ConnectionID?
    var accessoryID: String?
    var force: Bool?
    var reason: String?
    var remoteUser: String?
}

struct OutgoingClaim: Encodable {
    var type = "claim"
    var id: RequestID?
    var connections: [ConnectionID]?
    var filter: AccessoryFilter?
    var serial: String?
    var count: Int?
    var token: String?
    var wait: Bool?
    var reason: String?
    var maxSeconds: Double?
    var preserve: Bool?
    var remoteUser: String?
}

struct OutgoingRelease: Encodable {
    var type = "release"
    var id: RequestID?
    var claimID: String?
    var connectionID: ConnectionID?
    var accessoryID: String?
    var force: Bool?
    var reason: String?
    var remoteUser: String?
}

extension ProtocolCodec {
    /// A `claim` request: exactly one of `connections`, `filter` (with `serial` and `count`) or `token`.
    func claimRequest(_ data: Data) throws -> ClientRequest {
        let body = try decoder.decode(ClaimBody.self, from: data)
        let targets = [body.connections != nil, body.filter != nil || body.serial != nil, body.token != nil]
        guard targets.filter({ $0 }).count == 1 else {
            throw ProtocolError(
                targets.contains(true) ? .invalidField : .missingField,
                "claim: connections: give one of connections (ids), filter (with serial and count) or token")
        }
        if body.count != nil, body.connections != nil || body.token != nil {
            throw ProtocolError(.invalidField, "claim: count: only a claim by filter takes a count")
        }
        let target: ClaimRequest.Target
        if let connections = body.connections {
            guard (1...ClaimRequest.maximumCount).contains(connections.count) else {
                throw ProtocolError(
                    .invalidField, "claim: connections: name 1 to \(ClaimRequest.maximumCount) connection ids")
            }
            guard Set(connections).count == connections.count else {
                throw ProtocolError(.invalidField, "claim: connections: a connection id is listed twice")
            }
            target = .connections(connections)
        } else if let token = body.token {
            guard (1...256).contains(token.utf8.count) else {
                throw ProtocolError(.invalidField, "claim: token: expected the token of an earlier claim")
            }
            target = .resume(token: token)
        } else {
            let filter = body.filter ?? .all
            if let problem = filter.validationProblem() { throw ProtocolError(.invalidField, "claim: \(problem)") }
            let count = body.count ?? 1
            guard (1...ClaimRequest.maximumCount).contains(count) else {
                throw ProtocolError(.invalidField, "claim: count: expected 1 to \(ClaimRequest.maximumCount)")
            }
            target = .matching(filter, serial: body.serial, count: count)
        }
        let reason = try Self.checkedReason(body.reason, "claim")
        if let maxSeconds = body.maxSeconds, !(maxSeconds > 0 && maxSeconds <= 31_536_000) {
            throw ProtocolError(.invalidField, "claim: maxSeconds: expected more than 0 and at most 31536000 (a year)")
        }
        return .claim(
            ClaimRequest(
                target, wait: body.wait ?? false, reason: reason, maxSeconds: body.maxSeconds,
                preserve: body.preserve ?? false, remoteUser: try Self.checkedRemoteUser(body.remoteUser, "claim")))
    }

    /// A `release` request: exactly one of `claimID`, `connectionID` or `accessoryID`.
    func releaseRequest(_ data: Data) throws -> ClientRequest {
        let body = try decoder.decode(ReleaseBody.self, from: data)
        let targets: [ReleaseRequest.Target] = [
            body.claimID.map(ReleaseRequest.Target.claim), body.connectionID.map(ReleaseRequest.Target.connection),
            body.accessoryID.map(ReleaseRequest.Target.accessory),
        ].compactMap { $0 }
        guard targets.count == 1, let target = targets.first else {
            throw ProtocolError(
                targets.isEmpty ? .missingField : .invalidField,
                "release: claimID: give one of claimID, connectionID or accessoryID")
        }
        return .release(
            ReleaseRequest(
                target, force: body.force ?? false, reason: try Self.checkedReason(body.reason, "release"),
                remoteUser: try Self.checkedRemoteUser(body.remoteUser, "release")))
    }

    private static func checkedReason(_ reason: String?, _ context: String) throws(ProtocolError) -> String {
        let reason = reason ?? ""
        guard reason.utf8.count <= ClaimRequest.maximumReasonLength else {
            throw ProtocolError(
                .invalidField, "\(context): reason: longer than \(ClaimRequest.maximumReasonLength) bytes")
        }
        return reason
    }

    private static func checkedRemoteUser(_ user: String?, _ context: String) throws(ProtocolError) -> String? {
        guard let user else { return nil }
        guard (1...255).contains(user.utf8.count), !user.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw ProtocolError(
                .invalidField, "\(context): remoteUser: expected an MQTT user name of 1 to 255 bytes")
        }
        return user
    }

    /// The client's encoding of a `claim` or `release`.
    func encodeClaimRequest(_ request: ClientRequest, id: RequestID?) -> any Encodable {
        switch request {
        case .claim(let claim):
            var body = OutgoingClaim(id: id)
            switch claim.target {
            case .connections(let connections): body.connections = connections
            case .matching(let filter, let serial, let count):
                body.filter = filter
                body.serial = serial
                body.count = count
            case .resume(let token): body.token = token
            }
            body.wait = claim.wait ? true : nil
            body.reason = claim.reason.isEmpty ? nil : claim.reason
            body.maxSeconds = claim.maxSeconds
            body.preserve = claim.preserve ? true : nil
            body.remoteUser = claim.remoteUser
            return body
        case .release(let release):
            var body = OutgoingRelease(id: id)
            switch release.target {
            case .claim(let claimID): body.claimID = claimID
            case .connection(let connectionID): body.connectionID = connectionID
            case .accessory(let accessoryID): body.accessoryID = accessoryID
            }
            body.force = release.force ? true : nil
            body.reason = release.reason.isEmpty ? nil : release.reason
            body.remoteUser = release.remoteUser
            return body
        default:
            preconditionFailure("encodeClaimRequest: not a claim request")
        }
    }
}

// MARK: Accessories with their claims

/// An accessory object with its `claim` field (absent when it is free): the accessory's own fields and `claim` in one
/// JSON object, as snapshots asked for with `claims` carry them.
public struct ClaimedAccessory: Codable, Sendable, Hashable {
    public var accessory: Accessory
    public var claim: ClaimSummary?

    private enum Keys: String, CodingKey { case claim }

    public init(_ accessory: Accessory, claim: ClaimSummary?) {
        self.accessory = accessory
        self.claim = claim
    }

    public init(from decoder: any Decoder) throws {
        accessory = try Accessory(from: decoder)
        claim = try decoder.container(keyedBy: Keys.self).decodeIfPresent(ClaimSummary.self, forKey: .claim)
    }

    public func encode(to encoder: any Encoder) throws {
        try accessory.encode(to: encoder)
        if let claim {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(claim, forKey: .claim)
        }
    }
}
