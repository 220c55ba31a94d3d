import AccmonSys
import Glibc

/// Where the broker is: `mqtt://host[:port]` (plain TCP, port 1883 by default) or `mqtts://host[:port]` (TLS, 8883).
public struct BrokerAddress: Sendable, Hashable, CustomStringConvertible {
    /// The host name or address (an IPv6 address without its brackets).
    public var host: String
    /// The TCP port.
    public var port: Int
    /// Whether the connection uses TLS (`mqtts://`).
    public var usesTLS: Bool

    public init(host: String, port: Int, usesTLS: Bool) {
        self.host = host
        self.port = port
        self.usesTLS = usesTLS
    }

    /// Parses a broker URL; the failure is a reason for a message, such as "expected mqtt:// or mqtts://".
    public static func parse(_ url: String) -> Result<BrokerAddress, BrokerURLProblem> {
        let schemes: [(prefix: String, tls: Bool, port: Int)] = [("mqtt://", false, 1883), ("mqtts://", true, 8883)]
        guard let scheme = schemes.first(where: { url.lowercased().hasPrefix($0.prefix) }) else {
            return .failure(
                BrokerURLProblem("'\(url)' is not a broker URL (expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT])"))
        }
        var rest = Substring(url.dropFirst(scheme.prefix.count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("@"), !rest.contains("?"), !rest.contains("#") else {
            return .failure(
                BrokerURLProblem(
                    "'\(url)': only a host and a port may follow \(scheme.prefix) (credentials go in username and "
                        + "passwordFile, never in the URL)"))
        }
        var host = rest
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                return .failure(BrokerURLProblem("'\(url)': an IPv6 address needs its closing ']'"))
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else {
                    return .failure(BrokerURLProblem("'\(url)': expected ':' after ']'"))
                }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        }
        guard !host.isEmpty else { return .failure(BrokerURLProblem("'\(url)': the host is missing")) }
        var port = scheme.port
        if let portText {
            guard let number = Int(portText), (1...65535).contains(number) else {
                return .failure(BrokerURLProblem("'\(url)': '\(portText)' is not a port (1 to 65535)"))
            }
            port = number
        }
        return .success(BrokerAddress(host: String(host), port: port, usesTLS: scheme.tls))
    }

    /// The URL form, such as `mqtts://broker.example.net:8883`.
    public var description: String {
        "\(usesTLS ? "mqtts" : "mqtt")://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }
}

/// Why a broker URL was refused.
public struct BrokerURLProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// How to reach and log in to a broker: its address, TLS files, credentials and keep-alive.
public struct BrokerSettings: Sendable, Hashable {
    /// The address a client connects to now: one of ``addresses``.
    public var address: BrokerAddress
    /// Every address of the broker, in the order they are tried (docs/MQTT.md §2: one broker's nodes or listeners);
    /// ``BrokerRotation`` moves ``address`` along it.
    public var addresses: [BrokerAddress]
    /// PEM file of the certificate authorities to trust (`mqtts://`); the system's store when `nil`.
    public var caFile: String?
    /// PEM file of this client's certificate, when the broker asks for one.
    public var certificateFile: String?
    /// PEM file of this client's (unencrypted) private key.
    public var keyFile: String?
    public var username: String?
    /// Read from a password file (``PasswordFile``), never given on a command line.
    public var password: String?
    /// Seconds between keep-alive pings; the broker declares the client dead after 1.5 times this.
    public var keepAliveSeconds: Int

    public init(
        address: BrokerAddress, caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil,
        username: String? = nil, password: String? = nil, keepAliveSeconds: Int = 30
    ) {
        self.address = address
        addresses = [address]
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.username = username
        self.password = password
        self.keepAliveSeconds = keepAliveSeconds
    }
}

extension BrokerSettings {
    /// The settings with the list `addresses` (not empty), connecting first to its first.
    public init(
        addresses: [BrokerAddress], caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil,
        username: String? = nil, password: String? = nil, keepAliveSeconds: Int = 30
    ) {
        precondition(!addresses.isEmpty, "a broker needs an address")
        self.init(
            address: addresses[0], caFile: caFile, certificateFile: certificateFile, keyFile: keyFile,
            username: username, password: password, keepAliveSeconds: keepAliveSeconds)
        self.addresses = addresses
    }

    /// These settings connecting to `address` (one of ``addresses``).
    public func connecting(to address: BrokerAddress) -> BrokerSettings {
        var settings = self
        settings.address = address
        return settings
    }
}

/// Reads a broker password from a file that only its owner and group may read.
public enum PasswordFile {
    /// The longest password file accepted.
    public static let maximumBytes = 4096

    /// The password in `path`: its first line, without the line end.
    ///
    /// - Throws: a reason, without the path, when the file is readable by every user (mode `o+r`), is not a regular
    ///   file, cannot be read, is too long or holds no password.
    public static func read(_ path: String) throws(PasswordFileProblem) -> String {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { throw PasswordFileProblem("cannot open it: \(Errno.current)") }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw PasswordFileProblem("cannot stat it: \(Errno.current)") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw PasswordFileProblem("not a regular file") }
        guard info.st_mode & (S_IROTH | S_IWOTH) == 0 else {
            throw PasswordFileProblem(
                "every user may read or write it (mode \(String(info.st_mode & 0o777, radix: 8))): a password "
                    + "file must not be world-readable; run chmod o-rw on it (and give it to the service's group)")
        }
        guard info.st_size <= maximumBytes else {
            throw PasswordFileProblem("longer than \(maximumBytes) bytes: is this the right file?")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        let count = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        guard count >= 0 else { throw PasswordFileProblem("cannot read it: \(Errno.current)") }
        let firstLine =
            bytes[..<count].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).first ?? []
        var line = Array(firstLine)
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        guard !line.isEmpty, let password = String(validating: line, as: UTF8.self) else {
            throw PasswordFileProblem("it holds no password (the first line is empty or not UTF-8)")
        }
        return password
    }
}

/// Why a password file was refused.
public struct PasswordFileProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
