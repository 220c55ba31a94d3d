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
    public init(kind: AccessoryKind? = nil, vendorID: String? = nil, productID: String? = nil, protocolString: String? = nil) {
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

    /// A filter that matches every accessory.
    public static let all = AccessoryFilter()

    /// Whether `accessory` passes the filter.
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
        (1...4).contains(text.utf8.count) && text.utf8.allSatisfy { $0.isHexDigit }
    }

    static func sameHexID(_ lhs: String, _ rhs: String) -> Bool {
        guard let l = UInt32(lhs, radix: 16), let r = UInt32(rhs, radix: 16) else { return false }
        return l == r
    }
}

extension UInt8 {
    var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}
