import AccmonProtocol
import AccmonSystemd

/// The options of `Manager.Subscribe(a{sv})`, checked; pure. The filter's parts are the protocol's `subscribe`
/// filter (docs/PROTOCOL.md), `restore-id` its `hello`'s restore id.
struct BusSubscribeOptions: Sendable, Hashable {
    var filter = AccessoryFilter.all
    var restoreID: String?
    /// The name `accmon status` shows for the subscriber.
    var clientName: String?
    /// Hold the events while the subscriber's login session is not in front (logind).
    var suspendWhileInactive = false

    /// Every option, with its type, for the error that names an unknown one.
    static let known: [(name: String, signature: String)] = [
        ("kind", "s"), ("vendor-id", "s"), ("product-id", "s"), ("protocol", "s"), ("restore-id", "s"),
        ("client-name", "s"), ("suspend-while-inactive", "b"),
    ]

    init() {}

    /// Reads the options of an `a{sv}`.
    /// - Throws: ``BusError/Name/invalidOption`` naming the option and what is wrong with it.
    init(_ value: BusValue) throws(BusError) {
        for (key, option) in try BusOptionEntries.checked(value, method: "Subscribe", known: Self.known) {
            if case .boolean(let flag) = option {
                suspendWhileInactive = flag
                continue
            }
            try take(key, option.text ?? "")
        }
    }

    private mutating func take(_ key: String, _ text: String) throws(BusError) {
        switch key {
        case "kind":
            guard let kind = AccessoryKind(rawValue: text) else {
                let kinds = AccessoryKind.allCases.map(\.rawValue).joined(separator: ", ")
                throw BusError(.invalidOption, "Subscribe: options: kind: '\(text)' is none of \(kinds)")
            }
            filter.kind = kind
        case "vendor-id", "product-id":
            guard (1...4).contains(text.utf8.count), text.utf8.allSatisfy(\.isHexDigit) else {
                throw BusError(.invalidOption, "Subscribe: options: \(key): '\(text)' is not 1 to 4 hex digits")
            }
            if key == "vendor-id" { filter.vendorID = text } else { filter.productID = text }
        case "protocol":
            guard !text.isEmpty else { throw BusError(.invalidOption, "Subscribe: options: protocol: empty") }
            filter.protocolString = text
        case "restore-id":
            guard !text.isEmpty else { throw BusError(.invalidOption, "Subscribe: options: restore-id: empty") }
            guard text.utf8.count <= DaemonLimits.restoreIDBytes else {
                throw BusError(
                    .invalidOption,
                    "Subscribe: options: restore-id: \(text.utf8.count) bytes, longer than \(DaemonLimits.restoreIDBytes)")
            }
            restoreID = text
        default:
            clientName = String(text.prefix(128))
        }
    }

    /// The filter as the subscription object's `Filter` property shows it.
    static func properties(of filter: AccessoryFilter) -> BusValue {
        var entries: [(String, BusValue)] = []
        if let kind = filter.kind { entries.append(("kind", .string(kind.rawValue))) }
        if let vendorID = filter.vendorID { entries.append(("vendor-id", .string(vendorID))) }
        if let productID = filter.productID { entries.append(("product-id", .string(productID))) }
        if let protocolString = filter.protocolString { entries.append(("protocol", .string(protocolString))) }
        return .vardict(entries)
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}
