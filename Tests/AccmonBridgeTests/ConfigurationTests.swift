import AccmonMQTT
import AccmonTestSupport
import Foundation
import Glibc
import Testing

@testable import AccmonBridge

private func problems(_ text: String) -> [String] {
    switch BridgeConfiguration.parse(Array(text.utf8), path: "mqtt.json", defaultHost: "this-machine") {
    case .success: []
    case .failure(let problems): problems.problems.map(\.description)
    }
}

private func parsed(_ text: String) throws -> BridgeConfiguration {
    try BridgeConfiguration.parse(Array(text.utf8), path: "mqtt.json", defaultHost: "this-machine").get().configuration
}

@Test func aMinimalConfigurationTakesTheDefaults() throws {
    let configuration = try parsed(#"{"broker": "mqtt://localhost"}"#)
    #expect(configuration.broker.address == BrokerAddress(host: "localhost", port: 1883, usesTLS: false))
    #expect(configuration.host == "this-machine")
    #expect(configuration.topics.prefix == "accmon")
    #expect(configuration.socketPath == nil)
    #expect(configuration.restoreID == "accmon-mqtt")
    #expect(configuration.broker.keepAliveSeconds == 30)
    #expect(configuration.broker.username == nil && configuration.passwordFile == nil)
    #expect(configuration.machineIDFile == "/etc/machine-id")
}

@Test func everyKeyIsRead() throws {
    let configuration = try parsed(
        """
        {
          // every key
          "broker": "mqtts://broker.example.net:8884",
          "ca": "/etc/accmon/ca.pem", "certificate": "/etc/accmon/c.pem", "key": "/etc/accmon/c.key",
          "username": "lab-1", "passwordFile": "/etc/accmon/mqtt.password",
          "host": "lab/1", "prefix": "site/accmon", "socket": "/run/x.sock", "restoreID": "bridge-2",
          "keepAlive": 10, "machineIDFile": "/tmp/id",
        }
        """)
    #expect(configuration.broker.address == BrokerAddress(host: "broker.example.net", port: 8884, usesTLS: true))
    #expect(configuration.broker.caFile == "/etc/accmon/ca.pem")
    #expect(configuration.broker.certificateFile == "/etc/accmon/c.pem")
    #expect(configuration.broker.keyFile == "/etc/accmon/c.key")
    #expect(configuration.broker.username == "lab-1")
    #expect(configuration.passwordFile == "/etc/accmon/mqtt.password")
    #expect(configuration.host == "lab/1")
    #expect(configuration.topics.prefix == "site/accmon")
    #expect(configuration.socketPath == "/run/x.sock")
    #expect(configuration.restoreID == "bridge-2")
    #expect(configuration.broker.keepAliveSeconds == 10)
    #expect(configuration.machineIDFile == "/tmp/id")
}

@Test func problemsComeWithTheirPositions() {
    #expect(
        problems("{\n  \"broker\": \"mqtt://x\",\n  \"broker\": \"mqtt://y\"\n}") == [
            "mqtt.json:3:3: broker: appears twice (first at 2:3); keep one"
        ])
    #expect(
        problems(#"{"broker": "mqtt://x", "password": "hunter2"}"#) == [
            "mqtt.json:1:24: password: a password does not go in this file, which every user may read: put it in a "
                + "file only root and the service may read, and name that file in \"passwordFile\""
        ])
    #expect(
        problems(#"{"broker": "mqtt://x", "Host": "a"}"#) == [
            "mqtt.json:1:24: unknown key 'Host' (did you mean 'host'?)"
        ])
    #expect(
        problems(#"{"broker": "http://x"}"#) == [
            "mqtt.json:1:12: broker: 'http://x' is not a broker URL "
                + "(expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT])"
        ])
    #expect(
        problems("{}") == [#"mqtt.json:1:1: broker: missing: name the broker, such as "broker": "mqtt://localhost""#])
    #expect(
        problems(#"{"broker": "mqtt://x", "ca": "/ca.pem"}"#) == [
            "mqtt.json:1:30: ca: TLS files need an mqtts:// broker (broker is mqtt://x:1883)"
        ])
    #expect(
        problems(#"{"broker": "mqtts://x", "certificate": "/c.pem"}"#) == [
            #"mqtt.json:1:25: certificate: a client certificate needs both "certificate" and "key""#
        ])
    #expect(
        problems(#"{"broker": "mqtt://x", "passwordFile": "/p"}"#) == [
            #"mqtt.json:1:24: passwordFile: a password needs a "username""#
        ])
    #expect(
        problems(#"{"broker": "mqtt://x", "prefix": "a/#"}"#) == [
            "mqtt.json:1:34: prefix: 'a/#': a prefix cannot hold the wildcards + or #"
        ])
    #expect(
        problems(#"{"broker": "mqtt://x", "keepAlive": 1}"#) == [
            "mqtt.json:1:37: keepAlive: expected a whole number from 5 to 3600"
        ])
    #expect(
        problems(#"{"broker": "mqtt://x", "host": ""}"#) == [
            "mqtt.json:1:32: host: is empty (remove the key for the default)"
        ])
    #expect(
        problems(#"{"broker": "mqtt://x", "host": "a\u0007b"}"#) == ["mqtt.json:1:32: host: holds a control character"])
    #expect(
        problems(#"{"broker": 1883}"#) == ["mqtt.json:1:12: broker: expected a URL or a list of URLs, found a number"])
    #expect(problems("[]") == ["mqtt.json:1:1: the configuration must be a JSON object, found an array"])
    #expect(
        problems("{\"broker\": \"mqtt://x\",\n  'host': 1}") == [
            "mqtt.json:2:3: single quotes do not make a key in JSON: use double quotes"
        ])
}

@Test func loadingReadsThePasswordFileAndRefusesOneOthersCanRead() throws {
    let directory = try TemporaryDirectory()
    let password = directory.file("password")
    try "s3cret\n".write(toFile: password, atomically: false, encoding: .utf8)
    chmod(password, 0o640)
    let config = directory.file("mqtt.json")
    try """
    {
      "broker": "mqtt://localhost",
      "username": "lab-1",
      "passwordFile": "\(password)"
    }
    """.write(toFile: config, atomically: false, encoding: .utf8)
    let loaded = try BridgeConfiguration.load(path: config, defaultHost: "h").get()
    #expect(loaded.broker.password == "s3cret")
    chmod(password, 0o644)
    guard case .failure(let problems) = BridgeConfiguration.load(path: config, defaultHost: "h") else {
        Issue.record("a world-readable password file was accepted")
        return
    }
    #expect(problems.description.hasPrefix("\(config):4:19: passwordFile: '\(password)': every user may read"))
    guard case .failure(let missing) = BridgeConfiguration.load(path: directory.file("none.json"), defaultHost: "h")
    else {
        Issue.record("a missing file was accepted")
        return
    }
    #expect(
        missing.description == "\(directory.file("none.json")):1:1: cannot read the file: No such file or directory\n")
}

@Test func theClaimLeaseSettingsAreReadAndChecked() throws {
    let defaults = try parsed(#"{"broker": "mqtt://localhost"}"#)
    #expect(defaults.leaseSeconds == 30 && defaults.renewSeconds == 10)
    let short = try parsed(#"{"broker": "mqtt://localhost", "leaseSeconds": 3, "renewSeconds": 1}"#)
    #expect(short.leaseSeconds == 3 && short.renewSeconds == 1)
    #expect(try parsed(#"{"broker": "mqtt://localhost", "leaseSeconds": 6}"#).renewSeconds == 2)
    #expect(
        problems(#"{"broker": "mqtt://localhost", "leaseSeconds": 5, "renewSeconds": 5}"#) == [
            "mqtt.json:1:67: renewSeconds: 5 is not below leaseSeconds (5): a lease would end between renewals"
        ])
    #expect(
        problems(#"{"broker": "mqtt://localhost", "leaseSeconds": 1}"#) == [
            "mqtt.json:1:48: leaseSeconds: expected a whole number from 2 to 86400"
        ])
}

@Test func theStatusLeaseIsReadAndChecked() throws {
    #expect(try parsed(#"{"broker": "mqtt://x"}"#).statusLeaseSeconds == 20)
    #expect(try parsed(#"{"broker": "mqtt://x", "statusLeaseSeconds": 300}"#).statusLeaseSeconds == 300)
    #expect(
        problems(#"{"broker": "mqtt://x", "statusLeaseSeconds": 1}"#) == [
            "mqtt.json:1:46: statusLeaseSeconds: expected a whole number from 2 to 3600"
        ])
}

@Test func theBrokerMayBeAListOfOneBrokersNodes() throws {
    let nodeA = BrokerAddress(host: "node-a", port: 1883, usesTLS: false)
    let nodeB = BrokerAddress(host: "node-b", port: 1884, usesTLS: false)
    let array = try parsed(#"{"broker": ["mqtt://node-a", "mqtt://node-b:1884"]}"#)
    #expect(array.broker.addresses == [nodeA, nodeB])
    #expect(array.broker.address == nodeA)
    let listed = try parsed(#"{"broker": "mqtt://node-a, mqtt://node-b:1884"}"#)
    #expect(listed.broker.addresses == [nodeA, nodeB])
    #expect(try parsed(#"{"broker": "mqtt://node-a"}"#).broker.addresses == [nodeA])
}

@Test func aBadBrokerListIsNamedAtItsElement() {
    #expect(problems(#"{"broker": []}"#) == ["mqtt.json:1:12: broker: an empty list: name at least one broker URL"])
    #expect(
        problems("{\"broker\": [\"mqtt://a\",\n  \"http://b\"]}") == [
            "mqtt.json:2:3: broker: element 2: 'http://b' is not a broker URL "
                + "(expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT])"
        ])
    #expect(
        problems(#"{"broker": ["mqtt://a", 7]}"#) == [
            "mqtt.json:1:25: broker: element 2: expected a URL string, found a number"
        ])
    #expect(
        problems(#"{"broker": ["mqtt://a", "mqtt://a:1883"]}"#) == [
            "mqtt.json:1:25: broker: element 2: 'mqtt://a:1883': given twice (as mqtt://a:1883)"
        ])
    #expect(
        problems(#"{"broker": ["mqtt://a", "mqtts://b"]}"#) == [
            "mqtt.json:1:25: broker: element 2: 'mqtts://b': mqtt:// and mqtts:// in one list: the list is one "
                + "broker's nodes or listeners, with one login and one set of TLS files"
        ])
    #expect(problems(#"{"broker": "mqtt://a,,mqtt://b"}"#) == ["mqtt.json:1:12: broker: URL 2 of 3 is empty"])
    #expect(
        problems(#"{"broker": {"url": "mqtt://a"}}"#) == [
            "mqtt.json:1:12: broker: expected a URL or a list of URLs, found an object"
        ])
}
