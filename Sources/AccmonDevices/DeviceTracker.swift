import AccmonProtocol

/// Follows udev records over time and turns them into source reports, robust to real-world event order.
///
/// Pure. Duplicate adds and `change`/`bind` become updates (the registry keeps the connection); `unbind` is
/// ignored (the device is still there); a remove of a device not tracked is ignored; the remove of a parent
/// removes every accessory below it, even when the children's own removes never come; a Bluetooth HID accessory
/// lives while at least one of its event nodes does.
public struct DeviceTracker: Sendable {
    /// Accessories reported as attached, by key.
    private var attached: [String: Accessory] = [:]
    /// For Bluetooth HID accessories: their event nodes by event syspath, by key.
    private var hidNodes: [String: [String: String]] = [:]

    /// Creates an empty tracker.
    public init() {}

    /// The keys reported as attached now.
    public var attachedKeys: Set<String> { Set(attached.keys) }

    /// Applies one record; returns the reports to deliver and, for a device that is not an accessory, the
    /// classification that says why.
    public mutating func apply(_ record: DeviceRecord) -> (events: [SourceEvent], skipped: Classification?) {
        switch record.action {
        case "remove":
            return (remove(record.syspath), nil)
        case "unbind":
            return ([], nil)
        default:
            let classification = DeviceClassifier.classify(record)
            switch classification {
            case .ignored, .rejected:
                return ([], classification)
            case .accessory(let key, let accessory):
                attached[key] = accessory
                return ([.attached(key: key, accessory)], nil)
            case .bluetoothHIDNode(let key, let node, var accessory):
                hidNodes[key, default: [:]][record.syspath] = node
                accessory.deviceNodes = hidNodes[key, default: [:]].values.sorted()
                attached[key] = accessory
                return ([.attached(key: key, accessory)], nil)
            }
        }
    }

    /// Rebuilds state from a fresh enumeration (after the monitor was lost): returns the net changes.
    public mutating func reconcile(with records: [DeviceRecord]) -> [SourceEvent] {
        var fresh = DeviceTracker()
        var events: [SourceEvent] = []
        for record in records { events += fresh.apply(record).events }
        let gone = attached.keys.filter { fresh.attached[$0] == nil }.sorted()
        self = fresh
        return gone.map { .detached(key: $0) } + events
    }

    private mutating func remove(_ syspath: String) -> [SourceEvent] {
        var events: [SourceEvent] = []
        // Event nodes of Bluetooth HID accessories at or under the removed path.
        for (key, nodes) in hidNodes {
            let remaining = nodes.filter { !Self.isAt($0.key, orUnder: syspath) }
            guard remaining.count != nodes.count else { continue }
            if remaining.isEmpty {
                hidNodes[key] = nil
            } else {
                hidNodes[key] = remaining
                if var accessory = attached[key], !Self.isAt(key, orUnder: syspath) {
                    accessory.deviceNodes = remaining.values.sorted()
                    attached[key] = accessory
                    events.append(.attached(key: key, accessory))
                }
            }
        }
        // Accessories at or under the removed path, and HID accessories left without a node.
        // Only the keys that go are sorted (in key order, as before): not every attached key on every remove.
        var gone = attached.compactMap { key, accessory in
            Self.isAt(key, orUnder: syspath) || (accessory.kind == .bluetoothHID && hidNodes[key] == nil) ? key : nil
        }
        if gone.count > 1 { gone.sort() }
        for key in gone {
            attached[key] = nil
            hidNodes[key] = nil
            events.append(.detached(key: key))
        }
        return events
    }

    /// Whether `path` is `root` or under it (`root/...`), compared byte for byte as the kernel compares paths.
    /// On contiguous bytes: a remove checks every attached key, and `hasPrefix` on a joined `root + "/"` cost
    /// several times as much.
    static func isAt(_ path: String, orUnder root: String) -> Bool {
        var (path, root) = (path, root)  // withUTF8 may make a lazy string contiguous: on copies
        return path.withUTF8 { path in
            root.withUTF8 { root in
                path.count >= root.count && (0..<root.count).allSatisfy { path[$0] == root[$0] }
                    && (path.count == root.count || path[root.count] == UInt8(ascii: "/"))
            }
        }
    }
}
