/// The publications that make a host's retained accessory topics equal to the truth. Pure: no I/O.
enum RetainedReconciliation {
    /// One retained publication; an empty payload deletes the retained message.
    struct Publication: Sendable, Hashable {
        var topic: String
        var payload: [UInt8]
    }

    /// What to publish so that `retained` (the topics read back from the broker, with their payloads) becomes
    /// `desired` (the topic and payload of every connected accessory): a deletion for each retained topic that is not
    /// desired, then the payload of each desired topic whose retained payload differs or is missing. Topics already
    /// right are left alone. Each group is in topic order.
    static func publications(desired: [String: [UInt8]], retained: [String: [UInt8]]) -> [Publication] {
        let deletions = retained.keys.filter { desired[$0] == nil && !(retained[$0]?.isEmpty ?? true) }.sorted()
            .map { Publication(topic: $0, payload: []) }
        let settings = desired.keys.filter { retained[$0] != desired[$0] }.sorted()
            .map { Publication(topic: $0, payload: desired[$0]!) }
        return deletions + settings
    }
}
