import CCrypto

/// SHA-256 through OpenSSL's libcrypto (its SHA-256 implementation, called directly: see the CCrypto module's
/// header): no hand-rolled cryptography.
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
        // As a Result: withContiguousStorageIfAvailable rethrows untyped.
        let digest =
            bytes.withContiguousStorageIfAvailable { bytes in Result { () throws(CryptoError) in try hexDigest(bytes) } }
            ?? Array(bytes).withUnsafeBufferPointer { bytes in Result { () throws(CryptoError) in try hexDigest(bytes) } }
        return try digest.get()
    }

    /// The SHA-256 of the bytes in `bytes` as 64 lowercase hex digits: ``hexDigest(_:)-(Collection)`` without the
    /// generic calls (it is what accmond calls per USB device plugged).
    /// - Throws: ``CryptoError``, as ``digest(_:)``.
    public static func hexDigest(_ bytes: UnsafeBufferPointer<UInt8>) throws(CryptoError) -> String {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 3 * digestLength) { buffer throws(CryptoError) in
            // The digest in the last third; each byte's two digits written before it, from the front.
            let digest = UnsafeMutableBufferPointer(rebasing: buffer[(2 * digestLength)...])
            guard accmon_sha256(bytes.baseAddress, bytes.count, digest.baseAddress) == 1 else {
                throw CryptoError(operation: "SHA256", openSSLError: ERR_get_error())
            }
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
        let result =
            bytes.withContiguousStorageIfAvailable { accmon_sha256($0.baseAddress, $0.count, output.baseAddress) }
            ?? Array(bytes).withUnsafeBufferPointer { accmon_sha256($0.baseAddress, $0.count, output.baseAddress) }
        guard result == 1 else { throw CryptoError(operation: "SHA256", openSSLError: ERR_get_error()) }
    }
}

/// A libcrypto failure: the operation and OpenSSL's error text.
public struct CryptoError: Error, Sendable, CustomStringConvertible {
    /// The libcrypto call, such as `SHA256`.
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
