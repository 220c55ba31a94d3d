import AccmonJSON
public import AccmonMQTT
import AccmonSys
import Glibc

/// The bridge's configuration, `/etc/accmon/mqtt.json` (docs/MQTT.md): JSON with comments, as the manifest.
///
/// ```json5
/// {
///   "broker": "mqtts://broker.example.net:8883",   // required; or a list of one broker's nodes or listeners:
///                                                 // ["mqtts://node-a:8883", "mqtts://node-b:8883"]
///   "ca": "/etc/accmon/mqtt-ca.pem",              // mqtts:// only; default: the system's trust store
///   "certificate": "/etc/accmon/mqtt-client.pem", // with "key": a client certificate
///   "key": "/etc/accmon/mqtt-client.key",
///   "username": "lab-1",
///   "passwordFile": "/etc/accmon/mqtt.password",  // never world-readable
///   "host": "lab-1",                              // default: this machine's host name
///   "prefix": "accmon",                           // default accmon
///   "socket": "/run/accmon/accmon.sock",          // default: $ACCMON_SOCKET, else this
///   "keepAlive": 30,                              // seconds
///   "statusLeaseSeconds": 20,                     // the online status's lease, renewed every half of it
///   "stateDirectory": "/var/lib/accmon-mqtt",     // default: $STATE_DIRECTORY (systemd), else none
/// }
/// ```
public struct BridgeConfiguration: Sendable, Hashable {
    /// Where the service reads it.
    public static let defaultPath = "/etc/accmon/mqtt.json"
    /// The restore id the bridge registers with accmond, by default.
    public static let defaultRestoreID = "accmon-mqtt"

    /// How to reach the broker; its password is read from ``passwordFile`` by ``load(path:defaultHost:)``.
    public var broker: BrokerSettings
    public var passwordFile: String?
    /// The host name the bridge publishes under.
    public var host: String
    public var topics: FleetTopics
    /// accmond's socket; `nil`: `$ACCMON_SOCKET`, else the default path.
    public var socketPath: String?
    public var restoreID: String
    /// The file that holds the machine's id (`/etc/machine-id`), published in the status.
    public var machineIDFile: String
    /// A remote claim's lease: it ends this long after its claimer's last renewal (docs/MQTT.md §12.4).
    public var leaseSeconds: Double = 30
    /// How often claimers are told to renew.
    public var renewSeconds: Double = 10
    /// The lease of the host's online status: its MQTT 5 message expiry, renewed every half of it (docs/MQTT.md §3).
    public var statusLeaseSeconds = BridgeConfiguration.defaultStatusLeaseSeconds

    /// Where the bridge keeps what must survive its restarts (the topics it published, docs/MQTT.md §4); `nil`:
    /// nowhere. By default `$STATE_DIRECTORY` (systemd's `StateDirectory=`).
    public var stateDirectory: String? = environmentValue("STATE_DIRECTORY").flatMap { $0.isEmpty ? nil : $0 }

    /// The status's lease by default: a host whose bridge or broker is gone without a will shows `stale` within it.
    public static let defaultStatusLeaseSeconds = 20

    static let keys = [
        "broker", "ca", "certificate", "key", "username", "passwordFile", "host", "prefix", "socket", "restoreID",
        "keepAlive", "machineIDFile", "leaseSeconds", "renewSeconds", "statusLeaseSeconds", "stateDirectory",
    ]
    static let refusals = [
        "password":
            "a password does not go in this file, which every user may read: put it in a file only root and the "
            + "service may read, and name that file in \"passwordFile\""
    ]

    /// Reads and checks the file at `path`, then the files it names: the password file (not world-readable) and the
    /// TLS files (readable).
    public static func load(path: String, defaultHost: String) -> Result<BridgeConfiguration, ConfigurationProblems> {
        let contents: [UInt8]
        do {
            guard let bytes = try AtomicFile.read(path) else {
                return .failure(problem(path, "cannot read the file: \(Errno.noSuchFileOrDirectory)"))
            }
            contents = bytes
        } catch {
            return .failure(problem(path, "cannot read the file: \(error.reason)"))
        }
        var parsed: Parsed
        switch parse(contents, path: path, defaultHost: defaultHost) {
        case .success(let value): parsed = value
        case .failure(let problems): return .failure(problems)
        }
        var reader = ConfigurationReader(file: path)
        for (key, file, position) in parsed.tlsFiles where access(file, R_OK) != 0 {
            reader.report(position, "\(key): cannot read '\(file)': \(Errno.current)")
        }
        if let passwordFile = parsed.configuration.passwordFile, let position = parsed.passwordFilePosition {
            do {
                parsed.configuration.broker.password = try PasswordFile.read(passwordFile)
            } catch {
                reader.report(position, "passwordFile: '\(passwordFile)': \(error.reason)")
            }
        }
        return reader.problems.isEmpty
            ? .success(parsed.configuration) : .failure(ConfigurationProblems(reader.problems))
    }

    /// The configuration `contents` (the file at `path`) describes, checked but without reading the files it names.
    public static func parse(
        _ contents: [UInt8], path: String, defaultHost: String
    ) -> Result<Parsed, ConfigurationProblems> {
        var reader = ConfigurationReader(file: path)
        let root: PositionedJSON
        switch PositionedJSON.parse(contents) {
        case .success(let value): root = value
        case .failure(let error):
            return .failure(
                ConfigurationProblems([ConfigurationProblem(file: path, position: error.position, reason: error.reason)]
                ))
        }
        guard let members = reader.members(of: root, known: keys, refusals: refusals) else {
            return .failure(ConfigurationProblems(reader.problems))
        }
        var addresses: [BrokerAddress]?
        if let member = members["broker"] {
            addresses = reader.brokerAddresses(member)
        } else {
            reader.report(root.position, "broker: missing: name the broker, such as \"broker\": \"mqtt://localhost\"")
        }
        var tlsFiles: [(key: String, path: String, position: SourcePosition)] = []
        for key in ["ca", "certificate", "key"] {
            guard let member = members[key], let file = reader.string(member) else { continue }
            if let address = addresses?.first, !address.usesTLS {
                reader.report(member.value.position, "\(key): TLS files need an mqtts:// broker (broker is \(address))")
            }
            tlsFiles.append((key, file, member.value.position))
        }
        if (members["certificate"] == nil) != (members["key"] == nil) {
            let given = members["certificate"] ?? members["key"]!
            reader.report(
                given.keyPosition, "\(given.key): a client certificate needs both \"certificate\" and \"key\"")
        }
        let username = reader.string(members["username"])
        let passwordFile = reader.string(members["passwordFile"])
        if let member = members["passwordFile"], members["username"] == nil {
            reader.report(member.keyPosition, "passwordFile: a password needs a \"username\"")
        }
        var host = defaultHost
        if let member = members["host"], let text = reader.string(member) {
            if let problem = hostProblem(text) { reader.report(member.value.position, "host: \(problem)") }
            host = text
        }
        var prefix = FleetTopics.defaultPrefix
        if let member = members["prefix"], let text = reader.string(member) {
            if let problem = FleetTopics.problem(withPrefix: text) {
                reader.report(member.value.position, "prefix: '\(shown(text))': \(problem)")
            }
            prefix = text
        }
        let socket = reader.string(members["socket"])
        if let socket, let member = members["socket"], socket.utf8.count > UnixSocket.maximumPathLength {
            reader.report(member.value.position, "socket: longer than \(UnixSocket.maximumPathLength) bytes")
        }
        let keepAlive = reader.integer(members["keepAlive"], in: 5...3600) ?? 30
        let restoreID = reader.string(members["restoreID"]) ?? defaultRestoreID
        let machineIDFile = reader.string(members["machineIDFile"]) ?? "/etc/machine-id"
        let leaseSeconds = reader.integer(members["leaseSeconds"], in: 2...86_400) ?? 30
        let renewSeconds = reader.integer(members["renewSeconds"], in: 1...86_400) ?? min(10, max(1, leaseSeconds / 3))
        if let member = members["renewSeconds"], renewSeconds >= leaseSeconds {
            reader.report(
                member.value.position,
                "renewSeconds: \(renewSeconds) is not below leaseSeconds (\(leaseSeconds)): a lease would end between renewals")
        }
        let statusLease = reader.integer(members["statusLeaseSeconds"], in: 2...3600) ?? defaultStatusLeaseSeconds
        let stateDirectory = reader.string(members["stateDirectory"])
        guard reader.problems.isEmpty, let addresses else { return .failure(ConfigurationProblems(reader.problems)) }
        let broker = BrokerSettings(
            addresses: addresses, caFile: tlsFiles.first { $0.key == "ca" }?.path,
            certificateFile: tlsFiles.first { $0.key == "certificate" }?.path,
            keyFile: tlsFiles.first { $0.key == "key" }?.path, username: username, keepAliveSeconds: keepAlive)
        var configuration = BridgeConfiguration(
            broker: broker, passwordFile: passwordFile, host: host, topics: FleetTopics(prefix: prefix),
            socketPath: socket, restoreID: restoreID, machineIDFile: machineIDFile, leaseSeconds: Double(leaseSeconds),
            renewSeconds: Double(renewSeconds), statusLeaseSeconds: statusLease)
        if let stateDirectory { configuration.stateDirectory = stateDirectory }
        return .success(
            Parsed(
                configuration: configuration, passwordFilePosition: members["passwordFile"]?.value.position,
                tlsFiles: tlsFiles))
    }

    /// A parsed configuration with the positions of the files it names, for the checks that read them.
    public struct Parsed: Sendable {
        public var configuration: BridgeConfiguration
        var passwordFilePosition: SourcePosition?
        var tlsFiles: [(key: String, path: String, position: SourcePosition)]
    }

    /// Why `host` cannot be a host name, or `nil`: a host name is 1 to 255 bytes without control characters (it
    /// becomes a topic level, percent-encoded where MQTT needs it).
    static func hostProblem(_ host: String) -> String? {
        if host.utf8.count > 255 { return "longer than 255 bytes" }
        if host.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "holds a control character"
        }
        return nil
    }

    private static func problem(_ path: String, _ reason: String) -> ConfigurationProblems {
        ConfigurationProblems([ConfigurationProblem(file: path, position: .start, reason: reason)])
    }
}
