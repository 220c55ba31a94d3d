import AccmonDevices
import AccmonProtocol
import AccmonSys
import Synchronization

/// Where event sources deliver reports: a thread-safe inbox that wakes the broker loop.
public final class EventSink: Sendable {
    private let mailbox: Mailbox<SourceEvent>
    /// The loop's wake-up, shared by every mailbox of the loop.
    var wakeup: WakeupEvent { mailbox.wakeup }

    init() throws(Errno) { mailbox = Mailbox(wakeup: try WakeupEvent()) }

    /// Queues `events` for the broker. Safe from any thread.
    public func deliver(_ events: [SourceEvent]) { mailbox.post(events) }

    /// The queued events, oldest first.
    func take() -> [SourceEvent] { mailbox.take() }
}

/// A producer of device reports: udev, the simulated source, a test's scripted source.
///
/// The broker calls ``start(delivering:)`` once before serving clients and ``stop()`` once at shutdown.
public protocol EventSource: AnyObject, Sendable {
    /// A short name for logs, such as `udev` or `simulated`.
    var name: String { get }
    /// Starts reporting to `sink`, from any thread. Devices present at start are reported first.
    func start(delivering sink: EventSink) throws
    /// Stops reporting.
    func stop()
}

/// A source that does its work on the broker loop's thread instead of a thread of its own, which saves a thread
/// wake-up per event.
///
/// The loop watches ``readinessDescriptor`` and calls ``takeEvents()`` when it is readable. ``start(delivering:)``
/// (called just before the loop starts, on the thread that becomes the loop), ``takeEvents()`` and ``stop()``
/// (called after the loop ends) all run on that one thread, so the source's objects never change threads.
public protocol LoopDrivenEventSource: EventSource {
    /// Readable while the source has work for ``takeEvents()``.
    var readinessDescriptor: FileDescriptor { get }
    /// Does the pending work and returns the reports, in order. Must not block.
    func takeEvents() -> [SourceEvent]
}

/// The source of `--simulate`: its devices are plugged and unplugged by `simulate` requests (`accmon simulate`).
///
/// Simulated accessories stand for hardware, which does not go away when the daemon restarts: the ones the saved
/// state remembers are adopted at start (``adopt(keys:)``) and stay connected, with their connection ids.
public final class SimulatedEventSource: EventSource {
    public let name = "simulated"
    /// The prefix of this source's keys.
    static let keyPrefix = "simulated/"
    private let keys = Mutex<(next: UInt64, adopted: Set<String>)>((1, []))

    /// Creates a source with no devices.
    public init() {}

    /// Takes the simulated devices the saved state remembers as present: the next keys are numbered after them.
    func adopt(keys adopted: some Sequence<String>) {
        keys.withLock { keys in
            for key in adopted where key.hasPrefix(Self.keyPrefix) {
                keys.adopted.insert(key)
                if let number = UInt64(key.dropFirst(Self.keyPrefix.count)), number >= keys.next {
                    keys.next = number + 1
                }
            }
        }
    }

    /// Reports the adopted devices as present: any other simulated device remembered is gone.
    public func start(delivering sink: EventSink) throws {
        sink.deliver([.inventory(keyPrefix: Self.keyPrefix, keys: keys.withLock { $0.adopted })])
    }

    public func stop() {}

    /// Plugs in `accessory` under a new source key: the report for the broker to apply at once. Only `simulate`
    /// requests drive this source, on the broker loop's thread, so the report needs no hand-over (and no wake-up)
    /// through the sink.
    public func connect(_ accessory: Accessory) -> SourceEvent {
        let key = keys.withLock { keys in
            defer { keys.next += 1 }
            return Self.keyPrefix + String(keys.next)
        }
        return .attached(key: key, accessory)
    }

    /// Unplugs the device under `key`: the report for the broker to apply at once.
    public func disconnect(key: String) -> SourceEvent {
        .detached(key: key)
    }
}
