import AccmonJSON
import AccmonManifest
import AccmonProtocol
import Testing

/// Accessories used across the matching tests.
enum Accessories {
    static let ftdi = Accessory(
        kind: .serial, name: "FT232R USB UART", manufacturer: "FTDI", serialNumber: "A50285BI", vendorID: "0403",
        productID: "6001", deviceNodes: ["/dev/ttyUSB0"], portPath: "1-1.2", interfaceNumber: "00")
    static let ftdiUSB = Accessory(
        kind: .usb, name: "FT232R USB UART", manufacturer: "FTDI", serialNumber: "A50285BI", vendorID: "0403",
        productID: "6001", portPath: "1-1.2")
    static let clone = Accessory(
        kind: .serial, name: "USB Serial", manufacturer: "", vendorID: "0403", productID: "6001", portPath: "1-2")
    static let hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    static let yubikey = Accessory(
        kind: .usb, name: "YubiKey OTP+FIDO+CCID", manufacturer: "Yubico", serialNumber: "12345678", vendorID: "1050",
        productID: "0407", portPath: "1-3", descriptorsSHA256: hash)
    static let keyboard = Accessory(
        kind: .bluetoothHID, name: "Magic Keyboard", serialNumber: "28:37:37:1A:2B:3C", vendorID: "05ac",
        productID: "0267")
    static let arduino = Accessory(
        kind: .serial, name: "Arduino Uno", manufacturer: "Arduino (www.arduino.cc)", serialNumber: "7563331",
        vendorID: "2341", productID: "0043", portPath: "1-1.4.3")
    static let bare = Accessory(kind: .usb)

    static let all: [String: Accessory] = [
        "ftdi": ftdi, "ftdiUSB": ftdiUSB, "clone": clone, "yubikey": yubikey, "keyboard": keyboard, "arduino": arduino,
        "bare": bare,
    ]
}

/// A manifest with one entry whose `match` is `match` (JSON text).
func oneEntryManifest(_ match: String) throws -> Manifest {
    let text = #"{"version": 1, "accessories": [{"name": "e", "match": \#(match), "protocols": ["p.q"]}]}"#
    return try Manifest.parse(files: [(path: "m.json", bytes: Array(text.utf8))]).get()
}

func manifest(_ files: [(String, String)]) throws -> Manifest {
    try Manifest.parse(files: files.map { (path: $0.0, bytes: Array($0.1.utf8)) }).get()
}

@Suite("Manifest matching and precedence")
struct ManifestMatchingTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var match: String
        var accessory: String
        var allowed: Bool
        var testDescription: String { "\(match) \(allowed ? "allows" : "rejects") \(accessory)" }
    }

    static let cases: [Case] = [
        // Ids: exact, vendor wildcard, both wildcards; case-insensitive hex; a missing id only matches *.
        Case(match: #"{"id": "0403:6001"}"#, accessory: "ftdi", allowed: true),
        Case(match: #"{"id": "0403:6015"}"#, accessory: "ftdi", allowed: false),
        Case(match: #"{"id": "0403:*"}"#, accessory: "ftdi", allowed: true),
        Case(match: #"{"id": "0403:*"}"#, accessory: "yubikey", allowed: false),
        Case(match: #"{"id": "*:6001"}"#, accessory: "clone", allowed: true),
        Case(match: #"{"id": "*:*"}"#, accessory: "keyboard", allowed: true),
        Case(match: #"{"id": "*:*"}"#, accessory: "bare", allowed: true),
        Case(match: #"{"id": "05AC:0267"}"#, accessory: "keyboard", allowed: true),
        Case(match: #"{"id": "0000:*"}"#, accessory: "bare", allowed: false),
        // Kind.
        Case(match: #"{"kind": "serial", "id": "0403:6001"}"#, accessory: "ftdi", allowed: true),
        Case(match: #"{"kind": "serial", "id": "0403:6001"}"#, accessory: "ftdiUSB", allowed: false),
        Case(match: #"{"kind": "bluetooth-hid"}"#, accessory: "keyboard", allowed: true),
        // Serial: exact is case-sensitive and whole; globs; an accessory with no serial has the empty one.
        Case(match: #"{"serial": "A50285BI"}"#, accessory: "ftdi", allowed: true),
        Case(match: #"{"serial": "a50285bi"}"#, accessory: "ftdi", allowed: false),
        Case(match: #"{"serial": "A50285B"}"#, accessory: "ftdi", allowed: false),
        Case(match: #"{"serial": "A5*"}"#, accessory: "ftdi", allowed: true),
        Case(match: #"{"serial": "A5????BI"}"#, accessory: "ftdi", allowed: true),
        Case(match: #"{"serial": "A5[0-4]*"}"#, accessory: "ftdi", allowed: true),
        Case(match: #"{"serial": "A5[!0]*"}"#, accessory: "ftdi", allowed: false),
        Case(match: #"{"serial": "*"}"#, accessory: "clone", allowed: true),
        Case(match: #"{"serial": "?*"}"#, accessory: "clone", allowed: false),
        Case(match: #"{"serial": "\\*"}"#, accessory: "clone", allowed: false),
        // Manufacturer and product names.
        Case(match: #"{"manufacturer": "FTDI"}"#, accessory: "ftdi", allowed: true),
        Case(match: #"{"manufacturer": "Arduino*"}"#, accessory: "arduino", allowed: true),
        Case(match: #"{"manufacturer": "Arduino"}"#, accessory: "arduino", allowed: false),
        Case(match: #"{"product": "FT232R*"}"#, accessory: "ftdi", allowed: true),
        Case(match: #"{"product": "*UART"}"#, accessory: "clone", allowed: false),
        Case(match: #"{"product": "Magic Keyboard"}"#, accessory: "keyboard", allowed: true),
        // Port paths: exact, and a hub's ports by wildcard ('.' is an ordinary character).
        Case(match: #"{"port": "1-1.2"}"#, accessory: "ftdi", allowed: true),
        Case(match: #"{"port": "1-1"}"#, accessory: "ftdi", allowed: false),
        Case(match: #"{"port": "1-1.*"}"#, accessory: "ftdi", allowed: true),
        Case(match: #"{"port": "1-1.*"}"#, accessory: "arduino", allowed: true),
        Case(match: #"{"port": "1-1.?"}"#, accessory: "arduino", allowed: false),
        Case(match: #"{"port": "1-[12]"}"#, accessory: "clone", allowed: true),
        Case(match: #"{"port": "1-*"}"#, accessory: "keyboard", allowed: false),
        // Descriptor hash: pinned hashes compare without regard to case; unknown never matches.
        Case(match: #"{"descriptorsSHA256": "\#(Accessories.hash)"}"#, accessory: "yubikey", allowed: true),
        Case(
            match: #"{"descriptorsSHA256": "\#(Accessories.hash.uppercased())"}"#, accessory: "yubikey", allowed: true),
        Case(match: #"{"descriptorsSHA256": "\#(Accessories.hash)"}"#, accessory: "ftdiUSB", allowed: false),
        // Bluetooth address: the HID_UNIQ of a bluetooth-hid accessory, case-insensitive; never a USB device.
        Case(match: #"{"address": "28:37:37:1a:2b:3c"}"#, accessory: "keyboard", allowed: true),
        Case(match: #"{"address": "28:37:37:1A:2B:3D"}"#, accessory: "keyboard", allowed: false),
        Case(match: #"{"address": "28:37:37:1a:2b:3c"}"#, accessory: "ftdi", allowed: false),
        // Every set part must hold.
        Case(
            match: #"{"kind": "serial", "id": "0403:6001", "serial": "A50285BI", "port": "1-1.2"}"#, accessory: "ftdi",
            allowed: true),
        Case(
            match: #"{"kind": "serial", "id": "0403:6001", "serial": "A50285BI", "port": "1-1.3"}"#, accessory: "ftdi",
            allowed: false),
        Case(match: #"{"id": "0403:6001", "manufacturer": "FTDI"}"#, accessory: "clone", allowed: false),
    ]

    @Test(arguments: cases)
    func matches(_ testCase: Case) throws {
        let manifest = try oneEntryManifest(testCase.match)
        let accessory = try #require(Accessories.all[testCase.accessory])
        let result = manifest.authenticate(accessory)
        #expect(result.isAllowed == testCase.allowed, "\(result)")
        if testCase.allowed {
            #expect(result == .allowed(entryName: "e", protocols: ["p.q"], access: .defaultAccess))
        }
    }

    @Test func theHashPassedByTheCallerWinsOverTheAccessorysField() throws {
        let manifest = try oneEntryManifest(#"{"descriptorsSHA256": "\#(Accessories.hash)"}"#)
        var spoofed = Accessories.yubikey
        spoofed.descriptorsSHA256 = ""
        #expect(!manifest.authenticate(spoofed).isAllowed)
        #expect(manifest.authenticate(spoofed, descriptorsSHA256: Accessories.hash).isAllowed)
        #expect(
            !manifest.authenticate(Accessories.yubikey, descriptorsSHA256: String(repeating: "0", count: 64)).isAllowed)
    }

    // MARK: Precedence: the first matching entry wins

    @Test func theFirstMatchingEntryInFileOrderWins() throws {
        let manifest = try manifest([
            (
                "m.json",
                """
                {
                  "version": 1,
                  "accessories": [
                    {"name": "flasher", "match": {"id": "0403:6001", "serial": "A50285BI"}, "protocols": ["flash"], "access": {"users": ["alice"]}},
                    {"name": "serial-ftdi", "match": {"kind": "serial", "id": "0403:*"}, "protocols": ["uart"]},
                    {"name": "ftdi-on-hub", "match": {"id": "0403:6001", "port": "1-*"}, "protocols": ["hub"]},
                  ],
                }
                """
            )
        ])
        // Matches all three: the first wins, with its protocols and access.
        #expect(
            manifest.authenticate(Accessories.ftdi)
                == .allowed(entryName: "flasher", protocols: ["flash"], access: AccessList(users: [.name("alice")])))
        // The clone matches the second and the third: the second wins although the third pins more (id and port).
        #expect(
            manifest.authenticate(Accessories.clone)
                == .allowed(entryName: "serial-ftdi", protocols: ["uart"], access: .defaultAccess))
        // A usb-kind clone skips the second.
        var usbClone = Accessories.clone
        usbClone.kind = .usb
        #expect(
            manifest.authenticate(usbClone)
                == .allowed(entryName: "ftdi-on-hub", protocols: ["hub"], access: .defaultAccess))
        #expect(
            manifest.firstMatch(for: usbClone)?.location
                == ManifestLocation(file: "m.json", position: .init(line: 6, column: 5)))
    }

    @Test func theMainFileComesBeforeDropInsAndDropInsGoInNameOrder() throws {
        let names = Manifest.orderedDropIns([
            "20-b.json", "10-a.json", "9-c.json", ".hidden.json", "notes.txt", "README", ".json", "x.json~",
        ])
        #expect(names == ["10-a.json", "20-b.json", "9-c.json"])
        let main = #"{"version": 1, "accessories": [{"name": "main-port", "match": {"port": "1-1.2"}}]}"#
        let a = #"{"version": 1, "accessories": [{"name": "a-id", "match": {"id": "0403:6001"}}]}"#
        let b = #"{"version": 1, "accessories": [{"name": "b-kind", "match": {"kind": "serial"}}]}"#
        let manifest = try manifest([("manifest.json", main), ("10-a.json", a), ("20-b.json", b)])
        #expect(manifest.entries.map(\.name) == ["main-port", "a-id", "b-kind"])
        #expect(manifest.firstMatch(for: Accessories.ftdi)?.name == "main-port")
        #expect(manifest.firstMatch(for: Accessories.clone)?.name == "a-id")
        #expect(manifest.firstMatch(for: Accessories.arduino)?.name == "b-kind")
        #expect(manifest.files == ["manifest.json", "10-a.json", "20-b.json"])
    }

    static let hidden: [(first: String, second: String)] = [
        (#"{"id": "*:*"}"#, #"{"kind": "usb"}"#),
        (#"{"id": "0403:*"}"#, #"{"id": "0403:6001", "port": "1-1"}"#),
        (#"{"serial": "A5*"}"#, #"{"serial": "A50285BI"}"#),
        (#"{"serial": "*"}"#, #"{"kind": "serial"}"#),
        (#"{"kind": "serial", "port": "1-1.*"}"#, #"{"kind": "serial", "port": "1-1.2", "serial": "X"}"#),
        (#"{"kind": "bluetooth-hid"}"#, #"{"address": "28:37:37:1a:2b:3c"}"#),
        (#"{"product": "Widget\\*"}"#, #"{"product": "Widget\\*", "id": "1234:5678"}"#),
    ]

    @Test(arguments: hidden)
    func anEntryHiddenByAnEarlierOneIsRefused(_ first: String, _ second: String) {
        let text = """
            {"version": 1, "accessories": [
              {"name": "first", "match": \(first)},
              {"name": "second", "match": \(second)},
            ]}
            """
        let result = Manifest.parse(files: [(path: "m.json", bytes: Array(text.utf8))])
        #expect(result.problemCodes == [.unreachableEntry], "\(result)")
        #expect(
            result.problemLines.first?.hasPrefix(
                "m.json:3:3: entry 'second': can never match: the entry 'first' (m.json:2:3)") == true)
    }

    static let overlapping: [(first: String, second: String)] = [
        (#"{"kind": "serial", "id": "0403:*"}"#, #"{"id": "0403:6001", "port": "1-*"}"#),  // second is not all serial
        (#"{"serial": "A5*"}"#, #"{"serial": "A*"}"#),
        (#"{"serial": "A5*"}"#, #"{"serial": "A[5]*"}"#),  // same set, but only equal text is recognised
        (#"{"id": "0403:6001"}"#, #"{"id": "0403:*"}"#),  // narrow first, broad after: the usual order
        (#"{"port": "1-1"}"#, #"{"address": "28:37:37:1a:2b:3c"}"#),
    ]

    @Test(arguments: overlapping)
    func overlappingEntriesThatAreNotHiddenAreAccepted(_ first: String, _ second: String) throws {
        let text =
            #"{"version": 1, "accessories": [{"name": "a", "match": \#(first)}, {"name": "b", "match": \#(second)}]}"#
        let result = Manifest.parse(files: [(path: "m.json", bytes: Array(text.utf8))])
        #expect(result.problemLines == [])
    }

    // MARK: Rejection

    @Test func aRejectionNamesTheClosestEntry() throws {
        let manifest = try manifest([
            (
                "m.json",
                #"{"version": 1, "accessories": [{"name": "keys", "match": {"kind": "usb", "id": "1050:*"}}, {"name": "flasher", "match": {"kind": "serial", "id": "0403:6001", "serial": "B*"}}]}"#
            )
        ])
        #expect(
            manifest.authenticate(Accessories.ftdi)
                == .rejected(
                    reason:
                        "no manifest entry matches (default: reject); the closest is 'flasher' at m.json:1:92, where "
                        + "serial \"A50285BI\" does not match \"B*\""))
        #expect(
            Manifest.empty.authenticate(Accessories.ftdi)
                == .rejected(reason: "the manifest has no entries (the default for an unmatched accessory is reject)"))
        #expect(Manifest.empty.isAdmin(uid: 0, gids: [], accounts: AccountIDs()))
        #expect(!Manifest.empty.isAdmin(uid: 1000, gids: [27], accounts: AccountIDs(groups: ["sudo": 27])))
    }

    // MARK: Access

    /// The accounts of these tests: users alice 1001, bob 1002, a user named "lab" 1006; groups lab 3000, accmon
    /// 999, sudo 27. Names the lists hold that are missing here (such as an unknown user) match nobody.
    static let accounts = AccountIDs(
        users: ["alice": 1001, "bob": 1002, "lab": 1006], groups: ["lab": 3000, "accmon": 999, "sudo": 27])

    @Test func accessListsAllowByNameOrIdAndAlwaysRoot() {
        let accounts = Self.accounts
        let list = AccessList(users: [.name("alice"), .id(1005)], groups: [.name("lab"), .id(2000)])
        #expect(list.allows(uid: 0, gids: [], accounts: AccountIDs()))
        #expect(list.allows(uid: 1001, gids: [1001], accounts: accounts))
        #expect(list.allows(uid: 1005, gids: [1005], accounts: accounts))
        #expect(list.allows(uid: 1002, gids: [1002, 3000], accounts: accounts))
        #expect(list.allows(uid: 1003, gids: [1003, 2000], accounts: accounts))
        #expect(!list.allows(uid: 1004, gids: [1004, 27], accounts: accounts))
        #expect(!list.allows(uid: 1006, gids: [], accounts: accounts))  // a user named like a group
        #expect(!list.allows(uid: 1001, gids: [1001, 3000], accounts: AccountIDs()))  // names that did not resolve
        let defaults = AccessList.defaultAccess
        #expect(defaults == AccessList(groups: [.name("accmon")]))
        #expect(defaults.allows(uid: 1002, gids: [999], accounts: accounts))
        #expect(!defaults.allows(uid: 1002, gids: [100], accounts: accounts))
    }

    @Test func anEntrysAccessReplacesTheDefaultAndAdminsAreMergedAcrossFiles() throws {
        let main =
            #"{"version": 1, "admins": {"users": ["alice"]}, "accessories": [{"name": "a", "match": {"id": "0403:*"}, "access": {"users": [1001]}}]}"#
        let dropIn = #"{"version": 1, "admins": {"users": ["alice"], "groups": ["wheel", 10]}}"#
        let manifest = try manifest([("m.json", main), ("d.json", dropIn)])
        let access = try #require(manifest.entries.first?.access)
        #expect(access == AccessList(users: [.id(1001)]))
        #expect(!access.allows(uid: 1002, gids: [999], accounts: Self.accounts))
        #expect(manifest.admins == AccessList(users: [.name("alice")], groups: [.name("wheel"), .id(10)]))
        #expect(manifest.accountNames.users == ["alice"])
        #expect(manifest.accountNames.groups == ["wheel"])  // the only entry has its own access: no default group
        let accounts = AccountIDs(users: ["alice": 1000], groups: ["wheel": 11])
        #expect(manifest.isAdmin(uid: 1000, gids: [1000], accounts: accounts))
        #expect(manifest.isAdmin(uid: 1001, gids: [1001, 10], accounts: accounts))
        #expect(manifest.isAdmin(uid: 1003, gids: [1003, 11], accounts: accounts))
        #expect(!manifest.isAdmin(uid: 1002, gids: [1002, 999], accounts: accounts))
    }

    @Test func accountIDsResolveEachNameTheManifestMentionsOnce() {
        var asked: [String] = []
        let names = (users: Set(["alice", "ghost"]), groups: Set(["accmon"]))
        let accounts = AccountIDs(
            resolving: names,
            userID: { name in
                asked.append("user " + name)
                return name == "alice" ? 1001 : nil
            },
            groupID: { name in
                asked.append("group " + name)
                return 999
            })
        #expect(accounts == AccountIDs(users: ["alice": 1001], groups: ["accmon": 999]))
        #expect(asked.sorted() == ["group accmon", "user alice", "user ghost"])
    }
}
