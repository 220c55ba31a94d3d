public import AccmonProtocol
import FoundationEssentials

/// A host as `accmon list --broker --json` and the first line of `accmon watch --broker --json` print it.
public struct FleetHostOutput: Encodable, Sendable {
    public var host: String
    public var state: String
    /// Without its counts (``HostStatus/withoutCounts``).
    public var status: HostStatus?
    /// Printed with their `claim` field when ``claims`` has theirs.
    public var accessories: [Accessory]
    /// The claims on the accessories, by connection id.
    public var claims: [UInt64: FleetClaim]

    public init(
        host: String, state: String, status: HostStatus?, accessories: [Accessory], claims: [UInt64: FleetClaim] = [:]
    ) {
        self.host = host
        self.state = state
        self.status = status
        self.accessories = accessories
        self.claims = claims
    }

    /// The claim on one of its accessories, when it is claimed.
    public func claim(of accessory: Accessory) -> FleetClaim? { claims[accessory.connectionID.rawValue] }

    private enum Keys: String, CodingKey { case accessories, host, state, status }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(accessories.map { FleetAccessory($0, claim: claim(of: $0)) }, forKey: .accessories)
        try container.encode(host, forKey: .host)
        try container.encode(state, forKey: .state)
        try container.encodeIfPresent(status, forKey: .status)
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
            EventLineWriter.list(host.accessories, into: &out) { accessory, out in
                if let claim = host.claim(of: accessory) {
                    // Few accessories are claimed: those through JSONEncoder, which puts `claim` in key order.
                    claimed(FleetAccessory(accessory, claim: claim)).withUnsafeBufferPointer { out.append($0) }
                } else {
                    EventLineWriter.accessory(accessory, into: &out)
                }
            }
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

/// A claimed accessory object as JSONEncoder writes it with sorted keys and unescaped slashes.
private func claimed(_ accessory: FleetAccessory) -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    do {
        return Array(try encoder.encode(accessory))
    } catch {
        preconditionFailure("claimed accessory encoding failed: \(error)")  // strings and numbers: cannot fail
    }
}
