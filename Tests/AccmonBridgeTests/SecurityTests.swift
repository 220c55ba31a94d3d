import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// A broker with TLS (client certificates required), passwords and the ACL of docs/MQTT.md: each host's user may write
/// only under its own `accmon/<host>/`, the reader may only read (and publish its end markers).
struct SecuredBroker {
    let broker: Mosquitto
    let certificates: TestCertificates
    let directory: TemporaryDirectory

    static let acl = """
        # Each host's credentials: its own subtree only.
        user lab-1
        topic readwrite accmon/lab-1/#
        topic read accmon/$census/+
        topic write accmon/$readers/+/census
        user lab-2
        topic readwrite accmon/lab-2/#
        topic read accmon/$census/+
        topic write accmon/$readers/+/census
        # Readers: read everything under accmon/.
        user reader
        topic read accmon/#
        # Every client may publish the end marker of its own reads (accmon list/watch --broker).
        pattern write accmon/$readers/%c
        # Each host's entry in the host index, under its own name (its user's).
        pattern write accmon/$hosts/+/%u
        # The census: readers' requests and answers under their client id.
        pattern write accmon/$census/%c
        pattern read accmon/$readers/%c/#

        """

    static func start() async throws -> SecuredBroker {
        let directory = try TemporaryDirectory()
        let certificates = try await TestCertificates.make(in: directory)
        let passwords = directory.file("passwords")
        for (index, user) in ["lab-1", "lab-2", "reader"].enumerated() {
            let made = try await run(
                URL(fileURLWithPath: "/usr/bin/mosquitto_passwd"),
                (index == 0 ? ["-c"] : []) + ["-b", passwords, user, "pw-\(user)"], in: directory)
            guard made.termination == .exited(0) else { throw Binaries.LocateError(description: "\(made)") }
        }
        let acl = directory.file("acl")
        try acl_text.write(toFile: acl, atomically: true, encoding: .utf8)
        let broker = try await Mosquitto.start(
            Mosquitto.Options(tls: certificates, requireCertificate: true, passwordFile: passwords, aclFile: acl))
        return SecuredBroker(broker: broker, certificates: certificates, directory: directory)
    }

    /// A password file for `user` (mode 0600, as the service's would be).
    func passwordFile(_ user: String, password: String? = nil) throws -> String {
        let path = directory.file("\(user)-\(password ?? "right").password")
        // Written once: a process started a moment ago may be reading it, and a rewrite truncates it first.
        guard !FileManager.default.fileExists(atPath: path) else { return path }
        try ((password ?? "pw-\(user)") + "\n").write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    /// The bridge's TLS and login keys for `user`.
    func bridgeSettings(_ user: String, password: String? = nil, ca: String? = nil) throws -> [String: String] {
        [
            "ca": json(ca ?? certificates.ca), "certificate": json(certificates.clientCertificate),
            "key": json(certificates.clientKey), "username": json(user),
            "passwordFile": json(try passwordFile(user, password: password)),
        ]
    }

    /// The reader's settings for the in-process fleet reader.
    func readerSettings() throws -> BrokerSettings {
        BrokerSettings(
            address: try BrokerAddress.parse(broker.url).get(), caFile: certificates.ca,
            certificateFile: certificates.clientCertificate, keyFile: certificates.clientKey, username: "reader",
            password: "pw-reader", keepAliveSeconds: 5)
    }

    /// `accmon list --broker` as the reader (or with other login options).
    func list(_ login: [String]? = nil) async throws -> CommandResult {
        let options =
            try login ?? [
                "--ca", certificates.ca, "--certificate", certificates.clientCertificate, "--key",
                certificates.clientKey, "--username", "reader", "--password-file", passwordFile("reader"),
            ]
        return try await run(try Binaries.accmon, ["list", "--broker", broker.url] + options, in: directory)
    }
}

private let acl_text = SecuredBroker.acl

extension BridgeProcessTests {
    @Suite struct Security {
        @Test func tlsPasswordsAndTheACLCarryTheFleet() async throws {
            let secured = try await SecuredBroker.start()
            #expect(secured.broker.url.hasPrefix("mqtts://"))
            let host = try await BridgedHost.start(
                name: "lab-1", broker: secured.broker.url, settings: try secured.bridgeSettings("lab-1"))
            let connection = try await host.connect()
            defer { connection.close() }
            var random = SplitMix64(seed: SplitMix64.testSeed())
            var plugger = Plugger(connection)
            try await plugger.storm(steps: 15, target: 8, using: &random)
            try await plugger.plug(using: &random)  // at least one row to list
            let difference = try await waitForFleet(
                [host], broker: secured.broker, settings: try secured.readerSettings())
            #expect(difference.isEmpty, "\(difference)\n\(host.logTail())")

            let listed = try await secured.list()
            #expect(listed.termination == .exited(0), "\(listed)")
            #expect(
                listed.stdout.split(separator: "\n").count == 1 + (try await host.truth().count), "\(listed.stdout)")
            // A reader may not write the hosts' topics: the broker refuses (and the bridge's state stays).
            let forged = try await run(
                URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
                [
                    "-p", String(secured.broker.port), "--cafile", secured.certificates.ca, "--cert",
                    secured.certificates.clientCertificate, "--key", secured.certificates.clientKey, "-u", "reader",
                    "-P", "pw-reader", "-V", "5", "-q", "1", "-r", "-t", "accmon/lab-1/accessories/forged/1", "-m",
                    "{}",
                ], in: secured.directory)
            #expect(forged.termination == .exited(0), "\(forged)")
            #expect(
                try await waitForFleet([host], broker: secured.broker, settings: try secured.readerSettings()).isEmpty)
            #expect(!host.bridgeLog.contains("host index entry"), "the ACL lets the host write its entry")
        }

        @Test func wrongCredentialsAreNamedByTheBridgeAndTheCLI() async throws {
            let secured = try await SecuredBroker.start()
            let host = try await BridgedHost.start(
                name: "lab-1", broker: secured.broker.url,
                settings: try secured.bridgeSettings("lab-1", password: "wrong"))
            #expect(
                await waitFor(
                    "error: mqtt: \(secured.broker.url): connect: Not authorized (reason code 135): "
                        + "the broker refused the login"
                ) {
                    host.bridgeLog
                }, "\(host.logTail())")
            let list = try await secured.list([
                "--ca", secured.certificates.ca, "--certificate", secured.certificates.clientCertificate, "--key",
                secured.certificates.clientKey, "--username", "reader", "--password-file",
                try secured.passwordFile("reader", password: "nope"),
            ])
            #expect(list.termination == .exited(77), "\(list)")
            #expect(list.stderr.contains("the broker refused the login"), "\(list)")
        }

        @Test func anUntrustedServerCertificateIsNamed() async throws {
            let secured = try await SecuredBroker.start()
            let other = try await TestCertificates.make(in: secured.directory, name: "other")
            let host = try await BridgedHost.start(
                name: "lab-1", broker: secured.broker.url,
                settings: try secured.bridgeSettings("lab-1", ca: other.ca))
            // The event path names it at error level (the claim gateway's own attempts are logged at debug level).
            #expect(await waitFor("error: mqtt: \(secured.broker.url)") { host.bridgeLog }, "\(host.logTail())")
            #expect(host.bridgeLog.contains("certificate verify failed"), "\(host.logTail())")
            let list = try await secured.list([
                "--ca", other.ca, "--certificate", secured.certificates.clientCertificate, "--key",
                secured.certificates.clientKey, "--username", "reader", "--password-file",
                try secured.passwordFile("reader"),
            ])
            #expect(list.termination == .exited(77), "\(list)")
            #expect(list.stderr.contains("certificate verify failed"), "\(list)")
        }

        /// lab-1's credentials publishing as host lab-2: the ACL refuses, and the bridge says so.
        @Test func aHostMayWriteOnlyUnderItsOwnName() async throws {
            let secured = try await SecuredBroker.start()
            let host = try await BridgedHost.start(
                name: "lab-2", broker: secured.broker.url, settings: try secured.bridgeSettings("lab-1"))
            let connection = try await host.connect()
            defer { connection.close() }
            _ = try await connection.simulateConnect(Accessory(kind: .usb, name: "sneaky"))
            #expect(
                await waitFor(
                    "error: mqtt: the broker refused the marker on 'accmon/lab-2/sync' (mqtt: the broker refused a "
                        + "publication: Not authorized (reason code 135)); may this user write under 'accmon/lab-2/'?"
                ) { host.bridgeLog },
                "\(host.logTail())")
            let state = try await fleetState(secured.broker, settings: try secured.readerSettings())
            #expect(state.hosts["lab-2"]?.accessories.isEmpty ?? true, "\(state.hosts)")
            let entry = FleetTopics(prefix: "accmon").indexEntry(host: "lab-2")
            let refusal = "mqtt: the broker refused the host index entry '\(entry)'"
            #expect(host.bridgeLog.contains(refusal), "\(host.logTail())")
        }
    }
}
