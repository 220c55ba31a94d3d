/// Selects accessories by kind, vendor id, product id and protocol string; every part is optional.
///
/// An empty filter matches every accessory. A set part must match; vendor and product ids compare without regard
/// to case and leading zeros.
public struct AccessoryFilter: Codable, Sendable, Hashable {
    /// Only accessories of this kind.
    public var kind: AccessoryKind?
    /// Only accessories with this vendor id (hex, such as `"0403"`).
    public var vendorID: String?
    /// Only accessories with this product id (hex).
    public var productID: String?
    /// Only accessories that speak this protocol.
    public var protocolString: String?

    /// Creates a filter; `nil` parts match anything.
    public init(
        kind: AccessoryKind? = nil, vendorID: String? = nil, productID: String? = nil, protocolString: String? = nil
    ) {
        self.kind = kind
        self.vendorID = vendorID
        self.productID = productID
        self.protocolString = protocolString
    }

    enum CodingKeys: String, CodingKey {
        case kind
        case vendorID
        case productID
        case protocolString = "protocol"
    }

    /// Decodes a filter; an unknown key is an error, since a misspelt one would silently match everything.
    public init(from decoder: any Decoder) throws {
        let keys = try decoder.container(keyedBy: AnyCodingKey.self).allKeys
        if let unknown = keys.first(where: { CodingKeys(stringValue: $0.stringValue) == nil }) {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath + [unknown],
                    debugDescription: "unknown filter key (expected kind, vendorID, productID or protocol)"))
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        kind = try c.decodeIfPresent(AccessoryKind.self, forKey: .kind)
        vendorID = try c.decodeIfPresent(String.self, forKey: .vendorID)
        productID = try c.decodeIfPresent(String.self, forKey: .productID)
        protocolString = try c.decodeIfPresent(String.self, forKey: .protocolString)
    }

    /// A filter that matches every accessory.
    public static let all = AccessoryFilter()

    /// Whether `accessory` passes the filter. Inlinable: the daemon asks for every subscriber at every event, and an
    /// out-of-line call made its caller copy the filter (four strings retained and released) each time.
    @inlinable
    public func matches(_ accessory: Accessory) -> Bool {
        if let kind, accessory.kind != kind { return false }
        if let vendorID, !Self.sameHexID(vendorID, accessory.vendorID) { return false }
        if let productID, !Self.sameHexID(productID, accessory.productID) { return false }
        if let protocolString, !accessory.protocolStrings.contains(protocolString) { return false }
        return true
    }

    /// Checks that ids are hex numbers of at most four digits; returns the first problem found.
    public func validationProblem() -> String? {
        for (field, value) in [("vendorID", vendorID), ("productID", productID)] {
            if let value, !Self.isHexID(value) {
                return "filter.\(field): '\(value)' is not a hex id of 1 to 4 digits (such as \"0403\")"
            }
        }
        return nil
    }

    static func isHexID(_ text: String) -> Bool {
        (1...4).contains(text.utf8.count) && text.utf8.allSatisfy(Hex.isDigit)
    }

    /// A hex id as four lowercase digits (`"403"` → `"0403"`); empty stays empty.
    static func normalizedHexID(_ text: String) -> String {
        if isNormalizedHexID(text) { return text }  // the usual case
        guard let value = UInt32(text, radix: 16) else { return text }
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// Whether `text` is already four lowercase hex digits. Tested on its contiguous bytes: iterating the string's
    /// UTF-8 view is several times dearer, and every simulated accessory asks twice.
    static func isNormalizedHexID(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard utf8.count == 4 else { return false }
        return utf8.withContiguousStorageIfAvailable { $0.allSatisfy(Hex.isLowercaseDigit) }
            ?? utf8.allSatisfy(Hex.isLowercaseDigit)
    }

    @usableFromInline
    static func sameHexID(_ lhs: String, _ rhs: String) -> Bool {
        guard let l = UInt32(lhs, radix: 16), let r = UInt32(rhs, radix: 16) else { return false }
        return l == r
    }
}

/// A coding key for any string, to list an object's keys.
struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
