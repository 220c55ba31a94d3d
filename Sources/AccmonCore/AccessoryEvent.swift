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

    /// Creates an event.
    public init(_ change: Change, sequence: UInt64, accessory: Accessory) {
        self.change = change
        self.sequence = sequence
        self.accessory = accessory
    }
}
