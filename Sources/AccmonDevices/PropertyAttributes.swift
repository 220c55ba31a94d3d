import AccmonProtocol

/// The `usb_device` attributes that a device's udev properties tell exactly, as ``DeviceClassifier`` reads them: a
/// source takes these and reads only the others from sysfs (each read is three system calls). Any that the
/// properties cannot tell for sure are left out, and the source reads them.
///
/// - `idVendor`, `idProduct` and `bcdDevice` (`%04x`) from the kernel's `PRODUCT` (`%x/%x/%x`), and `bDeviceClass`
///   (`%02x`) from its `TYPE` (`%d/%d/%d`): both come from the device descriptor, like the files. All four or none.
/// - `manufacturer` and `product` from `ID_VENDOR_ENC` and `ID_MODEL_ENC`, which udev's `usb_id` builtin encodes
///   from the attributes (``decodedUdevString(_:)``), when the text they give, with udev's replacements, is what
///   `usb_id` put in `ID_VENDOR` and `ID_MODEL`. Neither when either encoding may have been cut: `usb_id` then
///   leaves the other one unreliable too (seen with systemd 252: an empty `ID_VENDOR_ENC`). Without the attribute
///   `usb_id` writes the vendor or product id in all three, which is also what ``DeviceClassifier`` shows then.
/// - `serial` from `ID_SERIAL_SHORT` when it has no `_`. udev leaves out a serial with a byte outside 0x20...0x7F or
///   a comma, trims the outer spaces, and writes `_` for each run of inner spaces and each byte outside
///   `A-Z a-z 0-9 # + - . : = @ _`; so without `_` it is the attribute's text without its outer spaces, which is all
///   that ``DeviceClassifier`` keeps of it. (A USB string holds at most 126 characters: udev's 255-byte limit never
///   cuts one.)
/// - `removable` from `ACCMON_REMOVABLE`, which accmon's udev rule (udev-rules/70-accmon.rules) copies from the
///   attribute (udevd reads it for the rule anyway), when not empty (udev's value for a missing attribute).
public func usbDeviceAttributes(fromProperties properties: UdevProperties) -> SysfsAttributes {
    var attributes: SysfsAttributes = [:]
    if let product = ueventNumbers(properties[.product], radix: 16),
        let type = ueventNumbers(properties[.type], radix: 10), type.0 <= 0xFF
    {
        attributes[.idVendor] = Hex.lowercase(product.0, digits: 4)
        attributes[.idProduct] = Hex.lowercase(product.1, digits: 4)
        attributes[.bcdDevice] = Hex.lowercase(product.2, digits: 4)
        attributes[.bDeviceClass] = Hex.lowercase(type.0, digits: 2)
    }
    let vendorEncoded = properties[.vendorEncoded], modelEncoded = properties[.modelEncoded]
    if !mayBeCut(vendorEncoded), !mayBeCut(modelEncoded) {
        attributes[.manufacturer] = udevName(encoded: vendorEncoded, plain: properties[.vendor])
        attributes[.product] = udevName(encoded: modelEncoded, plain: properties[.model])
    }
    if let serial = properties[.serialShort], !serial.utf8.contains(UInt8(ascii: "_")) { attributes[.serial] = serial }
    if let removable = properties[.accmonRemovable], !removable.isEmpty { attributes[.removable] = removable }
    return attributes
}

/// Whether udev's 256-byte buffer may have cut an encoding (``decodedUdevString(_:)``).
private func mayBeCut(_ encoded: String?) -> Bool { (encoded?.utf8.count ?? 0) >= 253 }

/// The text `encoded` gives, when it is valid UTF-8 and udev's replacements of it give `plain`.
private func udevName(encoded: String?, plain: String?) -> String? {
    guard var encoded, var plain, !mayBeCut(encoded) else { return nil }
    // On raw bytes and the stack: this runs for every USB device added.
    return encoded.withUTF8 { encoded in
        plain.withUTF8 { plain in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: encoded.count + udevPlainLimit) { buffer in
                let decoded = UnsafeMutableBufferPointer(rebasing: buffer[..<encoded.count])
                guard let count = decodeUdevEncoding(encoded, into: decoded) else { return nil }
                let text = UnsafeBufferPointer(rebasing: decoded[..<count])
                let plainForm = UnsafeMutableBufferPointer(rebasing: buffer[encoded.count...])
                let plainCount = writeUdevPlainForm(of: text, into: plainForm)
                guard plainCount == plain.count, (0..<plainCount).allSatisfy({ plainForm[$0] == plain[$0] }) else {
                    return nil
                }
                // ASCII, the usual name, needs no validation (the standard library's validation is the dearer path).
                return text.allSatisfy { $0 < 0x80 }
                    ? String(decoding: text, as: UTF8.self) : String(validating: text, as: UTF8.self)
            }
        }
    }
}

/// The text that udev encoded into `encoded` for a `…_ENC` property, as a sysfs read of it gives it (invalid UTF-8
/// repaired, trailing newlines dropped); `nil` when `encoded` is not exactly such an encoding or may have been cut.
///
/// udev (`encode_devnode_name`) keeps `A-Z a-z 0-9 # + - . : = @ _` and valid UTF-8 sequences and writes every other
/// byte, `\` included, as `\x` and two lowercase hex digits, into a 256-byte buffer; when the text does not fit it
/// stops after at least 253 bytes, so a value of 253 bytes or more may be cut and is refused.
func decodedUdevString(_ encoded: String) -> String? {
    guard !mayBeCut(encoded) else { return nil }
    var encoded = encoded
    return encoded.withUTF8 { encoded in
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: encoded.count) { decoded in
            decodeUdevEncoding(encoded, into: decoded).map {
                String(decoding: UnsafeBufferPointer(rebasing: decoded[..<$0]), as: UTF8.self)
            }
        }
    }
}

/// Decodes a udev encoding (``decodedUdevString(_:)``) into `decoded`, which has room for `encoded.count` bytes; the
/// number of bytes, without trailing newlines, or `nil` when `encoded` is not exactly an encoding.
private func decodeUdevEncoding(
    _ encoded: UnsafeBufferPointer<UInt8>, into decoded: UnsafeMutableBufferPointer<UInt8>
) -> Int? {
    var count = 0
    var index = 0
    while index < encoded.count {
        let byte = encoded[index]
        index += 1
        guard byte == UInt8(ascii: "\\") else {
            guard byte >= 0x80 || isKeptByUdevEncoding(byte) else { return nil }
            decoded[count] = byte
            count += 1
            continue
        }
        guard index + 2 < encoded.count, encoded[index] == UInt8(ascii: "x"),
            let high = Hex.lowercaseValue(of: encoded[index + 1]), let low = Hex.lowercaseValue(of: encoded[index + 2])
        else { return nil }
        index += 3
        let value = high << 4 | low
        // udev never escapes a byte it keeps, and a C string has no NUL.
        guard value != 0, value >= 0x80 || !isKeptByUdevEncoding(value) else { return nil }
        decoded[count] = value
        count += 1
    }
    while count > 0, decoded[count - 1] == UInt8(ascii: "\n") || decoded[count - 1] == UInt8(ascii: "\r") { count -= 1 }
    return count
}

/// The most bytes udev's `usb_id` keeps of a name in `ID_VENDOR` or `ID_MODEL`.
private let udevPlainLimit = 63

/// Writes `bytes` as udev's `usb_id` writes them into `ID_VENDOR` or `ID_MODEL` into `plain` (room for
/// ``udevPlainLimit`` bytes), and returns their count: the first 63 bytes at most (`udev_replace_whitespace`: outer
/// whitespace dropped, each inner run written `_`), then every byte that is not kept by the encoding
/// (``decodedUdevString(_:)``), part of a whole UTF-8 sequence or of `\x` written `_` (`udev_replace_chars`).
private func writeUdevPlainForm(
    of bytes: UnsafeBufferPointer<UInt8>, into plain: UnsafeMutableBufferPointer<UInt8>
) -> Int {
    func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
    var index = 0
    while index < bytes.count,
        bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D
    {
        index += 1
    }
    var count = 0
    var inWhitespace = false
    while count < udevPlainLimit, index < udevPlainLimit, index < bytes.count {
        let byte = bytes[index]
        index += 1
        if isWhitespace(byte) {
            inWhitespace = true
            continue
        }
        if inWhitespace {
            if count + 1 >= udevPlainLimit { break }
            plain[count] = UInt8(ascii: "_")
            count += 1
            inWhitespace = false
        }
        plain[count] = byte
        count += 1
    }
    let written = UnsafeBufferPointer(rebasing: plain[..<count])
    var position = 0
    while position < count {
        let byte = plain[position]
        if byte < 0x80 && isKeptByUdevEncoding(byte) {
            position += 1
        } else if byte == UInt8(ascii: "\\"), position + 1 < count, plain[position + 1] == UInt8(ascii: "x") {
            position += 2
        } else if let length = wholeUTF8SequenceLength(written, at: position), length > 1 {
            position += length
        } else {
            plain[position] = UInt8(ascii: "_")
            position += 1
        }
    }
    return count
}

/// The length of the UTF-8 sequence starting at `position` when all of it is there (in valid UTF-8 cut anywhere).
private func wholeUTF8SequenceLength(_ bytes: UnsafeBufferPointer<UInt8>, at position: Int) -> Int? {
    let lead = bytes[position]
    let length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0
    guard length > 0, position + length <= bytes.count else { return nil }
    for offset in (position + 1)..<(position + length) where bytes[offset] & 0xC0 != 0x80 { return nil }
    return length
}

/// Whether udev's `encode_devnode_name` keeps the ASCII `byte` as it is.
private func isKeptByUdevEncoding(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "a")...UInt8(ascii: "z"):
        true
    case UInt8(ascii: "#"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: ":"),
        UInt8(ascii: "="), UInt8(ascii: "@"), UInt8(ascii: "_"):
        true
    default:
        false
    }
}

/// `a/b/c` with one to four digits in `radix` (10 or 16, lowercase) each, as the kernel prints them; else `nil`.
private func ueventNumbers(_ text: String?, radix: Int) -> (Int, Int, Int)? {
    guard let text else { return nil }
    var numbers = (0, 0, 0)
    var field = 0
    var digits = 0
    for byte in text.utf8 {
        if byte == UInt8(ascii: "/") {
            guard digits > 0, field < 2 else { return nil }
            field += 1
            digits = 0
            continue
        }
        let digit: Int
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = Int(byte - UInt8(ascii: "a")) + 10
        default: return nil
        }
        guard digit < radix, digits < 4 else { return nil }
        digits += 1
        switch field {
        case 0: numbers.0 = numbers.0 * radix + digit
        case 1: numbers.1 = numbers.1 * radix + digit
        default: numbers.2 = numbers.2 * radix + digit
        }
    }
    return field == 2 && digits > 0 ? numbers : nil
}
