import AccmonProtocol

/// A key of a fixed set, numbered from 0 in declaration order (``UdevProperty``, ``SysfsAttribute``): ``Slots`` keeps
/// one value per key.
public protocol SlotKey: CaseIterable, Hashable, Sendable, RawRepresentable where RawValue == Int {
    /// Where the value comes from, such as the udev property `ID_VENDOR_ID` or the sysfs attribute `idVendor`.
    var name: String { get }
}

/// A value per ``SlotKey`` of a device: a slot each, so that setting and reading one costs no hashing (this is on
/// every udev event's path).
public struct Slots<Key: SlotKey>: Sendable, Hashable, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    /// One slot per key; empty until a value is set.
    @usableFromInline var values: [String?] = []

    /// No values.
    @inlinable public init() {}

    /// The given values. (Inlinable, as the subscript: `[:]` is on every udev event's path, and an unspecialized
    /// generic call across modules is several times dearer.)
    @inlinable public init(dictionaryLiteral elements: (Key, String)...) {
        for (key, value) in elements { self[key] = value }
    }

    /// The value of `key`, `nil` when the device does not have it.
    @inlinable public subscript(key: Key) -> String? {
        get { values.isEmpty ? nil : values[key.rawValue] }
        set {
            if values.isEmpty {
                guard newValue != nil else { return }
                values = Array(repeating: nil, count: Key.allCases.count)
            }
            values[key.rawValue] = newValue
        }
    }

    /// The keys that have a value, as `[NAME: "value", ...]`.
    public var description: String {
        let named = Key.allCases.compactMap { key in self[key].map { "\(key.name): \($0.debugDescription)" } }
        return "[\(named.isEmpty ? ":" : named.joined(separator: ", "))]"
    }

    public static func == (left: Slots, right: Slots) -> Bool {
        Key.allCases.allSatisfy { left[$0] == right[$0] }
    }

    public func hash(into hasher: inout Hasher) {
        for key in Key.allCases { hasher.combine(self[key]) }
    }
}
