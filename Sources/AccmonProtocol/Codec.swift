import FoundationEssentials

/// Encodes and decodes protocol lines. Pure: no I/O.
///
/// Each ``ServerMessage`` is encoded once into a line (with its newline) that can be written to any number of
/// clients.
public struct ProtocolCodec {
    private let encoder: JSONEncoder
    private let decoder = JSONDecoder()

    /// Creates a codec.
    public init() {
        encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    }

    // MARK: Client messages

    /// Decodes one line (without its newline) sent by a client.
    ///
    /// - Returns: the message, or the error to send back, with the request id when one could be read.
    public func decodeClientMessage(_ line: some Collection<UInt8>) -> Result<ClientMessage, ClientDecodingFailure> {
        // The request path: most lines are read in one pass; the reader leaves the rest, errors included, to
        // JSONDecoder, which decodes them to the same message or reports why it cannot.
        let message =
            line.withContiguousStorageIfAvailable { RequestLineReader.message($0) }
            ?? Array(line).withUnsafeBufferPointer { RequestLineReader.message($0) }
        if let message { return .success(message) }
        return decodeClientMessageWithJSONDecoder(line)
    }

    /// Decodes a client line with JSONDecoder, whatever its form: what ``RequestLineReader`` must match, and the path
    /// that reports every error.
    func decodeClientMessageWithJSONDecoder(
        _ line: some Collection<UInt8>
    ) -> Result<ClientMessage, ClientDecodingFailure> {
        // JSONDecoder checks the encoding of only the strings it reads; the protocol is UTF-8 throughout.
        guard String(validating: line, as: UTF8.self) != nil else {
            return .failure(
                ClientDecodingFailure(id: nil, error: ProtocolError(.malformedJSON, "message: line: not valid UTF-8")))
        }
        let data = Data(line)
        let envelope: Envelope
        do {
            envelope = try decoder.decode(Envelope.self, from: data)
        } catch {
            return .failure(ClientDecodingFailure(id: nil, error: Self.protocolError(error, context: "message")))
        }
        guard !envelope.typeIsNotString else {
            return .failure(
                ClientDecodingFailure(
                    id: envelope.id, error: ProtocolError(.invalidMessage, "message: type: expected a string")))
        }
        guard let type = envelope.type else {
            return .failure(
                ClientDecodingFailure(
                    id: envelope.id, error: ProtocolError(.invalidMessage, "message: type: field 'type' is missing")))
        }
        do {
            let request: ClientRequest
            switch type {
            case "hello":
                let body = try decoder.decode(HelloBody.self, from: data)
                request = .hello(versions: body.versions, clientName: body.client ?? "", restoreID: body.restoreID)
            case "subscribe":
                let body = try decoder.decode(FilterBody.self, from: data)
                request = .subscribe(try validated(body.filter, type), includeRejected: body.all ?? false)
            case "unsubscribe":
                request = .unsubscribe
            case "list":
                let body = try decoder.decode(FilterBody.self, from: data)
                request = .list(try validated(body.filter, type), includeRejected: body.all ?? false)
            case "ack":
                request = .acknowledge(try decoder.decode(AckBody.self, from: data).seq)
            case "suspend":
                request = .suspend
            case "resume":
                request = .resume
            case "reload":
                request = .reloadManifest
            case "status":
                request = .status
            case "simulate":
                request = try simulateRequest(data)
            default:
                return .failure(
                    ClientDecodingFailure(
                        id: envelope.id,
                        error: ProtocolError(
                            .unknownType,
                            "message: type: unknown type '\(type)' (expected hello, subscribe, unsubscribe, suspend, resume, ack, list, status, reload"
                                + " or simulate)")))
            }
            return .success(ClientMessage(id: envelope.id, request))
        } catch let error as ProtocolError {
            return .failure(ClientDecodingFailure(id: envelope.id, error: error))
        } catch {
            return .failure(ClientDecodingFailure(id: envelope.id, error: Self.protocolError(error, context: type)))
        }
    }

    private func validated(_ filter: AccessoryFilter?, _ context: String) throws(ProtocolError) -> AccessoryFilter {
        let filter = filter ?? .all
        if let problem = filter.validationProblem() { throw ProtocolError(.invalidField, "\(context): \(problem)") }
        return filter
    }

    private func simulateRequest(_ data: Data) throws -> ClientRequest {
        let body = try decoder.decode(SimulateBody.self, from: data)
        switch body.action {
        case "connect":
            guard var accessory = body.accessory else {
                throw ProtocolError(.missingField, "simulate: accessory: field 'accessory' is missing")
            }
            try Self.normalizeSimulatedAccessory(&accessory)
            return .simulateConnect(accessory)
        case "disconnect":
            guard let connectionID = body.connectionID else {
                throw ProtocolError(.missingField, "simulate: connectionID: field 'connectionID' is missing")
            }
            return .simulateDisconnect(connectionID)
        default:
            throw ProtocolError(
                .invalidField, "simulate: action: unknown action '\(body.action)' (expected connect or disconnect)")
        }
    }

    /// Makes the accessory of a `simulate` `connect` what the daemon takes: vendor and product ids normalised to four
    /// lowercase digits, and a derived ``Accessory/accessoryID`` derived again from them.
    ///
    /// - Throws: `invalid-field` when a vendor or product id is not empty and not 1 to 4 hex digits.
    static func normalizeSimulatedAccessory(_ accessory: inout Accessory) throws(ProtocolError) {
        // The usual case: sent normalised.
        if AccessoryFilter.isNormalizedHexID(accessory.vendorID),
            AccessoryFilter.isNormalizedHexID(accessory.productID)
        {
            return
        }
        func checkHexID(_ field: String, _ value: String) throws(ProtocolError) {
            guard value.isEmpty || AccessoryFilter.isHexID(value) else {
                throw ProtocolError(
                    .invalidField, "simulate: accessory.\(field): '\(value)' is not a hex id of 1 to 4 digits")
            }
        }
        try checkHexID("vendorID", accessory.vendorID)
        try checkHexID("productID", accessory.productID)
        let vendorID = AccessoryFilter.normalizedHexID(accessory.vendorID)
        let productID = AccessoryFilter.normalizedHexID(accessory.productID)
        guard vendorID != accessory.vendorID || productID != accessory.productID else { return }  // sent normalised
        let idWasDerived = accessory.accessoryID == accessory.derivedAccessoryID
        accessory.vendorID = vendorID
        accessory.productID = productID
        if idWasDerived { accessory.accessoryID = accessory.derivedAccessoryID }
    }

    /// Encodes a client message as one line, newline included.
    public func encode(_ message: ClientMessage) -> [UInt8] {
        let body: any Encodable
        switch message.request {
        case .hello(let versions, let name, let restoreID):
            body = OutgoingHello(type: "hello", id: message.id, versions: versions, client: name, restoreID: restoreID)
        case .acknowledge(let sequence):
            body = OutgoingAck(type: "ack", id: message.id, seq: sequence)
        case .subscribe(let filter, let all), .list(let filter, let all):
            body = OutgoingFilter(
                type: message.request.typeName, id: message.id, filter: filter == .all ? nil : filter,
                all: all ? true : nil)
        case .unsubscribe, .suspend, .resume, .status, .reloadManifest:
            body = OutgoingBare(type: message.request.typeName, id: message.id)
        case .simulateConnect(let accessory):
            body = OutgoingSimulate(
                type: "simulate", id: message.id, action: "connect", accessory: accessory, connectionID: nil)
        case .simulateDisconnect(let connectionID):
            body = OutgoingSimulate(
                type: "simulate", id: message.id, action: "disconnect", accessory: nil, connectionID: connectionID)
        }
        return line(body)
    }

    // MARK: Server messages

    /// Encodes a server message as one line, newline included.
    public func encode(_ message: ServerMessage) -> [UInt8] {
        // Events and the replies of the request path are written directly; the rest with JSONEncoder.
        switch message {
        case .event(let event): EventLineWriter.line(event)
        case .ok(let id, let connectionID): ReplyLineWriter.ok(id: id, connectionID: connectionID)
        case .error(let id, let error): ReplyLineWriter.error(id: id, error)
        default: line(ServerMessageCoding(message: message))
        }
    }

    /// Encodes a server message with JSONEncoder, whatever its kind: what ``EventLineWriter`` and
    /// ``ReplyLineWriter`` must match.
    func encodeWithJSONEncoder(_ message: ServerMessage) -> [UInt8] {
        line(ServerMessageCoding(message: message))
    }

    /// Decodes one line (without its newline) sent by the daemon.
    public func decodeServerMessage(_ line: some Collection<UInt8>) throws(ProtocolError) -> ServerMessage {
        do {
            return try decoder.decode(ServerMessageCoding.self, from: Data(line)).message
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw Self.protocolError(error, context: "daemon message")
        }
    }

    private func line(_ value: some Encodable) -> [UInt8] {
        do {
            var bytes = [UInt8](try encoder.encode(value))
            bytes.append(0x0A)
            return bytes
        } catch {
            // Our message types hold only strings, numbers and arrays of them: encoding cannot fail.
            preconditionFailure("protocol encoding failed: \(error)")
        }
    }

    /// Turns a decoding error into a protocol error whose message says where and why.
    static func protocolError(_ error: any Error, context: String) -> ProtocolError {
        guard let error = error as? DecodingError else {
            return ProtocolError(.malformedJSON, "\(context): \(error)")
        }
        switch error {
        case .dataCorrupted(let info) where info.codingPath.isEmpty:
            return ProtocolError(.malformedJSON, "\(context): line: not valid JSON")
        case .typeMismatch(_, let info) where info.codingPath.isEmpty,
            .valueNotFound(_, let info) where info.codingPath.isEmpty:
            return ProtocolError(.invalidMessage, "\(context): line: expected a JSON object")
        case .keyNotFound(let key, let info):
            let path = (info.codingPath + [key]).map(\.displayName).joined(separator: ".")
            return ProtocolError(.missingField, "\(context): \(path): field '\(key.stringValue)' is missing")
        case .typeMismatch(let type, let info):
            return ProtocolError(
                .invalidField, "\(context): \(info.path): expected \(Self.jsonTypeName(type))")
        case .valueNotFound(let type, let info):
            return ProtocolError(
                .invalidField, "\(context): \(info.path): expected \(Self.jsonTypeName(type)), got null")
        case .dataCorrupted(let info):
            return ProtocolError(.invalidField, "\(context): \(info.path): \(Self.reason(info))")
        @unknown default:
            return ProtocolError(.invalidField, "\(context): \(error)")
        }
    }

    private static func reason(_ info: DecodingError.Context) -> String {
        if info.codingPath.last?.stringValue == "kind" {
            return "unknown kind (expected usb, serial or bluetooth-hid)"
        }
        // With a coding path, corrupt data comes from our own types' checks, which say what they expected.
        return info.debugDescription.isEmpty ? "invalid value" : info.debugDescription
    }

    private static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "a boolean"
        case is Int.Type, is Int64.Type, is UInt64.Type, is Double.Type: "a number"
        case is [Any].Type: "an array"
        case is [String: Any].Type: "an object"
        case is RequestID.Type: "a string or an integer"
        default: type == AccessoryKind.self ? "a string" : "a value of another type"
        }
    }
}

/// A client line that could not be decoded: the error to report and the request id when it was readable.
public struct ClientDecodingFailure: Error, Sendable, Hashable {
    /// The request id, when the line was an object with a readable `id`.
    public var id: RequestID?
    /// The error to send back.
    public var error: ProtocolError
}

extension CodingKey {
    fileprivate var displayName: String { intValue.map { "[\($0)]" } ?? stringValue }
}

extension DecodingError.Context {
    fileprivate var path: String {
        codingPath.isEmpty ? "line" : codingPath.map(\.displayName).joined(separator: ".")
    }
}

// MARK: Wire shapes

private struct Envelope: Decodable {
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

private struct AckBody: Decodable {
    var seq: UInt64

    enum CodingKeys: String, CodingKey { case seq }

    init(from decoder: any Decoder) throws {
        seq = try decoder.container(keyedBy: CodingKeys.self).decodeInteger(UInt64.self, forKey: .seq)
    }
}

extension KeyedDecodingContainer {
    /// Decodes an integer field, reporting a number that does not fit (such as `-1` or `2.5` for a `UInt64`) as an
    /// invalid value at its key: JSONDecoder itself would report "not valid JSON" with no path.
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

private struct OutgoingAck: Encodable {
    var type: String
    var id: RequestID?
    var seq: UInt64
}

private struct HelloBody: Decodable {
    var versions: [Int]
    var client: String?
    var restoreID: String?

    enum CodingKeys: String, CodingKey { case versions, client, restoreID }

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
    }
}

private struct FilterBody: Decodable {
    var filter: AccessoryFilter?
    var all: Bool?
}

private struct SimulateBody: Decodable {
    var action: String
    var accessory: Accessory?
    var connectionID: ConnectionID?
}

private struct OutgoingHello: Encodable {
    var type: String
    var id: RequestID?
    var versions: [Int]
    var client: String
    var restoreID: String?
}

private struct OutgoingFilter: Encodable {
    var type: String
    var id: RequestID?
    var filter: AccessoryFilter?
    var all: Bool?
}

private struct OutgoingBare: Encodable {
    var type: String
    var id: RequestID?
}

private struct OutgoingSimulate: Encodable {
    var type: String
    var id: RequestID?
    var action: String
    var accessory: Accessory?
    var connectionID: ConnectionID?
}

private struct ServerMessageCoding: Codable {
    var message: ServerMessage

    init(message: ServerMessage) { self.message = message }

    enum Keys: String, CodingKey {
        case type, id, version, daemon, session, seq, accessories, accessory, connectionID, code, message, reason
        case restored, filter, rejected
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
            try c.encode(snapshot.accessories, forKey: .accessories)
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
        case .ok(let id, let connectionID):
            try c.encode("ok", forKey: .type)
            try c.encodeIfPresent(id, forKey: .id)
            try c.encodeIfPresent(connectionID, forKey: .connectionID)
        case .error(let id, let error):
            try c.encode("error", forKey: .type)
            try c.encodeIfPresent(id, forKey: .id)
            try c.encode(error.code, forKey: .code)
            try c.encode(error.message, forKey: .message)
        case .shutdown(let reason):
            try c.encode("shutdown", forKey: .type)
            try c.encode(reason, forKey: .reason)
        }
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        let type = try c.decode(String.self, forKey: .type)
        let id = try c.decodeIfPresent(RequestID.self, forKey: .id)
        func snapshot() throws -> Snapshot {
            let rejected = try c.decodeIfPresent([String: String].self, forKey: .rejected) ?? [:]
            return Snapshot(
                sequence: try c.decode(UInt64.self, forKey: .seq),
                accessories: try c.decode([Accessory].self, forKey: .accessories),
                rejected: Dictionary(
                    uniqueKeysWithValues: rejected.compactMap { key, reason in
                        UInt64(key).map { (ConnectionID($0), reason) }
                    }))
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
        case "ok": message = .ok(id: id, connectionID: try c.decodeIfPresent(ConnectionID.self, forKey: .connectionID))
        case "error":
            message = .error(
                id: id,
                ProtocolError(
                    try c.decode(ProtocolError.Code.self, forKey: .code), try c.decode(String.self, forKey: .message)))
        case "shutdown": message = .shutdown(reason: try c.decode(String.self, forKey: .reason))
        default:
            throw ProtocolError(.unknownType, "daemon message: type: unknown type '\(type)'")
        }
    }
}
