public import AccmonProtocol

/// A host as `accmon list --broker --json` and the first line of `accmon watch --broker --json` print it.
public struct FleetHostOutput: Encodable, Sendable {
    public var host: String
    public var state: String
    /// Without its counts (``HostStatus/withoutCounts``).
    public var status: HostStatus?
    public var accessories: [Accessory]

    public init(host: String, state: String, status: HostStatus?, accessories: [Accessory]) {
        self.host = host
        self.state = state
        self.status = status
        self.accessories = accessories
    }

    /// One line of JSON, `{"hosts":[…]` then `rest` (the members after `hosts` in key order, and the closing brace),
    /// then a newline: byte for byte what JSONEncoder writes with sorted keys and unescaped slashes, written directly
    /// (a fleet's line holds tens of thousands of accessories; the accessory objects as ``EventLineWriter`` writes
    /// them).
    public static func jsonLine(_ hosts: [FleetHostOutput], then rest: String) -> [UInt8] {
        var out = JSONOutput(capacity: 64 + hosts.reduce(0) { $0 + 64 + 600 * $1.accessories.count })
        out.append(utf8: #"{"hosts":["#)
        EventLineWriter.list(hosts, into: &out) { host, out in
            out.append(utf8: #"{"accessories":["#)
            EventLineWriter.list(host.accessories, into: &out) { EventLineWriter.accessory($0, into: &$1) }
            out.append(utf8: "],")
            EventLineWriter.member(#""host":"#, host.host, into: &out)
            EventLineWriter.member(#","state":"#, host.state, into: &out)
            if let status = host.status {
                out.append(utf8: #","status":"#)
                status.payload.withUnsafeBufferPointer { out.append($0) }
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        out.append(utf8: rest)
        out.append(UInt8(ascii: "\n"))
        return out.bytes()
    }
}
