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
public func usbDeviceAttributes(fromProperties properties: UdevProperties) -> SysfsAttributes {
    var attributes: SysfsAttributes = [:]
    if let product = ueventNumbers(properties[.product], radix: 16),
        let type = ueventNumbers(properties[.type], radix: 10), type.0 <= 0xFF
    {
        attributes[.idVendor] = lowercaseHex(product.0, digits: 4)
        attributes[.idProduct] = lowercaseHex(product.1, digits: 4)
        attributes[.bcdDevice] = lowercaseHex(product.2, digits: 4)
        attributes[.bDeviceClass] = lowercaseHex(type.0, digits: 2)
    }
    let vendorEncoded = properties[.vendorEncoded], modelEncoded = properties[.modelEncoded]
    if !mayBeCut(vendorEncoded), !mayBeCut(modelEncoded) {
        attributes[.manufacturer] = udevName(encoded: vendorEncoded, plain: properties[.vendor])
        attributes[.product] = udevName(encoded: modelEncoded, plain: properties[.model])
    }
    if let serial = properties[.serialShort], !serial.utf8.contains(UInt8(ascii: "_")) { attributes[.serial] = serial }
    return attributes
}

/// Whether udev's 256-byte buffer may have cut an encoding (``decodedUdevString(_:)``).
private func mayBeCut(_ encoded: String?) -> Bool { (encoded?.utf8.count ?? 0) >= 253 }

/// The text `encoded` gives, when it is valid UTF-8 and udev's replacements of it give `plain`.
private func udevName(encoded: String?, plain: String?) -> String? {
    guard let encoded, let plain, let bytes = decodedUdevBytes(encoded),
        let text = String(validating: bytes, as: UTF8.self), udevPlainForm(bytes).elementsEqual(plain.utf8)
    else {
        return nil
    }
    return text
}

/// The text that udev encoded into `encoded` for a `…_ENC` property, as a sysfs read of it gives it (invalid UTF-8
/// repaired, trailing newlines dropped); `nil` when `encoded` is not exactly such an encoding or may have been cut.
///
/// udev (`encode_devnode_name`) keeps `A-Z a-z 0-9 # + - . : = @ _` and valid UTF-8 sequences and writes every other
/// byte, `\` included, as `\x` and two lowercase hex digits, into a 256-byte buffer; when the text does not fit it
/// stops after at least 253 bytes, so a value of 253 bytes or more may be cut and is refused.
func decodedUdevString(_ encoded: String) -> String? {
    decodedUdevBytes(encoded).map { String(decoding: $0, as: UTF8.self) }
}

/// The bytes of ``decodedUdevString(_:)``, before UTF-8 repair.
private func decodedUdevBytes(_ encoded: String) -> [UInt8]? {
    let bytes = encoded.utf8
    guard !mayBeCut(encoded) else { return nil }
    var decoded: [UInt8] = []
    decoded.reserveCapacity(bytes.count)
    var index = bytes.startIndex
    while index != bytes.endIndex {
        let byte = bytes[index]
        index = bytes.index(after: index)
        guard byte == UInt8(ascii: "\\") else {
            guard byte >= 0x80 || isKeptByUdevEncoding(byte) else { return nil }
            decoded.append(byte)
            continue
        }
        guard index != bytes.endIndex, bytes[index] == UInt8(ascii: "x") else { return nil }
        var value: UInt8 = 0
        for _ in 0..<2 {
            index = bytes.index(after: index)
            guard index != bytes.endIndex, let digit = lowercaseHexValue(bytes[index]) else { return nil }
            value = value << 4 | digit
        }
        index = bytes.index(after: index)
        // udev never escapes a byte it keeps, and a C string has no NUL.
        guard value != 0, value >= 0x80 || !isKeptByUdevEncoding(value) else { return nil }
        decoded.append(value)
    }
    while let last = decoded.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { decoded.removeLast() }
    return decoded
}

/// `bytes` as udev's `usb_id` writes them into `ID_VENDOR` or `ID_MODEL`: the first 63 bytes at most
/// (`udev_replace_whitespace`: outer whitespace dropped, each inner run written `_`), then every byte that is not
/// kept by the encoding (``decodedUdevString(_:)``), part of a whole UTF-8 sequence or of `\x` written `_`
/// (`udev_replace_chars`).
private func udevPlainForm(_ bytes: [UInt8]) -> [UInt8] {
    let limit = 63
    func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
    var index = bytes.firstIndex { ![0x20, 0x09, 0x0A, 0x0D].contains($0) } ?? bytes.count
    var plain: [UInt8] = []
    var inWhitespace = false
    while plain.count < limit, index < limit, index < bytes.count {
        let byte = bytes[index]
        index += 1
        if isWhitespace(byte) {
            inWhitespace = true
            continue
        }
        if inWhitespace {
            if plain.count + 1 >= limit { break }
            plain.append(UInt8(ascii: "_"))
            inWhitespace = false
        }
        plain.append(byte)
    }
    var position = 0
    while position < plain.count {
        let byte = plain[position]
        if byte < 0x80 && isKeptByUdevEncoding(byte) {
            position += 1
        } else if byte == UInt8(ascii: "\\"), position + 1 < plain.count, plain[position + 1] == UInt8(ascii: "x") {
            position += 2
        } else if let length = wholeUTF8SequenceLength(plain, at: position), length > 1 {
            position += length
        } else {
            plain[position] = UInt8(ascii: "_")
            position += 1
        }
    }
    return plain
}

/// The length of the UTF-8 sequence starting at `position` when all of it is there (in valid UTF-8 cut anywhere).
private func wholeUTF8SequenceLength(_ bytes: [UInt8], at position: Int) -> Int? {
    let lead = bytes[position]
    let length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0
    guard length > 0, position + length <= bytes.count else { return nil }
    return bytes[(position + 1)..<(position + length)].allSatisfy { $0 & 0xC0 == 0x80 } ? length : nil
}

/// Whether udev's `encode_devnode_name` keeps the ASCII `byte` as it is.
private func isKeptByUdevEncoding(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"):
        true
    case UInt8(ascii: "#"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: ":"),
        UInt8(ascii: "="), UInt8(ascii: "@"), UInt8(ascii: "_"):
        true
    default:
        false
    }
}

/// The value of a lowercase hex digit, `nil` for any other byte.
private func lowercaseHexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    default: nil
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

