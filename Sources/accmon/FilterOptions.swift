import AccmonClient
import AccmonManifest
import AccmonOptions

/// Parses a filter option into `filter`; returns false when `option` is not a filter option.
func parseFilterOption(
    _ option: String, _ arguments: inout OptionCursor, into filter: inout AccessoryFilter
)
    throws(UsageError) -> Bool
{
    switch option {
    case "--kind": filter.kind = try parseKind(arguments.value(for: option))
    case "--vendor": filter.vendorID = try parseHexID(arguments.value(for: option), option)
    case "--product": filter.productID = try parseHexID(arguments.value(for: option), option)
    case "--protocol": filter.protocolString = try arguments.value(for: option)
    default: return false
    }
    return true
}

func parseKind(_ text: String) throws(UsageError) -> AccessoryKind {
    guard let kind = AccessoryKind(rawValue: text) else {
        throw UsageError(

            "--kind: '\(text)' is not a kind (\(AccessoryKind.allCases.map(\.rawValue).joined(separator: ", ")))")
    }
    return kind
}

func parseHexID(_ text: String, _ option: String) throws(UsageError) -> String {
    guard (1...4).contains(text.count), UInt16(text, radix: 16) != nil else {
        throw UsageError("\(option): '\(text)' is not a hex id of 1 to 4 digits (such as 0403)")
    }
    return text.lowercased()
}

let filterOptionsHelp = """
      --kind KIND        only usb, serial or bluetooth-hid accessories
      --vendor ID        only this vendor id (hex, such as 0403)
      --product ID       only this product id (hex)
      --protocol NAME    only accessories that speak this protocol
    """
