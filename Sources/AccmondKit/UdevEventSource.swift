import AccmonCore
import AccmonSys
import AccmonUdev
import Synchronization

/// The real event source: libudev's monitor on the `udev` netlink group plus a coldplug enumeration.
///
/// Every libudev object lives on the source's own thread, from creation to unref; only ``SourceEvent`` values
/// leave it. The monitor is opened before the enumeration, and both feed one ``DeviceTracker``, so a device that
/// arrives during coldplug is announced once and one that leaves is not left behind. When the monitor fails
/// (`ENOBUFS`: events were lost), it is reopened and a fresh enumeration is reconciled with what was reported.
public final class UdevEventSource: EventSource {
    public let name = "udev"
    /// Every key of this source is a sysfs path.
    static let keyPrefix = "/sys/"
    private let logger: Logger
    private let stopWakeup: WakeupEvent
    private let stopping = Atomic<Bool>(false)
    private let receiveBufferBytes: Int32 = 8 << 20

    /// Creates the source; nothing touches libudev until ``start(delivering:)``.
    public init(logger: Logger) throws {
        self.logger = logger
        stopWakeup = try WakeupEvent()
    }

    public func start(delivering sink: EventSink) throws {
        let started = Mutex<Result<Void, UdevError>?>(nil)
        let ready = try BlockingSignal()
        try startThread(name: "accmond-udev") { [self] in
            run(sink: sink) { result in
                started.withLock { $0 = result }
                ready.signal()
            }
        }
        ready.wait()
        if case .failure(let error) = started.withLock({ $0 }) { throw error }
    }

    public func stop() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        stopWakeup.signal()
    }

    /// The udev thread: open, coldplug, then follow events until stopped.
    private func run(sink: EventSink, reportStart: (Result<Void, UdevError>) -> Void) {
        var tracker = DeviceTracker()
        var session: (context: UdevContext, monitor: UdevMonitor)
        do {
            session = try open()
            sink.deliver(try coldplug(session.context, into: &tracker, reconciling: false))
            reportStart(.success(()))
        } catch {
            reportStart(.failure(error))
            return
        }
        while !stopping.load(ordering: .sequentiallyConsistent) {
            do {
                try follow(session.monitor, into: &tracker, sink: sink)
            } catch {
                logger.error("udev monitor lost: \(error); reopening it and re-enumerating")
                do {
                    session = try open()
                    sink.deliver(try coldplug(session.context, into: &tracker, reconciling: true))
                } catch {
                    logger.error("udev: cannot reopen the monitor: \(error); retrying in 1 s")
                    sleepUnlessStopped(milliseconds: 1000)
                }
            }
        }
    }

    private func open() throws(UdevError) -> (context: UdevContext, monitor: UdevMonitor) {
        let context = try UdevContext()
        let monitor = try UdevMonitor(
            context: context, subsystems: watchedSubsystems, receiveBufferBytes: receiveBufferBytes)
        return (context, monitor)
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
        logger.info("coldplug: \(records.count) devices, \(tracker.attachedKeys.count) accessories")
        return events + [.inventory(keyPrefix: Self.keyPrefix, keys: tracker.attachedKeys)]
    }

    /// Waits for monitor events and delivers them, until stopped or the monitor fails.
    private func follow(_ monitor: UdevMonitor, into tracker: inout DeviceTracker, sink: EventSink) throws(UdevError) {
        var poller = try Self.poller(watching: [monitor.descriptor, stopWakeup.descriptor])
        while !stopping.load(ordering: .sequentiallyConsistent) {
            do {
                _ = try poller.wait(timeoutMilliseconds: -1)
            } catch {
                throw UdevError(operation: "epoll_wait", object: "", errno: error)
            }
            var events: [SourceEvent] = []
            while let device = try monitor.receive() {
                events += apply(device.record(), to: &tracker)
            }
            if !events.isEmpty { sink.deliver(events) }
        }
    }

    private static func poller(watching descriptors: [FileDescriptor]) throws(UdevError) -> Poller {
        do throws(Errno) {
            let poller = try Poller(capacity: 4)
            for (token, descriptor) in descriptors.enumerated() {
                try poller.add(descriptor, interest: .readable, token: UInt64(token))
            }
            return poller
        } catch {
            throw UdevError(operation: "epoll", object: "", errno: error)
        }
    }

    private func apply(_ record: DeviceRecord, to tracker: inout DeviceTracker) -> [SourceEvent] {
        let (events, skipped) = tracker.apply(record)
        let action = record.action.isEmpty ? "present" : record.action
        switch skipped {
        case .ignored(let reason)?:
            logger.log(.trace, "udev: \(action): \(record.syspath): not an accessory: \(reason)")
        case .rejected(let reason)?:
            logger.notice("udev: \(action): \(record.syspath): skipped: \(reason)")
        default:
            break
        }
        return events
    }

    private func sleepUnlessStopped(milliseconds: Int32) {
        guard var poller = try? Poller(capacity: 1) else { return }  // try?: without a poller, do not wait
        try? poller.add(stopWakeup.descriptor, interest: .readable, token: 0)  // try?: a plain sleep is fine too
        _ = try? poller.wait(timeoutMilliseconds: milliseconds)  // try?: an interrupted wait just retries sooner
    }
}
