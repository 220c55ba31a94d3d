import AccmonMQTT
import AccmonTestSupport
import Foundation
import Glibc

/// A central mosquitto and site mosquittos bridged to it with the configuration of docs/MQTT.md §11.1 (read from that
/// page), each broker with the password file and the ACL of §12.2 (and, on the centre, a block per site), and hosts
/// on the sites whose manifests let the MQTT users `ci` and `qa` claim, each with its bridge logged in as the host.
final class BridgedSites: @unchecked Sendable {
    /// The site's bridge configuration of docs/MQTT.md §11.1, as written there.
    static let siteConfiguration: String = {
        let text = (try? String(contentsOf: Repository.file("docs/MQTT.md"), encoding: .utf8)) ?? ""
        guard let start = text.range(of: "```\n# /etc/mosquitto/conf.d/accmon-centre.conf (on each site's broker)\n"),
            let end = text.range(of: "```", range: start.upperBound..<text.endIndex)
        else { return "# docs/MQTT.md: the site's bridge configuration is missing\n" }
        return String(text[start.upperBound..<end.lowerBound])
    }()

    /// The queue every broker of the topology needs for a link's retained messages (docs/MQTT.md §11.1).
    static let queueSettings = ["max_queued_messages 100000"]

    let directory: TemporaryDirectory
    let centre: Mosquitto
    /// The site brokers, by site name.
    let sites: [String: Mosquitto]
    /// Each site's hosts (host name to site name).
    let siteOfHost: [String: String]
    /// The proxies between the sites in `proxied` and the centre: their links go through these.
    let links: [String: PausingProxy]
    var hosts: [BridgedHost] = []

    /// Starts the centre, a broker per site bridged to it (through a ``PausingProxy`` for the sites in `proxied`), and
    /// the hosts (`[site: [host]]`), with `settings` added to each host's bridge configuration.
    init(
        _ layout: [String: [String]], hostSettings settings: [String: String] = [:], proxied: Set<String> = []
    ) async throws {
        directory = try TemporaryDirectory()
        let hostNames = layout.values.flatMap { $0 }.sorted()
        var siteOfHost: [String: String] = [:]
        for (site, names) in layout { for name in names { siteOfHost[name] = site } }
        self.siteOfHost = siteOfHost
        let users = ClaimFleet.users + hostNames.filter { !ClaimFleet.users.contains($0) } + layout.keys.sorted()
        let passwords = directory.file("passwords")
        for (index, user) in users.enumerated() {
            let made = try await run(
                URL(fileURLWithPath: "/usr/bin/mosquitto_passwd"),
                (index == 0 ? ["-c"] : []) + ["-b", passwords, user, "pw-\(user)"], in: directory)
            guard made.termination == .exited(0) else { throw Binaries.LocateError(description: "\(made)") }
        }
        // Every broker: the hosts' blocks and §12.2's ACL; the centre also a block per site.
        let hostBlocks = hostNames.map { "user \($0)\ntopic readwrite accmon/\($0)/#\n" }.joined()
        let siteBlocks = layout.keys.sorted().map { "user \($0)\ntopic readwrite accmon/#\n" }.joined()
        let siteACL = directory.file("site.acl")
        let centreACL = directory.file("centre.acl")
        try (hostBlocks + ClaimFleet.acl).write(toFile: siteACL, atomically: true, encoding: .utf8)
        try (siteBlocks + hostBlocks + ClaimFleet.acl).write(toFile: centreACL, atomically: true, encoding: .utf8)
        centre = try await Mosquitto.start(
            Mosquitto.Options(passwordFile: passwords, aclFile: centreACL, settings: Self.queueSettings))
        var sites: [String: Mosquitto] = [:]
        var links: [String: PausingProxy] = [:]
        for site in layout.keys.sorted() {
            var port = centre.port
            if proxied.contains(site) {
                let proxy = try PausingProxy(to: centre.port)
                links[site] = proxy
                port = proxy.port
            }
            sites[site] = try await Mosquitto.start(
                Mosquitto.Options(
                    passwordFile: passwords, aclFile: siteACL,
                    settings: Self.queueSettings + (try Self.bridge(site: site, to: port))))
        }
        self.sites = sites
        self.links = links
        for name in hostNames {
            let site = siteOfHost[name]!
            hosts.append(
                try await BridgedHost.start(
                    name: name, broker: sites[site]!.url,
                    settings: [
                        "username": json(name), "passwordFile": json(try passwordFile(name)),
                    ].merging(settings) { _, new in new }, manifest: ClaimFleet.manifest()))
        }
    }

    /// The documented site configuration for `site`, bridged to the centre on `port`.
    static func bridge(site: String, to port: Int) throws -> [String] {
        var text = siteConfiguration
        for (old, new) in [
            ("address centre.example.net:1883\n", "address 127.0.0.1:\(port)\n"),
            ("remote_clientid site-a\n", "remote_clientid \(site)\n"),
            ("remote_username site-a\n", "remote_username \(site)\n"),
            ("remote_password the-site's-password\n", "remote_password pw-\(site)\n"),
        ] {
            guard text.contains(old) else {
                throw Binaries.LocateError(description: "docs/MQTT.md §11.1: no '\(old)' in the site's configuration")
            }
            text = text.replacingOccurrences(of: old, with: new)
        }
        return text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
    }

    /// A password file for `user` (mode 0600).
    func passwordFile(_ user: String) throws -> String {
        let path = directory.file("\(user).password")
        guard !FileManager.default.fileExists(atPath: path) else { return path }
        try "pw-\(user)\n".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    /// The host named `name`.
    func host(_ name: String) -> BridgedHost { hosts.first { $0.name == name }! }

    /// The hosts of `site`.
    func hosts(of site: String) -> [BridgedHost] { hosts.filter { siteOfHost[$0.name] == site } }

    /// The reader's settings for `broker`, logged in as `user`.
    func settings(_ broker: Mosquitto, as user: String = "qa") throws -> BrokerSettings {
        BrokerSettings(
            address: try BrokerAddress.parse(broker.url).get(), username: user, password: "pw-\(user)",
            keepAliveSeconds: 5)
    }

    /// The options of `accmon` that log in to `broker` as `user`.
    func login(_ broker: Mosquitto, as user: String) throws -> [String] {
        ["--broker", broker.url, "--username", user, "--password-file", try passwordFile(user)]
    }

    /// Waits until `broker`'s view equals the hosts' truths (hosts in `offline` shown offline); the last
    /// differences when it does not within `timeout`.
    func waitForFleet(
        on broker: Mosquitto, offline: Set<String> = [], timeout: Duration = .seconds(30)
    ) async throws -> [String] {
        try await AccmonBridgeTests.waitForFleet(
            hosts, broker: broker, offline: offline, settings: try settings(broker), timeout: timeout)
    }

    deinit {
        for link in links.values { link.stop() }
    }

    /// Every bridge's log tail, for a failure's message.
    var logTails: String { hosts.map { $0.logTail(10) }.joined(separator: "\n") }
}
