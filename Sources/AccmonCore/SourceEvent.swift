/// What an event source reports about one device, named by a source key (a sysfs path for udev).
public enum SourceEvent: Sendable, Hashable {
    /// The device is present and ready with these properties (new, or updated).
    case attached(key: String, Accessory)
    /// The device is gone.
    case detached(key: String)
}
