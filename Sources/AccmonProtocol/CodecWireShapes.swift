import FoundationEssentials

// MARK: Wire shapes

struct Envelope: Decodable {
    var type: String?
    /// `type` is present but not a string: an invalid message, whose `id` is still worth reporting.
    var typeIsNotString = false
    var id: RequestID?

    enum CodingKeys: String, CodingKey { case type, id }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(RequestID.self, forKey: .id)
        do {
            type = try c.decodeIfPresent(String.self, forKey: .type)
        } catch DecodingError.typeMismatch {
            typeIsNotString = true
        }
    }
}

struct AckBody: Decodable {
    var seq: UInt64

    enum CodingKeys: String, CodingKey { case seq }

    init(from decoder: any Decoder) throws {
        seq = try decoder.container(keyedBy: CodingKeys.self).decodeInteger(UInt64.self, forKey: .seq)
    }
}

extension KeyedDecodingContainer {
    /// Decodes an integer field, reporting a number that does not fit (such as `-1` or `2.5` for a `UInt64`) as an
    /// invalid value at its key: JSONDecoder itself would report "not valid JSON" with no path.
    fileprivate func decodeIntegerIfPresent<T: FixedWidthInteger & Decodable>(
        _ type: T.Type, forKey key: Key
    ) throws -> T? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }  // null: as absent
        return try decodeInteger(type, forKey: key)
    }

    fileprivate func decodeInteger<T: FixedWidthInteger & Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        do {
            return try decode(type, forKey: key)
        } catch let error as DecodingError {
            throw error
        } catch {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self, debugDescription: "expected an integer from \(T.min) to \(T.max)")
        }
    }
}

struct OutgoingAck: Encodable {
    var type: String
    var id: RequestID?
    var seq: UInt64
}

struct HelloBody: Decodable {
    var versions: [Int]
    var client: String?
    var restoreID: String?
    var relaunch: String?

    enum CodingKeys: String, CodingKey { case versions, client, restoreID, relaunch }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        var list = try c.nestedUnkeyedContainer(forKey: .versions)
        versions = []
        while !list.isAtEnd {
            do {
                versions.append(try list.decode(Int.self))
            } catch let error as DecodingError {
                throw error
            } catch {
                // A number that does not fit in an Int: JSONDecoder would report "not valid JSON" with no path.
                throw DecodingError.dataCorruptedError(in: list, debugDescription: "expected an integer")
            }
        }
        client = try c.decodeIfPresent(String.self, forKey: .client)
        restoreID = try c.decodeIfPresent(String.self, forKey: .restoreID)
        relaunch = try c.decodeIfPresent(String.self, forKey: .relaunch)
    }
}

struct FilterBody: Decodable {
    var filter: AccessoryFilter?
    var all: Bool?
    var claims: Bool?
}

struct HistoryBody: Decodable {
    var since: Double?
    var before: UInt64?
    var limit: Int?
    var filter: AccessoryFilter?

    enum CodingKeys: String, CodingKey { case since, before, limit, filter }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        since = try c.decodeIfPresent(Double.self, forKey: .since)
        before = try c.decodeIntegerIfPresent(UInt64.self, forKey: .before)
        limit = try c.decodeIntegerIfPresent(Int.self, forKey: .limit)
        filter = try c.decodeIfPresent(AccessoryFilter.self, forKey: .filter)
    }
}

struct OutgoingHistory: Encodable {
    var type: String
    var id: RequestID?
    var since: Double?
    var before: UInt64?
    var limit: Int?
    var filter: AccessoryFilter?
}

struct SimulateBody: Decodable {
    var action: String
    var accessory: Accessory?
    var connectionID: ConnectionID?
}

struct OutgoingHello: Encodable {
    var type: String
    var id: RequestID?
    var versions: [Int]
    var client: String
    var restoreID: String?
    var relaunch: String?
}

struct OutgoingFilter: Encodable {
    var type: String
    var id: RequestID?
    var filter: AccessoryFilter?
    var all: Bool?
    var claims: Bool?
}

struct OutgoingBare: Encodable {
    var type: String
    var id: RequestID?
}

struct OutgoingSimulate: Encodable {
    var type: String
    var id: RequestID?
    var action: String
    var accessory: Accessory?
    var connectionID: ConnectionID?
}

struct ServerMessageCoding: Codable {
    var message: ServerMessage

    init(message: ServerMessage) { self.message = message }

    enum Keys: String, CodingKey {
        case type, id, version, daemon, session, seq, accessories, accessory, connectionID, code, message, reason
        case restored, filter, rejected, holders, claim, claims, waiters, notice, entries, truncated
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        switch message {
        case .hello(let id, let version, let daemonVersion, let sessionID, let restored):
            try c.encode("hello", forKey: .type)
            try c.encodeIfPresent(id, forKey: .id)
            try c.encode(version, forKey: .version)
            try c.encode(daemonVersion, forKey: .daemon)
            try c.encode(sessionID, forKey: .session)
            try c.encode(restored, forKey: .restored)
        case .restore(let state):
            try c.encode("restore", forKey: .type)
            try c.encode(state.filter, forKey: .filter)
            try c.encode(state.acknowledged, forKey: .seq)
            try c.encode(state.accessories, forKey: .accessories)
        case .restored(let sequence):
            try c.encode("restored", forKey: .type)
            try c.encode(sequence, forKey: .seq)
        case .snapshot(let id, let snapshot), .list(let id, let snapshot):
            if case .snapshot = message {
                try c.encode("snapshot", forKey: .type)
            } else {
                try c.encode("list", forKey: .type)
            }
            try c.encodeIfPresent(id, forKey: .id)
            try c.encode(snapshot.sequence, forKey: .seq)
            if snapshot.claims.isEmpty {
                try c.encode(snapshot.accessories, forKey: .accessories)
            } else {
                try c.encode(
                    snapshot.accessories.map { ClaimedAccessory($0, claim: snapshot.claims[$0.connectionID]) },
                    forKey: .accessories)
            }
            if !snapshot.rejected.isEmpty {
                try c.encode(
                    Dictionary(uniqueKeysWithValues: snapshot.rejected.map { ($0.key.description, $0.value) }),
                    forKey: .rejected)
            }
        case .event(let event):
            try c.encode(event.change.rawValue, forKey: .type)
            try c.encode(event.sequence, forKey: .seq)
            try c.encode(event.accessory, forKey: .accessory)
            try c.encodeIfPresent(event.rejection, forKey: .rejected)
        case .status(let id, let status):
            try c.encode("status", forKey: .type)
            try c.encodeIfPresent(id, forKey: .id)
            try status.encode(to: encoder)
        case .history(let id, let entries, let truncated):
            try c.encode("history", forKey: .type)
            try c.encodeIfPresent(id, forKey: .id)
            try c.encode(entries, forKey: .entries)
            if truncated { try c.encode(true, forKey: .truncated) }
        case .ok(let id, let connectionID):
            try c.encode("ok", forKey: .type)
            try c.encodeIfPresent(id, forKey: .id)
            try c.encodeIfPresent(connectionID, forKey: .connectionID)
        case .error(let id, let error):
            try c.encode("error", forKey: .type)
            try c.encodeIfPresent(id, forKey: .id)
            try c.encode(error.code, forKey: .code)
            try c.encode(error.message, forKey: .message)
            try c.encodeIfPresent(error.holders, forKey: .holders)
        case .shutdown(let reason):
            try c.encode("shutdown", forKey: .type)
            try c.encode(reason, forKey: .reason)
        case .claim(let id, let info):
            try c.encode("claim", forKey: .type)
            try c.encodeIfPresent(id, forKey: .id)
            try c.encode(info, forKey: .claim)
        case .claims(let id, let list):
            try c.encode("claims", forKey: .type)
            try c.encodeIfPresent(id, forKey: .id)
            try c.encode(list.claims, forKey: .claims)
            try c.encode(list.waiters, forKey: .waiters)
        case .claimNotice(let notice):
            try c.encode("claim-notice", forKey: .type)
            try notice.encode(to: encoder)
        case .claimUpdate(let update):
            try c.encode("claim-update", forKey: .type)
            try update.encode(to: encoder)
        }
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        let type = try c.decode(String.self, forKey: .type)
        let id = try c.decodeIfPresent(RequestID.self, forKey: .id)
        func snapshot() throws -> Snapshot {
            let rejected = try c.decodeIfPresent([String: String].self, forKey: .rejected) ?? [:]
            let accessories = try c.decode([ClaimedAccessory].self, forKey: .accessories)
            return Snapshot(
                sequence: try c.decode(UInt64.self, forKey: .seq),
                accessories: accessories.map(\.accessory),
                rejected: Dictionary(
                    uniqueKeysWithValues: rejected.compactMap { key, reason in
                        UInt64(key).map { (ConnectionID($0), reason) }
                    }),
                claims: Dictionary(
                    accessories.compactMap { item in item.claim.map { (item.accessory.connectionID, $0) } }
                ) { first, _ in first })
        }
        switch type {
        case "hello":
            message = .hello(
                id: id, version: try c.decode(Int.self, forKey: .version),
                daemonVersion: try c.decode(String.self, forKey: .daemon),
                sessionID: try c.decode(String.self, forKey: .session),
                restored: try c.decodeIfPresent(Bool.self, forKey: .restored) ?? false)
        case "restore":
            message = .restore(
                RestoreState(
                    filter: try c.decode(AccessoryFilter.self, forKey: .filter),
                    acknowledged: try c.decode(UInt64.self, forKey: .seq),
                    accessories: try c.decode([Accessory].self, forKey: .accessories)))
        case "restored": message = .restored(sequence: try c.decode(UInt64.self, forKey: .seq))
        case "snapshot": message = .snapshot(id: id, try snapshot())
        case "list": message = .list(id: id, try snapshot())
        case "connect", "disconnect":
            message = .event(
                AccessoryEvent(
                    type == "connect" ? .connect : .disconnect, sequence: try c.decode(UInt64.self, forKey: .seq),
                    accessory: try c.decode(Accessory.self, forKey: .accessory),
                    rejection: try c.decodeIfPresent(String.self, forKey: .rejected)))
        case "status": message = .status(id: id, try DaemonStatus(from: decoder))
        case "history":
            message = .history(
                id: id, entries: try c.decode([HistoryEntry].self, forKey: .entries),
                truncated: try c.decodeIfPresent(Bool.self, forKey: .truncated) ?? false)
        case "ok": message = .ok(id: id, connectionID: try c.decodeIfPresent(ConnectionID.self, forKey: .connectionID))
        case "error":
            message = .error(
                id: id,
                ProtocolError(
                    try c.decode(ProtocolError.Code.self, forKey: .code), try c.decode(String.self, forKey: .message),
                    holders: try c.decodeIfPresent([ClaimSummary].self, forKey: .holders)))
        case "shutdown": message = .shutdown(reason: try c.decode(String.self, forKey: .reason))
        case "claim": message = .claim(id: id, try c.decode(ClaimInfo.self, forKey: .claim))
        case "claims":
            message = .claims(
                id: id,
                ClaimList(
                    claims: try c.decode([ClaimSummary].self, forKey: .claims),
                    waiters: try c.decode([ClaimWaiter].self, forKey: .waiters)))
        case "claim-notice": message = .claimNotice(try ClaimNotice(from: decoder))
        case "claim-update": message = .claimUpdate(try ClaimUpdate(from: decoder))
        default:
            throw ProtocolError(.unknownType, "daemon message: type: unknown type '\(type)'")
        }
    }
}
