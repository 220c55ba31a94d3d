import AccmonTestSupport
import Foundation

/// A test CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl.
struct TestCertificates {
    let ca: String
    let serverCertificate: String
    let serverKey: String
    let clientCertificate: String
    let clientKey: String

    /// Makes the files in `directory`; `name` tells several sets apart (a second CA the broker does not trust).
    static func make(in directory: TemporaryDirectory, name: String = "test") async throws -> TestCertificates {
        let prefix = directory.file(name)
        let script = """
            set -e
            cd '\(directory.path)'
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=\(name) CA' -keyout \(name)-ca.key \
              -out \(name)-ca.pem
            openssl req -newkey rsa:2048 -nodes -subj '/CN=127.0.0.1' -keyout \(name)-server.key \
              -out \(name)-server.csr
            printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > \(name)-san.ext
            openssl x509 -req -in \(name)-server.csr -CA \(name)-ca.pem -CAkey \(name)-ca.key -CAcreateserial -days 2 \
              -extfile \(name)-san.ext -out \(name)-server.pem
            openssl req -newkey rsa:2048 -nodes -subj '/CN=accmon-bridge' -keyout \(name)-client.key \
              -out \(name)-client.csr
            openssl x509 -req -in \(name)-client.csr -CA \(name)-ca.pem -CAkey \(name)-ca.key -CAcreateserial -days 2 \
              -out \(name)-client.pem
            chmod 0644 *.pem *.key
            """
        let result = try await run(
            URL(fileURLWithPath: "/bin/sh"), ["-c", script], in: directory, timeout: .seconds(60))
        guard result.termination == .exited(0) else {
            throw Binaries.LocateError(description: "openssl: \(result)")
        }
        return TestCertificates(
            ca: "\(prefix)-ca.pem", serverCertificate: "\(prefix)-server.pem", serverKey: "\(prefix)-server.key",
            clientCertificate: "\(prefix)-client.pem", clientKey: "\(prefix)-client.key")
    }
}
