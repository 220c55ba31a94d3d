import AccmonMQTT
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// The MQTT 5 brokers the suites run against.
enum BrokerKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// mosquitto 2.0 (Debian 12), anonymous.
    case mosquitto
    /// One ejabberd 23.01 node (Debian 12) with the configuration of docs/MQTT.md §10: passwords and the ACL.
    case ejabberd

    var testDescription: String { rawValue }
}

/// A user name and its password, for a broker that asks for one.
struct Login: Sendable, Hashable {
    var user: String
    var password: String
}

/// A real broker a test started on a free local port, with its own configuration and directory; killed in `deinit`.
protocol TestBroker: AnyObject, Sendable {
    var kind: BrokerKind { get }
    var url: String { get }
    var port: Int { get }
    var directory: TemporaryDirectory { get }
    /// The broker's log so far.
    var log: String { get }
    /// The login of the tests' own clients (mosquitto_sub and _pub, the reader in this process), which may read and
    /// write every topic; `nil` for an anonymous broker.
    var testLogin: Login? { get }
    /// Kills the broker with SIGKILL: no goodbye to any client.
    func kill9()
    /// Starts the broker again on the same port and directory.
    func restart() async throws
    /// The bridge configuration's keys (as raw JSON values) that log host `name` in; empty for an anonymous broker.
    func bridgeSettings(host name: String) throws -> [String: String]
}

extension TestBroker {
    /// The login options of mosquitto_sub and mosquitto_pub for the tests' own client.
    var clientLogin: [String] { testLogin.map { ["-u", $0.user, "-P", $0.password] } ?? [] }

    /// The login options of `accmon list/watch --broker` for the tests' own client (its password in a file).
    func cliLogin() throws -> [String] {
        guard let testLogin else { return [] }
        let path = directory.file("\(testLogin.user).cli-password")
        if !FileManager.default.fileExists(atPath: path) {
            try (testLogin.password + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, 0o600)
        }
        return ["--username", testLogin.user, "--password-file", path]
    }

    /// The settings of the reader in this process, logged in as the tests' own client.
    func readerSettings() throws -> BrokerSettings {
        BrokerSettings(
            address: try BrokerAddress.parse(url).get(), username: testLogin?.user, password: testLogin?.password,
            keepAliveSeconds: 5)
    }
}

/// Starts a broker of `kind`. For ejabberd, `users` are registered (password `pw-<user>`), `bridges` may write under
/// their own names (the ACL's `bridges`), and `ejabberdListen` adds settings to its MQTT listener.
func startBroker(
    _ kind: BrokerKind, users: [String] = [], bridges: [String] = [],
    mosquitto: Mosquitto.Options = Mosquitto.Options(), ejabberdListen: [String] = []
) async throws -> any TestBroker {
    switch kind {
    case .mosquitto:
        return try await Mosquitto.start(mosquitto)
    case .ejabberd:
        return try await Ejabberd.start(
            Ejabberd.Options(users: users + bridges, bridges: bridges, listen: ejabberdListen))
    }
}

extension Mosquitto: TestBroker {
    var kind: BrokerKind { .mosquitto }
    var testLogin: Login? { nil }
    func bridgeSettings(host name: String) throws -> [String: String] { [:] }
}
