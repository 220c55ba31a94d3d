import FoundationEssentials

extension ProtocolCodec {
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

    static func reason(_ info: DecodingError.Context) -> String {
        if info.codingPath.last?.stringValue == "kind" {
            return "unknown kind (expected usb, serial or bluetooth-hid)"
        }
        // With a coding path, corrupt data comes from our own types' checks, which say what they expected.
        return info.debugDescription.isEmpty ? "invalid value" : info.debugDescription
    }

    static func jsonTypeName(_ type: Any.Type) -> String {
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

extension CodingKey {
    var displayName: String { intValue.map { "[\($0)]" } ?? stringValue }
}

extension DecodingError.Context {
    var path: String {
        codingPath.isEmpty ? "line" : codingPath.map(\.displayName).joined(separator: ".")
    }
}
