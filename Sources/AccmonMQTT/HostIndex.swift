import FoundationEssentials

/// The host index: one retained topic per host, `<prefix>/$hosts/<bucket>/<host>`, which each bridge publishes once
/// per connection, so that a reader can list a fleet in windows of buckets when the hosts' statuses are more than the
/// broker delivers in one read (docs/MQTT.md §5). Pure: no I/O.
///
/// The bucket is fixed by the host's topic level alone, the same for every bridge and reader: FNV-1a (32 bits) of the
/// level's UTF-8 bytes, its low 8 bits, written as two lowercase hex digits (`00` to `ff`). The payload is
/// `{"host":"<name>"}`; readers take the host from the topic and ignore the payload's fields.
public enum HostIndex {
    /// The number of buckets.
    public static let bucketCount = 256

    /// The bucket of a host, from its topic level.
    public static func bucket(ofLevel level: String) -> Int {
        var hash: UInt32 = 2_166_136_261
        for byte in level.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return Int(hash & 0xFF)
    }

    /// A bucket as its topic level: two lowercase hex digits.
    public static func bucketLevel(_ bucket: Int) -> String {
        let digits = String(bucket, radix: 16)
        return digits.count == 1 ? "0" + digits : digits
    }

    /// The payload of a host's entry.
    public static func payload(host: String) -> [UInt8] {
        struct Entry: Encodable { var host: String }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Array(try encoder.encode(Entry(host: host)))
        } catch {
            preconditionFailure("host index entry encoding failed: \(error)")  // one string: cannot fail
        }
    }
}
