import CCrypto

/// SHA-256 through OpenSSL's libcrypto (`EVP_Digest`): no hand-rolled cryptography.
///
/// Used for the descriptor hash that a manifest entry can pin (`descriptorsSHA256`): the SHA-256 of the raw bytes
/// of a USB device's sysfs `descriptors` attribute, the value `sha256sum /sys/bus/usb/devices/1-1.2/descriptors`
/// prints.
public enum SHA256 {
    /// The length of a digest in bytes.
    public static let digestLength = 32

    /// The SHA-256 of `bytes`.
    /// - Throws: ``CryptoError`` when libcrypto fails (out of memory, or a broken OpenSSL configuration that makes
    ///   SHA-256 unavailable).
    public static func digest(_ bytes: some Collection<UInt8>) throws(CryptoError) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: digestLength)
        try digest.withUnsafeMutableBufferPointer { output throws(CryptoError) in try write(bytes, into: output) }
        return digest
    }

    /// The SHA-256 of `bytes` as 64 lowercase hex digits, as `sha256sum` prints it.
    /// - Throws: ``CryptoError``, as ``digest(_:)``.
    public static func hexDigest(_ bytes: some Collection<UInt8>) throws(CryptoError) -> String {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 3 * digestLength) { buffer throws(CryptoError) in
            // The digest in the last third; each byte's two digits written before it, from the front.
            let digest = UnsafeMutableBufferPointer(rebasing: buffer[(2 * digestLength)...])
            try write(bytes, into: digest)
            for (index, byte) in digest.enumerated() {
                buffer[2 * index] = hexDigits[Int(byte >> 4)]
                buffer[2 * index + 1] = hexDigits[Int(byte & 0x0F)]
            }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[..<(2 * digestLength)]), as: UTF8.self)
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Writes the digest of `bytes` into `output` (``digestLength`` bytes), reading `bytes` in place when they are
    /// contiguous.
    private static func write(
        _ bytes: some Collection<UInt8>, into output: UnsafeMutableBufferPointer<UInt8>
    ) throws(CryptoError) {
        let algorithm = try SHA256Algorithm.shared.get()
        var length: UInt32 = 0
        // The length is a parameter, not captured: a nested function that captured the variable kept it in an
        // allocated box, one allocation per digest.
        func digest(of input: UnsafeRawBufferPointer, length: inout UInt32) -> Int32 {
            EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, algorithm, nil)
        }
        let result =
            bytes.withContiguousStorageIfAvailable { digest(of: UnsafeRawBufferPointer($0), length: &length) }
            ?? Array(bytes).withUnsafeBytes { digest(of: $0, length: &length) }
        guard result == 1, length == UInt32(digestLength) else {
            throw CryptoError(operation: "EVP_Digest(SHA-256)", openSSLError: ERR_get_error())
        }
    }
}

/// libcrypto's SHA-256 implementation, looked up once for the process. With `EVP_sha256()` instead, OpenSSL 3 looks
/// the algorithm up in its providers on every digest (an implicit fetch): more than the hashing itself for a USB
/// device's few dozen descriptor bytes.
private struct SHA256Algorithm: @unchecked Sendable {
    /// An `EVP_MD`, immutable once fetched and safe to share between threads; never freed.
    let algorithm: OpaquePointer?
    /// OpenSSL's error when the fetch failed.
    let fetchError: UInt

    static let shared: SHA256Algorithm = {
        let algorithm = EVP_MD_fetch(nil, "SHA256", nil)
        return SHA256Algorithm(algorithm: algorithm, fetchError: algorithm == nil ? ERR_get_error() : 0)
    }()

    func get() throws(CryptoError) -> OpaquePointer {
        guard let algorithm else { throw CryptoError(operation: "EVP_MD_fetch(SHA256)", openSSLError: fetchError) }
        return algorithm
    }
}

/// A libcrypto failure: the operation and OpenSSL's error text.
public struct CryptoError: Error, Sendable, CustomStringConvertible {
    /// The libcrypto call, such as `EVP_Digest(SHA-256)`.
    public var operation: String
    /// OpenSSL's error code (`ERR_get_error`), 0 when it queued none.
    public var code: UInt
    /// OpenSSL's text for ``code`` (`ERR_error_string_n`).
    public var reason: String

    init(operation: String, openSSLError code: UInt) {
        self.operation = operation
        self.code = code
        var buffer = [CChar](repeating: 0, count: 256)
        if code != 0 { ERR_error_string_n(code, &buffer, buffer.count) }
        reason =
            code == 0
            ? "failed without an OpenSSL error"
            : String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public var description: String { "libcrypto: \(operation): \(reason)" }
}
