import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc

/// A broker with the users and the ACL of docs/MQTT.md (as written there: mosquitto's of §12.2, or ejabberd's of
/// §10), and hosts whose manifests let the MQTT users `ci` and `qa` claim (not `mallory`), each with its bridge logged
/// in as the host's user.
final class ClaimFleet: @unchecked Sendable {
    /// The ACL of docs/MQTT.md §12.2, read from that page: the tests use it as written.
    static let acl: String = {
        let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../../docs/MQTT.md")
        let text = (try? String(contentsOf: page.standardizedFileURL, encoding: .utf8)) ?? ""
        guard let start = text.range(of: "```\n# /etc/mosquitto/acl (fleet claims)\n"),
            let end = text.range(of: "```", range: start.upperBound..<text.endIndex)
        else { return "# docs/MQTT.md: the fleet claims ACL is missing\n" }
        return String(text[start.upperBound..<end.lowerBound])
    }()
    static let users = ["lab-1", "lab-2", "ci", "qa", "mallory"]

    static func manifest(bridgeUser: String = "root") -> String {
        """
        {"version": 1, "bridges": {"users": ["\(bridgeUser)"]},
         "accessories": [{"name": "bench", "match": {"id": "*:*"},
                          "claim": {"remote": ["ci", "qa"], "returnSeconds": 1}}]}
        """
    }

    let broker: any TestBroker
    let directory: TemporaryDirectory
    var hosts: [BridgedHost] = []

    init(
        hosts names: [String] = ["lab-1"], lease: (renew: Int, expiry: Int)? = nil, persistence: Bool = false,
        on kind: BrokerKind = .mosquitto
    )
        async throws
    {
        directory = try TemporaryDirectory()
        let users = Self.users + names.filter { !Self.users.contains($0) }
        switch kind {
        case .mosquitto:
            broker = try await Self.mosquitto(users: users, hosts: names, persistence: persistence, in: directory)
        case .ejabberd:
            broker = try await Ejabberd.start(Ejabberd.Options(users: users, bridges: names))
        }
        for name in names {
            var settings = [
                "username": json(name), "passwordFile": json(try passwordFile(name)),
            ]
            if let lease {
                settings["renewSeconds"] = String(lease.renew)
                settings["leaseSeconds"] = String(lease.expiry)
            }
            hosts.append(
                try await BridgedHost.start(
                    name: name, broker: broker.url, settings: settings, manifest: Self.manifest()))
        }
    }

    /// mosquitto with the password file and the ACL of docs/MQTT.md §12.2.
    private static func mosquitto(
        users: [String], hosts names: [String], persistence: Bool, in directory: TemporaryDirectory
    ) async throws -> Mosquitto {
        let passwords = directory.file("passwords")
        for (index, user) in users.enumerated() {
            let made = try await run(
                URL(fileURLWithPath: "/usr/bin/mosquitto_passwd"),
                (index == 0 ? ["-c"] : []) + ["-b", passwords, user, "pw-\(user)"], in: directory)
            guard made.termination == .exited(0) else { throw Binaries.LocateError(description: "\(made)") }
        }
        let acl = directory.file("acl")
        // Hosts beyond the page's two get their blocks as the page's (a `user` block applies up to the next).
        let more = names.filter { !Self.users.contains($0) }.map {
            "user \($0)\ntopic readwrite accmon/\($0)/#\ntopic read accmon/$census/+\ntopic write accmon/$readers/+/census\n"
        }
        try (more.joined() + Self.acl).write(toFile: acl, atomically: true, encoding: .utf8)
        return try await Mosquitto.start(
            Mosquitto.Options(persistence: persistence, passwordFile: passwords, aclFile: acl))
    }

    /// A password file for `user` (mode 0600).
    func passwordFile(_ user: String) throws -> String {
        let path = directory.file("\(user).password")
        // Written once: a watcher started a moment ago may be reading it, and a rewrite truncates it first.
        guard !FileManager.default.fileExists(atPath: path) else { return path }
        try "pw-\(user)\n".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    /// A claimer logged in as `user` (its password is `pw-<user>`, or `password`).
    func claimer(_ user: String, password: String? = nil) throws -> RemoteClaimClient {
        try RemoteClaimClient(
            settings: settings(user, password: password), topics: FleetTopics(prefix: "accmon"),
            clientID: "claimer-\(user)-\(UInt32.random(in: 0...UInt32.max))")
    }

    /// The broker settings of `user`.
    func settings(_ user: String, password: String? = nil) throws -> BrokerSettings {
        BrokerSettings(
            address: try BrokerAddress.parse(broker.url).get(), username: user, password: password ?? "pw-\(user)",
            keepAliveSeconds: 5)
    }

    /// The online hosts' accessories as `user` reads them, as `accmon claim --broker` does (the fleet view's reader),
    /// by host name; empty when the read fails.
    func onlineAccessories(as user: String) -> [String: [Accessory]] {
        guard let settings = try? settings(user),
            let read = try? FleetReader.stateNow(settings: settings, topics: FleetTopics(prefix: "accmon"))
        else { return [:] }
        var hosts: [String: [Accessory]] = [:]
        for host in read.state.sortedHosts where host.stateName == "online" {
            hosts[host.name] = host.sortedAccessories
        }
        return hosts
    }

    /// The options of `accmon` that log in as `user`.
    func login(_ user: String) throws -> [String] {
        ["--broker", broker.url, "--username", user, "--password-file", try passwordFile(user)]
    }

    /// Waits until every host's accessories with these serial numbers are on the broker (what `accmon claim
    /// --broker` reads to find a host).
    func waitUntilPublished(_ serials: [String]) async -> Bool {
        await eventuallyHolds {
            let found = Set(onlineAccessories(as: "qa").values.flatMap { $0 }.map(\.serialNumber))
            return Set(serials).isSubset(of: found)
        }
    }

    /// Waits until the host's claim gateway takes requests (its log says so).
    func waitUntilTakingRequests() async -> Bool {
        for host in hosts {
            guard await waitFor("taking requests", in: { host.bridgeLog }) else { return false }
        }
        return true
    }
}
