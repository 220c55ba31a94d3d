import CCrypto

/// SHA-256 through OpenSSL's libcrypto (`EVP_Digest` with `EVP_sha256`): no hand-rolled cryptography.
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
        let input = Array(bytes)
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let result = input.withUnsafeBytes { buffer in
            EVP_Digest(buffer.baseAddress, buffer.count, &digest, &length, EVP_sha256(), nil)
        }
        guard result == 1, length == UInt32(digestLength) else {
            throw CryptoError(operation: "EVP_Digest(SHA-256)", openSSLError: ERR_get_error())
        }
        return Array(digest.prefix(digestLength))
    }

    /// The SHA-256 of `bytes` as 64 lowercase hex digits, as `sha256sum` prints it.
    /// - Throws: ``CryptoError``, as ``digest(_:)``.
    public static func hexDigest(_ bytes: some Collection<UInt8>) throws(CryptoError) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(2 * digestLength)
        for byte in try digest(bytes) {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
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
