/// A change in the set of connected accessories, as the broker publishes it.
public struct AccessoryEvent: Sendable, Hashable {
    /// Whether the accessory came or went.
    public enum Change: String, Sendable, Hashable, Codable {
        case connect
        case disconnect
    }

    /// Whether the accessory came or went.
    public var change: Change
    /// The daemon-wide sequence number, strictly increasing across all events.
    public var sequence: UInt64
    /// The accessory, with the connection that began or ended.
    public var accessory: Accessory
    /// For an accessory the manifest rejected (shown to admins who asked for every accessory only): why.
    public var rejection: String?

    /// Creates an event.
    public init(_ change: Change, sequence: UInt64, accessory: Accessory, rejection: String? = nil) {
        self.change = change
        self.sequence = sequence
        self.accessory = accessory
        self.rejection = rejection
    }
}
