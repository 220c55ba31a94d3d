import AccmonProtocol
import AccmonSystemd
import AccmonTestSupport
import Testing

@testable import AccmondKit

/// The pure parts of accmond's bus service: values and their signatures, names, the declared interfaces, the
/// accessory's properties and the options of `Subscribe`.
@Suite struct BusAPITests {
    @Test func valuesKnowTheirSignatures() {
        #expect(BusValue.vardict([("a", .uint16(1))]).signature == "a{sv}")
        #expect(BusValue.array(element: "a{sv}", []).signature == "aa{sv}")
        #expect(BusValue.structure([.string("connect"), .uint64(1), .vardict([])]).signature == "(sta{sv})")
        #expect(BusValue.array(element: "(sta{sv})", []).signature == "a(sta{sv})")
        #expect(BusValue.strings([]).signature == "as")
        #expect(BusValue.dictEntry(.objectPath("/"), .array(element: "{sa{sv}}", [])).signature == "{oa{sa{sv}}}")
    }

    @Test func objectPathsAreCheckedAsTheSpecificationSays() {
        for valid in ["/", "/org", "/org/accmon/Accmon1/accessories/100001", "/a_b/C9"] {
            #expect(BusNames.isObjectPath(valid), "\(valid)")
        }
        for invalid in ["", "org", "/org/", "//org", "/org//a", "/org/a-b", "/org/é", "/org/a b", "/org/a.b"] {
            #expect(!BusNames.isObjectPath(invalid), "\(invalid)")
        }
    }

    @Test func signaturesSplitIntoCompleteTypes() {
        #expect(BusNames.completeTypes(of: "") == [])
        #expect(BusNames.completeTypes(of: "sa{sv}as") == ["s", "a{sv}", "as"])
        #expect(BusNames.completeTypes(of: "a(sta{sv})t") == ["a(sta{sv})", "t"])
        for invalid in ["a", "a{vs}", "(", "()", "a{s}", "z", "{sv}x"] {
            #expect(BusNames.completeTypes(of: invalid) == nil, "\(invalid)")
        }
    }

    @Test func everyDeclaredMethodAndSignalHasValidTypes() {
        for interface in BusAPI.managerInterfaces + BusAPI.accessoryInterfaces + BusAPI.subscriptionInterfaces {
            for method in interface.methods {
                for argument in method.arguments + method.results {
                    #expect(BusNames.completeTypes(of: argument.signature)?.count == 1, "\(interface.name).\(method.name)")
                }
            }
            for property in interface.properties {
                #expect(BusNames.completeTypes(of: property.signature)?.count == 1, "\(interface.name).\(property.name)")
            }
        }
    }

    /// Every field of the model is a property, each once, and every value has its declared type: for the accessory
    /// fixtures and for random accessories.
    @Test func everyFieldIsAPropertyOfItsDeclaredType() {
        let declared = BusAccessoryProperties.declared
        #expect(declared.count == Accessory.Field.allCases.count + BusAccessoryProperties.claimProperties.count)
        #expect(Set(declared.map(\.name)).count == declared.count, "a property name is used twice")
        var random = SplitMix64(seed: SplitMix64.testSeed())
        var accessories = [Fixtures.fullAccessory, Fixtures.minimalAccessory, Fixtures.awkwardAccessory]
        for _ in 0..<200 {
            var accessory = Accessory(kind: AccessoryKind.allCases[Int(random.next(below: 3))])
            accessory.vendorID = String(random.next(below: 0x10000), radix: 16)
            accessory.productID = random.next(below: 4) == 0 ? "" : String(random.next(below: 0x10000), radix: 16)
            accessory.connectionID = ConnectionID(random.next())
            accessory.deviceNodes = (0..<random.next(below: 3)).map { "/dev/node\($0)" }
            accessories.append(accessory)
        }
        let claim = ClaimSummary(
            claimID: "c-3", holder: Party(user: "alice", uid: 1000), since: 1.5, reason: "flashing", waiting: 2,
            connections: [ConnectionID(42)], accessoryIDs: ["x"])
        for accessory in accessories {
            for summary in [nil, claim] {
                let values = BusAccessoryProperties.all(accessory, claim: summary)
                #expect(values.map(\.0) == declared.map(\.name))
                for ((name, value), property) in zip(values, declared) {
                    #expect(value.signature == property.signature, "\(name)")
                    #expect(BusAccessoryProperties.value(named: name, accessory, claim: summary) == value)
                }
            }
        }
        let full = Fixtures.fullAccessory
        #expect(BusAccessoryProperties.value(named: "VendorID", full, claim: nil) == .uint16(0x0403))
        #expect(BusAccessoryProperties.value(named: "ConnectionID", full, claim: nil) == .uint64(42))
        #expect(BusAccessoryProperties.value(named: "Kind", full, claim: nil) == .string("serial"))
        #expect(BusAccessoryProperties.value(named: "ClaimHolder", full, claim: claim) == .string("alice"))
        #expect(BusAccessoryProperties.value(named: "ClaimWaiting", full, claim: claim) == .uint32(2))
        #expect(BusAccessoryProperties.value(named: "VendorID", Fixtures.minimalAccessory, claim: nil) == .uint16(0))
        #expect(BusAccessoryProperties.value(named: "Nope", full, claim: nil) == nil)
    }

    @Test func anEventIsItsChangeSequenceAndFields() {
        let event = AccessoryEvent(.disconnect, sequence: 9, accessory: Fixtures.fullAccessory)
        guard case .structure(let parts) = BusAccessoryProperties.event(event) else {
            Issue.record("not a struct")
            return
        }
        #expect(parts.count == 3)
        #expect(parts[0] == .string("disconnect"))
        #expect(parts[1] == .uint64(9))
        #expect(parts[2].stringKeyedEntries?.count == Accessory.Field.allCases.count)
    }

    @Test func accessoryPathsAndConnectionIDsRoundTrip() {
        for number: UInt64 in [0, 1, 100_001, UInt64.max] {
            let path = BusAPI.accessoryPath(ConnectionID(number))
            #expect(BusNames.isObjectPath(path))
            #expect(BusAPI.connectionID(ofPath: path) == ConnectionID(number))
        }
        for other in [
            BusAPI.accessoriesPath, BusAPI.accessoriesPath + "/", BusAPI.accessoriesPath + "/x1",
            BusAPI.accessoriesPath + "/1/2", BusAPI.accessoriesPath + "/18446744073709551616", "/1",
        ] {
            #expect(BusAPI.connectionID(ofPath: other) == nil, "\(other)")
        }
        let subscription = BusFrontend.newSubscriptionPath()
        #expect(BusNames.isObjectPath(subscription) && subscription.hasPrefix(BusAPI.subscriptionsPath + "/"))
        #expect(subscription != BusFrontend.newSubscriptionPath())
    }

    @Test func subscribeOptionsMakeTheFilter() throws {
        let options = try BusSubscribeOptions(
            .vardict([
                ("kind", .string("serial")), ("vendor-id", .string("0403")), ("product-id", .string("6001")),
                ("protocol", .string("com.acme.gps")), ("restore-id", .string("app")), ("client-name", .string("x")),
            ]))
        #expect(
            options.filter
                == AccessoryFilter(kind: .serial, vendorID: "0403", productID: "6001", protocolString: "com.acme.gps"))
        #expect(options.restoreID == "app")
        #expect(options.clientName == "x")
        #expect(try BusSubscribeOptions(.vardict([])) == BusSubscribeOptions())
        #expect(BusSubscribeOptions.properties(of: options.filter).stringKeyedEntries?.count == 4)
    }

    @Test func badSubscribeOptionsAreRefusedNamingTheOption() {
        let cases: [(BusValue, BusError.Name, String)] = [
            (.vardict([("colour", .string("red"))]), .invalidOption, "unknown option 'colour'"),
            (.vardict([("kind", .uint32(1))]), .invalidOption, "'kind' must be of type 's', not 'u'"),
            (.vardict([("kind", .string("toaster"))]), .invalidOption, "kind: 'toaster' is none of"),
            (.vardict([("vendor-id", .string("04030"))]), .invalidOption, "vendor-id: '04030' is not 1 to 4 hex"),
            (.vardict([("product-id", .string("xyz"))]), .invalidOption, "product-id: 'xyz'"),
            (.vardict([("protocol", .string(""))]), .invalidOption, "protocol: empty"),
            (.vardict([("restore-id", .string(""))]), .invalidOption, "restore-id: empty"),
            (
                .vardict([("restore-id", .string(String(repeating: "r", count: 256)))]), .invalidOption,
                "256 bytes, longer than 255"
            ),
            (.vardict([("kind", .string("usb")), ("kind", .string("usb"))]), .invalidOption, "'kind' is given twice"),
            (.strings(["kind"]), .invalidArguments, "expected an a{sv}"),
        ]
        for (value, name, words) in cases {
            #expect(throws: BusError.self) { try BusSubscribeOptions(value) }
            do {
                _ = try BusSubscribeOptions(value)
            } catch {
                #expect(error.name == name, "\(value)")
                #expect(error.message.contains(words), "\(error.message)")
                #expect(error.busName == "org.accmon.Accmon1.Error.\(name.rawValue)")
            }
        }
    }

    @Test func introspectionNamesEveryMemberWithItsTypes() {
        let xml = BusInterfaceDescription.document(interfaces: BusAPI.subscriptionInterfaces, children: ["a"])
        #expect(xml.contains("<interface name=\"org.accmon.Accmon1.Subscription\">"))
        #expect(xml.contains("<arg name=\"events\" type=\"a(sta{sv})\"/>"))
        #expect(xml.contains("<arg name=\"sequence\" type=\"t\" direction=\"in\"/>"))
        #expect(xml.contains("<property name=\"State\" type=\"s\" access=\"read\"/>"))
        #expect(xml.contains("value=\"const\""))
        #expect(xml.contains("<node name=\"a\"/>"))
        #expect(BusAPI.subscription.method("Ack")?.callSignature == "t")
        #expect(BusAPI.manager.method("Subscribe")?.callSignature == "a{sv}")
    }
}
