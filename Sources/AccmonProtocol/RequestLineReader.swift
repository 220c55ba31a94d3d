/// Reads a client request line in one pass, without JSONDecoder's generic machinery, when it can be sure of the
/// message: the fast path of ``ProtocolCodec/decodeClientMessage(_:)``, which every request goes through.
///
/// It reads strict JSON (RFC 8259): one object of any member order and spacing, strings with every escape (`\uXXXX`
/// and surrogate pairs included), and members it does not know holding any JSON value, which it skips as JSONDecoder
/// does. A message it returns is exactly what ``ProtocolCodec/decodeClientMessageWithJSONDecoder(_:)`` returns for the
/// line. It gives `nil`, and leaves the line to JSONDecoder, for anything else: invalid JSON or UTF-8; a known member
/// of a type other than the one its request reads, even in a request that does not read it (`null` is taken where the
/// request takes it as absent); a missing or invalid field; an unknown type; a duplicate key; a key with an escape or
/// a non-ASCII character; a request type, action or accessory kind written with an escape; a number other than a plain
/// integer that fits (`1.0`, `1e2` and `-0` among them); nesting deeper than ``maximumDepth``; more than
/// ``maximumOpenKeys`` keys in the objects open at once (each object's keys are kept until it ends, to find a
/// duplicate; a `simulate` request has 4, and at most 17 in its accessory). JSONDecoder then decodes the line or reports
/// the error.
enum RequestLineReader {
    /// The deepest nesting of objects and arrays read, the request object included; deeper lines are left to
    /// JSONDecoder.
    static let maximumDepth = 32
    /// The most keys kept at once, in the objects open at a position; a line with more is left to JSONDecoder.
    static let maximumOpenKeys = 32

    /// The message `line` (without its newline) holds, or `nil` when the line is left to JSONDecoder.
    static func message(_ line: UnsafeBufferPointer<UInt8>) -> ClientMessage? {
        // The keys on the stack: an array cost an allocation per request.
        withUnsafeTemporaryAllocation(of: PlainString.self, capacity: maximumOpenKeys) { keys in
            var cursor = RequestCursor(bytes: line, keys: keys)
            guard let message = cursor.message() else { return nil }
            cursor.skipWhitespace()
            return cursor.position == line.count ? message : nil
        }
    }
}

extension RequestCursor {
    // MARK: Requests

    /// The request object; `nil` when it is not one this reader is sure of.
    mutating func message() -> ClientMessage? {
        var type: PlainString?
        var id: RequestID?
        var versions: [Int]?
        var client: String?
        var restoreID: String?
        var relaunch: String?
        var filter: AccessoryFilter?
        var includeRejected: Bool?
        var claims: Bool?
        var sequence: UInt64?
        var action: PlainString?
        var accessory: Accessory?
        var connectionID: UInt64?
        let isObject = forEachMember { cursor, key in
            switch key {
            case "type": return cursor.read(&type) { $0.plainString() }
            case "id": return cursor.readNullable(&id) { $0.requestID() }
            case "versions": return cursor.read(&versions) { $0.integers() }
            case "client": return cursor.readNullable(&client) { $0.string() }
            case "restoreID": return cursor.readNullable(&restoreID) { $0.string() }
            case "relaunch": return cursor.readNullable(&relaunch) { $0.string() }
            case "filter": return cursor.readNullable(&filter) { $0.filter() }
            case "all": return cursor.readNullable(&includeRejected) { $0.boolean() }
            case "claims": return cursor.readNullable(&claims) { $0.boolean() }
            case "seq": return cursor.read(&sequence) { $0.unsignedInteger() }
            case "action": return cursor.read(&action) { $0.plainString() }
            case "accessory": return cursor.readNullable(&accessory) { $0.accessory() }
            case "connectionID": return cursor.readNullable(&connectionID) { $0.unsignedInteger() }
            default: return cursor.skipValue()
            }
        }
        guard isObject, let type else { return nil }
        func validFilter() -> AccessoryFilter? {
            let filter = filter ?? .all
            return filter.validationProblem() == nil ? filter : nil
        }
        // The type's bytes against each name, the frequent ones first.
        let request = { () -> ClientRequest? in
            switch type {
            case "simulate":
                switch action ?? .empty {
                case "connect":
                    guard var accessory else { return nil }
                    do {
                        try ProtocolCodec.normalizeSimulatedAccessory(&accessory)
                    } catch {
                        return nil  // an id that is not hex, which the JSONDecoder path reports
                    }
                    return .simulateConnect(accessory)
                case "disconnect":
                    guard let connectionID else { return nil }
                    return .simulateDisconnect(ConnectionID(connectionID))
                default: return nil
                }
            case "ack":
                guard let sequence else { return nil }
                return .acknowledge(sequence)
            case "hello":
                guard let versions else { return nil }
                return .hello(versions: versions, clientName: client ?? "", restoreID: restoreID, relaunch: relaunch)
            case "subscribe":
                guard let filter = validFilter() else { return nil }
                return .subscribe(filter, includeRejected: includeRejected ?? false, claims: claims ?? false)
            case "list":
                guard let filter = validFilter() else { return nil }
                return .list(filter, includeRejected: includeRejected ?? false, claims: claims ?? false)
            case "unsubscribe": return .unsubscribe
            case "suspend": return .suspend
            case "resume": return .resume
            case "reload": return .reloadManifest
            case "status": return .status
            default: return nil
            }
        }()
        guard let request else { return nil }
        return ClientMessage(id: id, request)
    }

    /// A `filter` object: every key known, `kind` a known kind.
    mutating func filter() -> AccessoryFilter? {
        var filter = AccessoryFilter()
        let isObject = forEachMember { cursor, key in
            switch key {
            case "kind": return cursor.readNullable(&filter.kind) { $0.plainString().flatMap(Self.kind(named:)) }
            case "vendorID": return cursor.readNullable(&filter.vendorID) { $0.string() }
            case "productID": return cursor.readNullable(&filter.productID) { $0.string() }
            case "protocol": return cursor.readNullable(&filter.protocolString) { $0.string() }
            default: return false  // an unknown key, an error
            }
        }
        return isObject ? filter : nil
    }

    /// An `accessory` object, as ``Accessory/init(from:)`` reads it: `kind` required, other fields absent or `null`
    /// are empty, unknown keys skipped. The fields are ``Accessory/Field``'s.
    mutating func accessory() -> Accessory? {
        var accessory = Accessory(kind: .usb, accessoryID: "")
        var hasKind = false
        var hasAccessoryID = false
        let isObject = forEachMember { cursor, key in
            guard let field = Accessory.Field.named(key.bytes) else {
                return cursor.skipValue()
            }
            if field == .kind {
                guard let kind = cursor.plainString().flatMap(Self.kind(named:)) else { return false }
                hasKind = accessory.set(.kind, to: .text(kind.rawValue))
                return true
            }
            if cursor.literal("null") { return true }
            let value: Accessory.FieldValue?
            switch field.shape {
            case .text: value = cursor.string().map(Accessory.FieldValue.text)
            case .texts: value = cursor.strings().map(Accessory.FieldValue.texts)
            case .number: value = cursor.unsignedInteger().map(Accessory.FieldValue.number)
            }
            guard let value else { return false }
            hasAccessoryID = hasAccessoryID || field == .accessoryID
            return accessory.set(field, to: value)
        }
        guard isObject, hasKind else { return nil }
        if !hasAccessoryID { accessory.accessoryID = accessory.derivedAccessoryID }
        return accessory
    }

    /// The kind `name` names.
    static func kind(named name: PlainString) -> AccessoryKind? {
        switch name {
        case "usb": .usb
        case "serial": .serial
        case "bluetooth-hid": .bluetoothHID
        default: nil
        }
    }

    /// A request id: a string, or an integer that fits in an `Int64`.
    mutating func requestID() -> RequestID? {
        if peek() == UInt8(ascii: "\"") { return string().map(RequestID.string) }
        return signedInteger().map(RequestID.number)
    }

    /// An array of integers that fit in an `Int`.
    mutating func integers() -> [Int]? {
        var values: [Int] = []
        let isArray = forEachElement { cursor in
            guard let value = cursor.signedInteger() else { return false }
            values.append(Int(value))
            return true
        }
        return isArray ? values : nil
    }

    /// An array of strings.
    mutating func strings() -> [String]? {
        var values: [String] = []
        let isArray = forEachElement { cursor in
            guard let value = cursor.string() else { return false }
            values.append(value)
            return true
        }
        return isArray ? values : nil
    }
}
