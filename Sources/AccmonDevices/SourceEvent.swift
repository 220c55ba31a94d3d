import AccmonProtocol

/// What an event source reports about one device, named by a source key (a sysfs path for udev).
public enum SourceEvent: Sendable, Hashable {
    /// The device is present and ready with these properties (new, or updated).
    case attached(key: String, Accessory)
    /// The device is gone.
    case detached(key: String)
    /// Every device whose key starts with `keyPrefix` is among `keys`: the others are gone. A source sends it after
    /// its start-up enumeration, so that accessories remembered from before a daemon restart that left meanwhile
    /// are disconnected.
    case inventory(keyPrefix: String, keys: Set<String>)
}
