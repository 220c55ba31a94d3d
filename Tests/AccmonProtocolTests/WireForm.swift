import AccmonTestSupport

@testable import AccmonProtocol

/// Writes a client message by hand in a random one of the forms JSON allows and the reader must read: members in any
/// order, spacing between tokens, characters escaped or not, optional fields absent, `null` or explicit, and unknown
/// members holding any JSON value.
enum WireForm {
    indirect enum Value {
        case null
        case boolean(Bool)
        /// A number, as written.
        case number(String)
        case string(String)
        /// A string written without escapes, as the reader requires of keys, request types, actions and kinds.
        case plainString(String)
        case array([Value])
        case object([(String, Value)])
    }

    static func line(of message: ClientMessage, using random: inout SplitMix64) -> [UInt8] {
        var out = ""
        space(into: &out, using: &random)
        write(value(of: message, using: &random), into: &out, using: &random)
        space(into: &out, using: &random)
        return Array(out.utf8)
    }

    // MARK: Values

    static func value(of message: ClientMessage, using random: inout SplitMix64) -> Value {
        var members: [(String, Value)] = [("type", .plainString(message.request.typeName))]
        func optional(_ key: String, _ value: Value?, default isDefault: Bool = false) {
            if let value, !isDefault || Bool.random(using: &random) {
                members.append((key, value))
            } else if Bool.random(using: &random) {
                members.append((key, .null))
            }
        }
        switch message.id {
        case .number(let number): members.append(("id", .number(String(number))))
        case .string(let string): members.append(("id", .string(string)))
        case nil: optional("id", nil)
        }
        switch message.request {
        case .hello(let versions, let clientName, let restoreID, let relaunch):
            members.append(("versions", .array(versions.map { .number(String($0)) })))
            optional("client", .string(clientName), default: clientName.isEmpty)
            optional("restoreID", restoreID.map(Value.string))
            optional("relaunch", relaunch.map(Value.string))
        case .subscribe(let filter, let includeRejected, let claims), .list(let filter, let includeRejected, let claims):
            optional("filter", value(of: filter, using: &random), default: filter == .all)
            optional("all", .boolean(includeRejected), default: !includeRejected)
            optional("claims", .boolean(claims), default: !claims)
        case .acknowledge(let sequence):
            members.append(("seq", .number(String(sequence))))
        case .simulateConnect(let accessory):
            members.append(("action", .plainString("connect")))
            members.append(("accessory", value(of: accessory, using: &random)))
        case .simulateDisconnect(let connectionID):
            members.append(("action", .plainString("disconnect")))
            members.append(("connectionID", .number(String(connectionID.rawValue))))
        case .claim(let claim):
            switch claim.target {
            case .connections(let connections):
                members.append(("connections", .array(connections.map { .number(String($0.rawValue)) })))
            case .matching(let filter, let serial, let count):
                optional("filter", value(of: filter, using: &random), default: filter == .all && serial != nil)
                optional("serial", serial.map(Value.string))
                optional("count", .number(String(count)), default: count == 1 && (filter != .all || serial != nil))
                if filter == .all && serial == nil && !members.contains(where: { $0.0 == "filter" }) {
                    members.append(("filter", .object([])))
                }
            case .resume(let token): members.append(("token", .string(token)))
            }
            optional("wait", .boolean(claim.wait), default: !claim.wait)
            optional("reason", .string(claim.reason), default: claim.reason.isEmpty)
            optional("maxSeconds", claim.maxSeconds.map { .number(String($0)) })
            optional("preserve", .boolean(claim.preserve), default: !claim.preserve)
            optional("remoteUser", claim.remoteUser.map(Value.string))
        case .release(let release):
            switch release.target {
            case .claim(let claimID): members.append(("claimID", .string(claimID)))
            case .connection(let connection): members.append(("connectionID", .number(String(connection.rawValue))))
            case .accessory(let accessoryID): members.append(("accessoryID", .string(accessoryID)))
            }
            optional("force", .boolean(release.force), default: !release.force)
            optional("reason", .string(release.reason), default: release.reason.isEmpty)
            optional("remoteUser", release.remoteUser.map(Value.string))
        case .history(let query):
            optional("since", query.since.map { .number(String($0)) })
            optional(
                "limit", .number(String(query.limit)), default: query.limit == HistoryQuery.defaultLimit)
            optional("filter", value(of: query.filter, using: &random), default: query.filter == .all)
        case .unsubscribe, .suspend, .resume, .status, .reloadManifest, .claims:
            break
        }
        return .object(withUnknownMembers(members, using: &random))
    }

    static func value(of filter: AccessoryFilter, using random: inout SplitMix64) -> Value {
        var members: [(String, Value)] = []
        for (key, part) in [
            ("kind", filter.kind.map { Value.plainString($0.rawValue) }),
            ("vendorID", filter.vendorID.map(Value.string)), ("productID", filter.productID.map(Value.string)),
            ("protocol", filter.protocolString.map(Value.string)),
        ] {
            if let part {
                members.append((key, part))
            } else if Bool.random(using: &random) {
                members.append((key, .null))
            }
        }
        return .object(members)  // a filter has no unknown members
    }

    static func value(of accessory: Accessory, using random: inout SplitMix64) -> Value {
        var members: [(String, Value)] = [("kind", .plainString(accessory.kind.rawValue))]
        func optional(_ key: String, _ value: Value, isDefault: Bool) {
            if !isDefault || Bool.random(using: &random) {
                members.append((key, value))
            } else if Bool.random(using: &random) {
                members.append((key, .null))
            }
        }
        // A derived id may be left out, as clients do; any other is sent.
        optional(
            "accessoryID", .string(accessory.accessoryID),
            isDefault: accessory.accessoryID == accessory.derivedAccessoryID)
        optional(
            "connectionID", .number(String(accessory.connectionID.rawValue)),
            isDefault: accessory.connectionID == ConnectionID(0))
        for (key, text) in [
            ("name", accessory.name), ("manufacturer", accessory.manufacturer), ("modelNumber", accessory.modelNumber),
            ("serialNumber", accessory.serialNumber), ("firmwareRevision", accessory.firmwareRevision),
            ("hardwareRevision", accessory.hardwareRevision), ("vendorID", accessory.vendorID),
            ("productID", accessory.productID), ("sysfsPath", accessory.sysfsPath), ("portPath", accessory.portPath),
            ("interfaceNumber", accessory.interfaceNumber), ("descriptorsSHA256", accessory.descriptorsSHA256),
        ] {
            optional(key, .string(text), isDefault: text.isEmpty)
        }
        for (key, texts) in [("protocolStrings", accessory.protocolStrings), ("deviceNodes", accessory.deviceNodes)] {
            optional(key, .array(texts.map(Value.string)), isDefault: texts.isEmpty)
        }
        return .object(withUnknownMembers(members, using: &random))
    }

    /// Names for members no request reads, none of them a known key.
    static let unknownKeys = ["x", "extra", "futureField", "", "Type", "ID", "vendorid", "a b", "_", "\u{7F}"]

    /// `members` with up to two unknown members added.
    static func withUnknownMembers(_ members: [(String, Value)], using random: inout SplitMix64) -> [(String, Value)] {
        let unknown = unknownKeys.shuffled(using: &random).prefix(Int(random.next(below: 3)))
        return members + unknown.map { ($0, anyValue(depth: 0, using: &random)) }
    }

    /// Any JSON value, nested at most three deep.
    static func anyValue(depth: Int, using random: inout SplitMix64) -> Value {
        switch random.next(below: depth < 3 ? 7 : 5) {
        case 0: return .null
        case 1: return .boolean(Bool.random(using: &random))
        case 2:
            let numbers = [
                "0", "-0", "7", "-12", "3.25", "-0.5", "1e10", "2E-3", "-0.0e+5", "123456789012345678901234567890",
            ]
            return .number(numbers.randomElement(using: &random)!)
        case 3, 4: return .string(Fixtures.randomRequestText(using: &random))
        case 5:
            return .array((0..<random.next(below: 4)).map { _ in anyValue(depth: depth + 1, using: &random) })
        default:
            let keys = unknownKeys.shuffled(using: &random).prefix(Int(random.next(below: 4)))
            return .object(keys.map { ($0, anyValue(depth: depth + 1, using: &random)) })
        }
    }

    // MARK: Text

    static func write(_ value: Value, into out: inout String, using random: inout SplitMix64) {
        switch value {
        case .null: out += "null"
        case .boolean(let value): out += value ? "true" : "false"
        case .number(let text): out += text
        case .string(let text): string(text, into: &out, using: &random)
        case .plainString(let text): string(text, into: &out, using: &random, escapingAtRandom: false)
        case .array(let elements):
            out += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { separator(",", into: &out, using: &random) }
                space(into: &out, using: &random)
                write(element, into: &out, using: &random)
                space(into: &out, using: &random)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, (key, value)) in members.shuffled(using: &random).enumerated() {
                if index > 0 { separator(",", into: &out, using: &random) }
                space(into: &out, using: &random)
                string(key, into: &out, using: &random, escapingAtRandom: false)
                separator(":", into: &out, using: &random)
                write(value, into: &out, using: &random)
                space(into: &out, using: &random)
            }
            out += "}"
        }
    }

    static func separator(_ token: String, into out: inout String, using random: inout SplitMix64) {
        space(into: &out, using: &random)
        out += token
        space(into: &out, using: &random)
    }

    /// Nothing, most of the time, or some JSON whitespace.
    static func space(into out: inout String, using random: inout SplitMix64) {
        out += ["", "", "", "", " ", "\t", "\r", "\n", "  ", " \r\n "].randomElement(using: &random)!
    }

    /// A JSON string: characters that must be escaped are, with a short escape or `\u`; others, when
    /// `escapingAtRandom`, sometimes are too (`\/`, `\u` with either case of hex digits, surrogate pairs).
    static func string(
        _ text: String, into out: inout String, using random: inout SplitMix64, escapingAtRandom: Bool = true
    ) {
        out += "\""
        for scalar in text.unicodeScalars {
            let short: String? =
                switch scalar {
                case "\"": #"\""#
                case "\\": #"\\"#
                case "\u{8}": #"\b"#
                case "\u{C}": #"\f"#
                case "\n": #"\n"#
                case "\r": #"\r"#
                case "\t": #"\t"#
                case "/": #"\/"#
                default: nil
                }
            let mustEscape = scalar.value < 0x20 || scalar == "\"" || scalar == "\\"
            if !mustEscape && (!escapingAtRandom || random.next(below: 4) != 0) {
                out.unicodeScalars.append(scalar)
            } else if let short, Bool.random(using: &random) {
                out += short
            } else {
                let uppercase = Bool.random(using: &random)
                for unit in String(scalar).utf16 {
                    let hex = String(unit, radix: 16, uppercase: uppercase)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                }
            }
        }
        out += "\""
    }
}
