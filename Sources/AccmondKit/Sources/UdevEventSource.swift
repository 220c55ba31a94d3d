import AccmonDevices
import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys
import AccmonUdev
import Synchronization

/// The real event source: udev's monitor on the `udev` netlink group plus a coldplug enumeration.
///
/// libudev opens the monitor and enumerates; the monitor's datagrams are read and parsed here
/// (``UdevMonitorMessage``), and libudev is asked only for what a message does not carry (a serial port's USB device,
/// an input node's HID device).
///
/// It runs on the broker loop's thread (``LoopDrivenEventSource``): the loop watches an epoll descriptor of the
/// source's own, which holds the monitor's socket and a retry timer, and calls ``takeEvents()`` when it is readable.
/// So every libudev object lives on that one thread, from creation to unref, and an event costs no thread hand-off
/// between the monitor and the clients. The monitor is opened before the coldplug enumeration, and both feed one
/// ``DeviceTracker``, so a device that arrives during coldplug is announced once and one that leaves is not left
/// behind. When the monitor fails (`ENOBUFS`: events were lost), it is reopened and a fresh enumeration is reconciled
/// with what was reported; when reopening fails, it is retried every second.
public final class UdevEventSource: LoopDrivenEventSource {
    public let name = "udev"
    /// Every key of this source is a sysfs path.
    static let keyPrefix = "/sys/"
    private static let reopenDelayMilliseconds = 1000
    private static let monitorToken: UInt64 = 0
    private static let timerToken: UInt64 = 1
    /// The most monitor events taken in one loop turn. A backlog (a burst faster than accmond) is then published in
    /// slices, each written to the clients before the next is taken: a client that keeps up never sees its buffer
    /// fill in one turn and get suspended. The rest stays in the monitor's socket, which stays readable.
    static let eventsPerTurn = 64

    /// What the loop thread owns. The mutex is never contended (one thread uses it); it makes the source `Sendable`.
    private struct LoopState: ~Copyable {
        var readiness: Poller
        var reopenTimer: OneShotTimer
        var tracker = DeviceTracker()
        /// `nil` before ``start(delivering:)``, after ``stop()``, and while a reopen waits for its retry.
        var connection: (context: UdevContext, monitor: UdevMonitor)?
    }

    public let readinessDescriptor: FileDescriptor
    private let logger: Logger
    private let receiveBufferBytes: Int32 = 8 << 20
    private let state: Mutex<LoopState>

    /// Creates the source; nothing touches libudev until ``start(delivering:)``.
    public init(logger: Logger) throws(Errno) {
        self.logger = logger
        let readiness = try Poller(capacity: 2)
        let reopenTimer = try OneShotTimer()
        try readiness.add(reopenTimer.descriptor, interest: .readable, token: Self.timerToken)
        readinessDescriptor = readiness.descriptor
        state = Mutex(LoopState(readiness: readiness, reopenTimer: reopenTimer))
    }

    /// Opens the monitor and delivers the coldplug: the devices present, then the inventory of their keys.
    public func start(delivering sink: EventSink) throws {
        try state.withLock { (state) throws(UdevError) in
            let connection = try open(watchingWith: state.readiness)
            state.connection = connection
            sink.deliver(try coldplug(connection.context, into: &state.tracker, reconciling: false))
        }
    }

    /// Receives pending monitor events, at most ``eventsPerTurn`` (or retries a failed reopen), and returns the
    /// reports.
    public func takeEvents() -> [SourceEvent] {
        state.withLock { state in
            guard let (context, monitor) = state.connection else {
                return state.reopenTimer.takeExpiry() ? reopen(&state) : []
            }
            var events: [SourceEvent] = []
            do {
                for _ in 0..<Self.eventsPerTurn {
                    switch try monitor.receive() {
                    case .event(let message)?:
                        events += apply(UdevDevice.record(of: message, context: context), to: &state.tracker)
                    case .dropped(let reason)?:
                        logger.debug(.udevFailure, "udev: monitor message ignored: \(reason)")
                    case nil:
                        return events
                    }
                }
            } catch {
                logger.error(.udevFailure, "udev monitor lost: \(error); reopening it and re-enumerating")
                events += reopen(&state)
            }
            return events
        }
    }

    /// Frees every libudev object, on the loop's thread.
    public func stop() {
        state.withLock { state in
            if let monitor = state.connection?.monitor { state.readiness.remove(monitor.descriptor) }
            state.connection = nil
        }
    }

    /// Opens a fresh context and monitor, and watches the monitor's socket.
    private func open(
        watchingWith readiness: borrowing Poller
    ) throws(UdevError)
        -> (context: UdevContext, monitor: UdevMonitor)
    {
        let context = try UdevContext()
        let monitor = try UdevMonitor(
            context: context, subsystems: watchedSubsystems, receiveBufferBytes: receiveBufferBytes)
        do {
            try readiness.add(monitor.descriptor, interest: .readable, token: Self.monitorToken)
        } catch {
            throw UdevError(operation: "epoll_ctl", object: "udev", errno: error)
        }
        return (context, monitor)
    }

    /// Replaces a failed monitor and reconciles a fresh enumeration; on failure, arms the retry timer.
    private func reopen(_ state: inout LoopState) -> [SourceEvent] {
        if let monitor = state.connection?.monitor { state.readiness.remove(monitor.descriptor) }
        state.connection = nil
        do {
            let connection = try open(watchingWith: state.readiness)
            do {
                let events = try coldplug(connection.context, into: &state.tracker, reconciling: true)
                state.connection = connection
                return events
            } catch {
                state.readiness.remove(connection.monitor.descriptor)
                throw error
            }
        } catch {
            logger.error(
                .udevFailure,
                "udev: cannot reopen the monitor: \(error); retrying in \(Self.reopenDelayMilliseconds / 1000) s")
            state.reopenTimer.arm(milliseconds: Self.reopenDelayMilliseconds)
            return []
        }
    }

    /// Enumerates the devices present; returns the reports (all of them, or the net changes when reconciling).
    private func coldplug(
        _ context: UdevContext, into tracker: inout DeviceTracker, reconciling: Bool
    ) throws(UdevError)
        -> [SourceEvent]
    {
        var records: [DeviceRecord] = []
        for syspath in try enumerateDevices(context: context, subsystems: watchedSubsystems) {
            // A device that vanished since the scan has no object any more; its remove event follows on the monitor.
            guard let device = UdevDevice(context: context, syspath: syspath) else { continue }
            records.append(device.record(action: ""))
        }
        if reconciling { return tracker.reconcile(with: records) }
        var events: [SourceEvent] = []
        for record in records { events += apply(record, to: &tracker) }
        logger.info(.coldplug, "coldplug: \(records.count) devices, \(tracker.attachedKeys.count) accessories")
        return events + [.inventory(keyPrefix: Self.keyPrefix, keys: tracker.attachedKeys)]
    }

    private func apply(_ record: DeviceRecord, to tracker: inout DeviceTracker) -> [SourceEvent] {
        let (events, skipped) = tracker.apply(record)
        let action = record.action.isEmpty ? "present" : record.action
        switch skipped {
        case .ignored(let reason)?:
            logger.log(.trace, .deviceSkipped, "udev: \(action): \(record.syspath): not an accessory: \(reason)")
        case .rejected(let reason)?:
            logger.notice(.deviceSkipped, "udev: \(action): \(record.syspath): skipped: \(reason)")
        default:
            break
        }
        return events
    }
}
