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
        let below = syspath + "/"
        // Event nodes of Bluetooth HID accessories at or under the removed path.
        for (key, nodes) in hidNodes {
            let remaining = nodes.filter { $0.key != syspath && !$0.key.hasPrefix(below) }
            guard remaining.count != nodes.count else { continue }
            if remaining.isEmpty {
                hidNodes[key] = nil
            } else {
                hidNodes[key] = remaining
                if var accessory = attached[key], key != syspath, !key.hasPrefix(below) {
                    accessory.deviceNodes = remaining.values.sorted()
                    attached[key] = accessory
                    events.append(.attached(key: key, accessory))
                }
            }
        }
        // Accessories at or under the removed path, and HID accessories left without a node.
        // Only the keys that go are sorted (in key order, as before): not every attached key on every remove.
        let gone = attached.compactMap { key, accessory in
            key == syspath || key.hasPrefix(below) || (accessory.kind == .bluetoothHID && hidNodes[key] == nil)
                ? key : nil
        }
        for key in gone.sorted() {
            attached[key] = nil
            hidNodes[key] = nil
            events.append(.detached(key: key))
        }
        return events
    }
}
