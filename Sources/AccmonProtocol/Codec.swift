import FoundationEssentials

/// Encodes and decodes protocol lines. Pure: no I/O.
///
/// Each ``ServerMessage`` is encoded once into a line (with its newline) that can be written to any number of
/// clients.
public struct ProtocolCodec {
    let encoder: JSONEncoder
    let decoder = JSONDecoder()

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
        let check =
            line.withContiguousStorageIfAvailable { RequestLineCheck.scan($0) }
            ?? Array(line).withUnsafeBufferPointer { RequestLineCheck.scan($0) }
        guard let check else {
            return .failure(
                ClientDecodingFailure(id: nil, error: ProtocolError(.malformedJSON, "message: line: not valid JSON")))
        }
        if let refusal = refusal(by: check, data) { return .failure(refusal) }
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
                request = .hello(
                    versions: body.versions, clientName: body.client ?? "", restoreID: body.restoreID,
                    relaunch: body.relaunch)
            case "subscribe":
                let body = try decoder.decode(FilterBody.self, from: data)
                request = .subscribe(
                    try validated(body.filter, type), includeRejected: body.all ?? false, claims: body.claims ?? false)
            case "unsubscribe":
                request = .unsubscribe
            case "list":
                let body = try decoder.decode(FilterBody.self, from: data)
                request = .list(
                    try validated(body.filter, type), includeRejected: body.all ?? false, claims: body.claims ?? false)
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
            case "history":
                request = .history(try historyQuery(data))
            case "simulate":
                request = try simulateRequest(data)
            case "claim":
                request = try claimRequest(data)
            case "release":
                request = try releaseRequest(data)
            case "claims":
                request = .claims
            default:
                return .failure(
                    ClientDecodingFailure(
                        id: envelope.id,
                        error: ProtocolError(
                            .unknownType,
                            "message: type: unknown type '\(type)' (expected hello, subscribe, unsubscribe, suspend, resume, ack, list, status, history,"
                                + " reload, simulate, claim, release or claims)")))
            }
            if let path = check.nonIntegerNumber(readBy: request) {
                throw ProtocolError(.invalidField, "\(type): \(path): \(RequestLineCheck.integerExpected)")
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

    private func historyQuery(_ data: Data) throws -> HistoryQuery {
        let body = try decoder.decode(HistoryBody.self, from: data)
        let limit = body.limit ?? HistoryQuery.defaultLimit
        guard (1...HistoryQuery.maximumLimit).contains(limit) else {
            throw ProtocolError(
                .invalidField, "history: limit: \(limit) is not from 1 to \(HistoryQuery.maximumLimit)")
        }
        return HistoryQuery(
            since: body.since, before: body.before, limit: limit, filter: try validated(body.filter, "history"))
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
        case .hello(let versions, let name, let restoreID, let relaunch):
            body = OutgoingHello(
                type: "hello", id: message.id, versions: versions, client: name, restoreID: restoreID,
                relaunch: relaunch)
        case .acknowledge(let sequence):
            body = OutgoingAck(type: "ack", id: message.id, seq: sequence)
        case .subscribe(let filter, let all, let claims), .list(let filter, let all, let claims):
            body = OutgoingFilter(
                type: message.request.typeName, id: message.id, filter: filter == .all ? nil : filter,
                all: all ? true : nil, claims: claims ? true : nil)
        case .claim, .release:
            body = encodeClaimRequest(message.request, id: message.id)
        case .unsubscribe, .suspend, .resume, .status, .reloadManifest, .claims:
            body = OutgoingBare(type: message.request.typeName, id: message.id)
        case .history(let query):
            body = OutgoingHistory(
                type: "history", id: message.id, since: query.since, before: query.before,
                limit: query.limit == HistoryQuery.defaultLimit ? nil : query.limit,
                filter: query.filter == .all ? nil : query.filter)
        case .simulateConnect(let accessory):
            body = OutgoingSimulate(
                type: "simulate", id: message.id, action: "connect", accessory: accessory, connectionID: nil)
        case .simulateDisconnect(let connectionID):
            body = OutgoingSimulate(
                type: "simulate", id: message.id, action: "disconnect", accessory: nil, connectionID: connectionID)
        }
        return line(body)
    }
}

/// A client line that could not be decoded: the error to report and the request id when it was readable.
public struct ClientDecodingFailure: Error, Sendable, Hashable {
    /// The request id, when the line was an object with a readable `id`.
    public var id: RequestID?
    /// The error to send back.
    public var error: ProtocolError
}
