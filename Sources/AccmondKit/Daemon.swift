import AccmonDevices
import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys
import AccmonSystemd
import Glibc

/// How accmond runs.
public struct DaemonConfiguration: Sendable {
    /// Where the listening socket is bound.
    public var socketPath: String
    /// Whether `accmon simulate` may drive the simulated source.
    public var simulate: Bool
    /// Whether the daemon watches udev (the executable adds a ``UdevEventSource`` when set).
    public var watchesUdev: Bool
    /// The manifest's main file.
    public var manifestPath: String
    /// The manifest's drop-in directory (`*.json`, read in name order after the main file).
    public var manifestDirectory: String
    /// Where the state that survives restarts is kept (`state.json`); `nil` keeps nothing.
    public var stateDirectory: String?
    /// How long a preserved session (a client with a restore id that went away) is kept.
    public var restoreRetentionSeconds: Double
    /// How many history entries accmond keeps (in memory, and in `history.jsonl` in the state directory); 0 keeps
    /// none.
    public var historyEntries = 10_000
    /// The most ``historyEntries`` may be.
    public static let maximumHistoryEntries = 1_000_000
    /// What one client, one user and all clients together may hold.
    public var limits: DaemonLimits
    /// Whether SIGTERM and SIGINT stop the daemon (off when a test runs it in process).
    public var handlesSignals: Bool
    /// Where the daemon logs.
    public var logger: Logger
    /// Where the manifest's user and group names are looked up (the system's account databases unless a test
    /// gives its own). Asked on the manifest loader's thread, never on the broker loop.
    public var accounts: any AccountDirectory = SystemAccounts()
    /// A listening socket passed by the service manager (socket activation): served instead of binding
    /// ``socketPath``, and never unlinked. The executable takes it from ``ServiceManager/takePassedDescriptors()``.
    public var inheritedListener: InheritedListener? = nil
    /// Whether the daemon tells the service manager `READY=1`, `STATUS=`, `WATCHDOG=1` and `STOPPING=1`
    /// (sd_notify(3); a no-op without `NOTIFY_SOCKET`). See ``ServiceNotifier``.
    public var notifiesServiceManager = true
    /// Called by the broker loop at the end of every turn, on the loop's thread: keep it short.
    public var onLoopTurn: (@Sendable (LoopTurn) -> Void)? = nil
    /// Whether accmond asks systemd to start and stop the units of the manifest's `launch` entries and of
    /// registered relaunches (through the system bus, on a thread of its own; see docs/MANIFEST.md).
    public var launchesUnits = true
    /// How a claim's device nodes are enforced: simulated accessories' nodes below a directory by accmond itself, real
    /// devices' nodes by the helper `accmon-nodes`. Without one, simulated nodes are left alone and claims on real
    /// devices are refused (``NodeRouting``).
    public var nodeRouting = NodeRouting()
    /// How long a claim kept with a preserved session (`preserve`) waits for its client to come back.
    public var claimGraceSeconds: Double = 30
    /// After a restart, how long claim holders and waiters have to come back with their tokens.
    public var claimReclaimSeconds: Double = 30
    /// Whether accmond serves `org.accmon.Accmon1` on the system bus (`--dbus`; docs/DBUS.md), from a thread of its
    /// own. The bus's address is libsystemd's: `DBUS_SYSTEM_BUS_ADDRESS`, else `/run/dbus/system_bus_socket`.
    public var servesBus = false

    /// Creates a configuration.
    public init(
        socketPath: String = WireFormat.defaultSocketPath, simulate: Bool = false, watchesUdev: Bool = true,
        limits: DaemonLimits = DaemonLimits(), manifestPath: String = Manifest.defaultPath,
        manifestDirectory: String = Manifest.defaultDropInDirectory, stateDirectory: String? = "/var/lib/accmon",
        restoreRetentionSeconds: Double = 86_400, handlesSignals: Bool = true,
        logger: Logger = Logger(label: "accmond")
    ) {
        self.socketPath = socketPath
        self.simulate = simulate
        self.watchesUdev = watchesUdev
        self.limits = limits
        self.manifestPath = manifestPath
        self.manifestDirectory = manifestDirectory
        self.stateDirectory = stateDirectory
        self.restoreRetentionSeconds = restoreRetentionSeconds
        self.handlesSignals = handlesSignals
        self.logger = logger
    }
}

/// An error that stops accmond from starting.
public struct DaemonError: Error, CustomStringConvertible {
    public var description: String
}

/// The accmond daemon: binds the socket, starts the event sources and runs the broker loop.
public final class Daemon: Sendable {
    private let configuration: DaemonConfiguration
    private let sources: [any EventSource]
    private let simulated: SimulatedEventSource?
    private let stopFlag = StopFlag()
    private let sink: EventSink

    /// Creates a daemon with the given sources. With `configuration.simulate`, a ``SimulatedEventSource`` is added
    /// (or the one among `sources` is used) for `accmon simulate`.
    public init(configuration: DaemonConfiguration, sources: [any EventSource] = []) throws {
        self.configuration = configuration
        var sources = sources
        var simulated = sources.lazy.compactMap { $0 as? SimulatedEventSource }.first
        if configuration.simulate && simulated == nil {
            let source = SimulatedEventSource()
            sources.append(source)
            simulated = source
        }
        self.sources = sources
        self.simulated = configuration.simulate ? simulated : nil
        do {
            sink = try EventSink()
        } catch {
            throw DaemonError(description: "accmond: eventfd: \(error)")
        }
    }

    /// Runs until SIGTERM or SIGINT (when ``DaemonConfiguration/handlesSignals``) or ``requestStop()``.
    ///
    /// Start-up goes in steps that never wait on anything outside accmond (files are opened without blocking and
    /// checked to be regular files; the manifest's names are resolved on the loader's thread afterwards): bind the
    /// socket; open and check the state directory, read the state and the manifest (``BrokerLoop``); enumerate each
    /// source. The stop signals are blocked, for the loop's signalfd, so between steps a pending SIGTERM or SIGINT is
    /// looked for: start-up then ends there, and `run` returns as after a stop. On a stop or a failure during
    /// start-up the sources started are stopped and the socket file it bound is removed (never one the service
    /// manager passed).
    ///
    /// - Important: blocks the calling thread, which becomes the broker loop: call it from `main` or a thread of
    ///   its own, never from the cooperative pool.
    public func run() throws {
        var startUp = StartUp(configuration: configuration, stopFlag: stopFlag)
        let broker: BrokerLoop
        let notifier: ServiceNotifier?
        do {
            guard let started = try start(&startUp) else {
                startUp.abandon()
                configuration.logger.notice(.stopped, "stopped during start-up")
                return
            }
            (broker, notifier) = started
        } catch {
            startUp.abandon()
            throw error
        }
        broker.run()
        notifier?.finish()
        for source in sources { source.stop() }
        configuration.logger.notice(.stopped, "stopped")
    }

    /// Start-up, step by step; `nil` when a stop was asked for between two steps.
    private func start(_ startUp: inout StartUp) throws -> (BrokerLoop, ServiceNotifier?)? {
        let logger = configuration.logger
        let notifier = try makeServiceNotifier()
        notifier?.starting("Starting: listening, enumerating devices")
        // The state directory first: one that is unsafe or cannot be written refuses the start before anything is bound.
        if startUp.stopAsked(before: "opening the state directory") { return nil }
        let store: StateStore?
        do {
            store = try configuration.stateDirectory.map { try StateStore(directory: $0, logger: logger) }
        } catch {
            throw DaemonError(description: "accmond: state store: \(error)")
        }
        if startUp.stopAsked(before: "listening") { return nil }
        let listener: FileDescriptor
        var brokerConfiguration = configuration
        do {
            if let inherited = configuration.inheritedListener {
                listener = inherited.descriptor
                brokerConfiguration.socketPath = inherited.path
            } else {
                listener = try UnixSocket.listen(path: configuration.socketPath)
                startUp.boundSocketPath = configuration.socketPath
            }
            try listener.setNonBlocking()
        } catch {
            throw DaemonError(description: "accmond: cannot listen: \(error)")
        }
        brokerConfiguration.onLoopTurn = { [onLoopTurn = configuration.onLoopTurn] turn in
            onLoopTurn?(turn)
            notifier?.loopTurned(turn)
        }
        if startUp.stopAsked(before: "reading the state and the manifest") { return nil }
        let broker = try BrokerLoop(
            configuration: brokerConfiguration, store: store, listener: listener, sink: sink, simulated: simulated,
            loopDrivenSources: sources.compactMap { $0 as? any LoopDrivenEventSource }, stopFlag: stopFlag)
        for source in sources {
            if startUp.stopAsked(before: "starting the event source \(source.name)") { return nil }
            do {
                try source.start(delivering: sink)
                startUp.startedSources.append(source)
            } catch {
                throw DaemonError(description: "accmond: event source \(source.name): \(error)")
            }
        }
        if startUp.stopAsked(before: "serving") { return nil }
        logger.notice(
            .started,
            "listening on \(brokerConfiguration.socketPath)"
                + (configuration.inheritedListener == nil ? "" : " (socket from the service manager)"),
            ["sources": sources.map(\.name).joined(separator: ","), "version": AccmonVersion.current])
        do {
            try notifier?.start()
        } catch {
            throw DaemonError(description: "accmond: sd_notify: helper thread: \(error)")
        }
        // One turn at once, even when no source reported anything: its end sends READY=1.
        sink.wakeup.signal()
        return (broker, notifier)
    }

    /// The notifier for the service manager, with the watchdog interval systemd asked for; `nil` when off.
    private func makeServiceNotifier() throws -> ServiceNotifier? {
        // Without NOTIFY_SOCKET nothing could be sent (the watchdog pings through it too): no helper thread to wake.
        guard configuration.notifiesServiceManager, environmentValue("NOTIFY_SOCKET") != nil else { return nil }
        let watchdog: UInt64?
        do {
            watchdog = try ServiceManager.watchdogIntervalMicroseconds()
        } catch {
            throw DaemonError(description: "accmond: sd_watchdog_enabled: WATCHDOG_USEC: \(error)")
        }
        if let watchdog {
            configuration.logger.info(
                .serviceManager, "watchdog: the service manager expects a ping every \(watchdog / 1000) ms")
        }
        do {
            return try ServiceNotifier(logger: configuration.logger, watchdogMicroseconds: watchdog) { [sink] in
                sink.wakeup.signal()
            }
        } catch {
            throw DaemonError(description: "accmond: sd_notify: eventfd: \(error)")
        }
    }

    /// Asks ``run()`` to stop as it does on SIGTERM. Safe from any thread.
    public func requestStop() {
        stopFlag.raise()
        sink.wakeup.signal()
    }
}

/// What start-up did so far, to undo when it ends early, and the look for a stop between its steps.
private struct StartUp {
    let configuration: DaemonConfiguration
    let stopFlag: StopFlag
    /// The socket file start-up bound (not one the service manager passed).
    var boundSocketPath: String?
    var startedSources: [any EventSource] = []

    /// Whether a stop was asked for before `step`: ``Daemon/requestStop()``, or a SIGTERM or SIGINT pending (they
    /// are blocked until the loop's signalfd reads them). Logs it.
    func stopAsked(before step: String) -> Bool {
        if stopFlag.isRaised {
            configuration.logger.notice(.stopping, "asked to stop during start-up, before \(step); stopping")
            return true
        }
        guard configuration.handlesSignals, let signal = SignalDescriptor.firstPending(among: [SIGTERM, SIGINT])
        else { return false }
        configuration.logger.notice(
            .stopping,
            "received \(signal == SIGTERM ? "SIGTERM" : "SIGINT") during start-up, before \(step); stopping")
        return true
    }

    /// Stops the sources started and removes the socket file bound.
    func abandon() {
        for source in startedSources.reversed() { source.stop() }
        if let boundSocketPath { UnixSocket.removeSocketFile(at: boundSocketPath) }
    }
}
