import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

/// Checks every field of `actual` that the classification sets against `expected` (the connection id aside),
/// reporting each mismatch by name.
func expectAccessory(
    _ actual: Accessory?, _ expected: Accessory, _ context: @autoclosure () -> String = "",
    sourceLocation: SourceLocation = #_sourceLocation
) {
    guard let actual else {
        Issue.record(
            "no accessory where \(describe(expected)) was expected. \(context())", sourceLocation: sourceLocation)
        return
    }
    let fields: [(String, String, String)] = [
        ("kind", actual.kind.rawValue, expected.kind.rawValue),
        ("accessoryID", actual.accessoryID, expected.accessoryID),
        ("name", actual.name, expected.name),
        ("manufacturer", actual.manufacturer, expected.manufacturer),
        ("modelNumber", actual.modelNumber, expected.modelNumber),
        ("serialNumber", actual.serialNumber, expected.serialNumber),
        ("firmwareRevision", actual.firmwareRevision, expected.firmwareRevision),
        ("hardwareRevision", actual.hardwareRevision, expected.hardwareRevision),
        ("vendorID", actual.vendorID, expected.vendorID),
        ("productID", actual.productID, expected.productID),
        ("protocolStrings", "\(actual.protocolStrings)", "\(expected.protocolStrings)"),
        ("deviceNodes", "\(actual.deviceNodes)", "\(expected.deviceNodes)"),
        ("sysfsPath", actual.sysfsPath, expected.sysfsPath),
        ("portPath", actual.portPath, expected.portPath),
        ("interfaceNumber", actual.interfaceNumber, expected.interfaceNumber),
    ]
    let mismatches = fields.filter { $0.1 != $0.2 }.map {
        "\($0.0): got \($0.1.debugDescription), expected \($0.2.debugDescription)"
    }
    #expect(
        mismatches.isEmpty, "\(describe(actual)):\n  \(mismatches.joined(separator: "\n  "))\n\(context())",
        sourceLocation: sourceLocation)
}

/// Checks that `events` are `changes`, in order (connect or disconnect), for the given sysfs paths.
func expectChanges(
    _ events: [AccessoryEvent], _ changes: [(AccessoryEvent.Change, String)], _ context: @autoclosure () -> String = "",
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let actual = events.map { "\($0.change.rawValue) \($0.accessory.sysfsPath)" }
    let expected = changes.map { "\($0.0.rawValue) \($0.1)" }
    #expect(
        actual == expected,
        "events:\n  \(actual.joined(separator: "\n  "))\nexpected:\n  \(expected.joined(separator: "\n  "))\n\(context())",
        sourceLocation: sourceLocation)
}

/// The usb_device syspath of a device on port `port` of the first root hub, as the harness lays sysfs out.
func usbPath(_ port: String) -> String { "/sys/devices/pci0000:00/0000:00:14.0/usb1/\(port)" }
