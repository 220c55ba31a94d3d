import AccmonProtocol
import AccmonTestSupport
import Testing

private let ftdi = Fixtures.fullAccessory  // serial, 0403:6001, com.ftdi.uart and org.accmon.serial
private let hub = Accessory(kind: .usb, vendorID: "1d6b", productID: "0002", sysfsPath: "/sys/bus/usb/devices/usb1")
private let keyboard = Accessory(
    kind: .bluetoothHID, vendorID: "05AC", productID: "0265", protocolStrings: ["com.apple.hid"], portPath: "hci0")
private let anonymous = Accessory(kind: .usb, sysfsPath: "/sys/devices/x")

@Test func emptyFilterMatchesEveryAccessory() {
    for accessory in [ftdi, hub, keyboard, anonymous] {
        #expect(AccessoryFilter.all.matches(accessory))
        #expect(AccessoryFilter().matches(accessory))
    }
}

@Test func kindPartMatchesOnlyThatKind() {
    #expect(AccessoryFilter(kind: .serial).matches(ftdi))
    #expect(!AccessoryFilter(kind: .usb).matches(ftdi))
    #expect(AccessoryFilter(kind: .usb).matches(hub))
    #expect(AccessoryFilter(kind: .bluetoothHID).matches(keyboard))
    #expect(!AccessoryFilter(kind: .bluetoothHID).matches(hub))
}

@Test func vendorIDMatchesIgnoringCaseAndLeadingZeros() {
    #expect(AccessoryFilter(vendorID: "0403").matches(ftdi))
    #expect(AccessoryFilter(vendorID: "403").matches(ftdi))
    #expect(AccessoryFilter(vendorID: "1D6B").matches(hub))
    #expect(AccessoryFilter(vendorID: "05ac").matches(keyboard))
    #expect(AccessoryFilter(vendorID: "5Ac").matches(keyboard))
    #expect(!AccessoryFilter(vendorID: "0404").matches(ftdi))
    #expect(!AccessoryFilter(vendorID: "4030").matches(ftdi))
}

@Test func productIDMatchesIgnoringCaseAndLeadingZeros() {
    #expect(AccessoryFilter(productID: "6001").matches(ftdi))
    #expect(AccessoryFilter(productID: "2").matches(hub))
    #expect(AccessoryFilter(productID: "0002").matches(hub))
    #expect(AccessoryFilter(productID: "00002").matches(hub))
    #expect(!AccessoryFilter(productID: "0003").matches(hub))
    #expect(!AccessoryFilter(productID: "0403").matches(ftdi), "the vendor id is not the product id")
}

@Test func idPartsNeverMatchAnAccessoryWithoutThatID() {
    #expect(!AccessoryFilter(vendorID: "0").matches(anonymous))
    #expect(!AccessoryFilter(productID: "0").matches(anonymous))
    var odd = hub
    odd.vendorID = "zz"
    #expect(!AccessoryFilter(vendorID: "0").matches(odd))
}

@Test func protocolPartNeedsAnExactProtocolString() {
    #expect(AccessoryFilter(protocolString: "com.ftdi.uart").matches(ftdi))
    #expect(AccessoryFilter(protocolString: "org.accmon.serial").matches(ftdi))
    #expect(!AccessoryFilter(protocolString: "com.ftdi").matches(ftdi))
    #expect(!AccessoryFilter(protocolString: "COM.FTDI.UART").matches(ftdi))
    #expect(!AccessoryFilter(protocolString: "com.ftdi.uart").matches(hub))
    #expect(!AccessoryFilter(protocolString: "").matches(hub))
}

@Test func everySetPartMustMatch() {
    let filter = AccessoryFilter(kind: .serial, vendorID: "403", productID: "6001", protocolString: "com.ftdi.uart")
    #expect(filter.matches(ftdi))
    for spoiled in [
        AccessoryFilter(kind: .usb, vendorID: "403", productID: "6001", protocolString: "com.ftdi.uart"),
        AccessoryFilter(kind: .serial, vendorID: "404", productID: "6001", protocolString: "com.ftdi.uart"),
        AccessoryFilter(kind: .serial, vendorID: "403", productID: "6002", protocolString: "com.ftdi.uart"),
        AccessoryFilter(kind: .serial, vendorID: "403", productID: "6001", protocolString: "other"),
    ] {
        #expect(!spoiled.matches(ftdi), "\(spoiled)")
    }
}

@Test func validationAcceptsHexIDsOfOneToFourDigits() {
    for id in ["0", "f", "F", "403", "0403", "ffff", "AbCd"] {
        #expect(AccessoryFilter(vendorID: id, productID: id).validationProblem() == nil, "\(id)")
    }
    for id in ["", "04030", "xyz", "0x12", "-1", "+1", " 403", "４０３"] {
        let vendorProblem = AccessoryFilter(vendorID: id).validationProblem() ?? ""
        let productProblem = AccessoryFilter(productID: id).validationProblem() ?? ""
        #expect(vendorProblem.hasPrefix("filter.vendorID: '\(id)' is not a hex id"), "\(id)")
        #expect(productProblem.hasPrefix("filter.productID: '\(id)' is not a hex id"), "\(id)")
    }
}
