import AccmonMQTT
import AccmonSys
import Foundation
import Glibc
import Synchronization

/// Bridges that answer a reader's census (docs/MQTT.md §5) without being bridges: one MQTT connection on a thread of
/// its own answers every request for each of `hosts`, when `schedule` says, and records the requests. Their hosts
/// publish nothing retained: a reader finds them by the census alone, as a cluster node's reader finds the hosts
/// whose bridge is on another node.
final class CensusAnswerer: Sendable {
    /// When, in seconds after a request, each host answers it (`nil`: not at all).
    typealias Schedule = @Sendable (_ request: Census.Request, _ host: Int) -> Double?

    let hosts: [String]
    private let schedule: Schedule
    private let requests = Mutex<[Census.Request]>([])
    private let stopped = Atomic<Bool>(false)
    private let done = Mutex<Bool>(false)
    /// Whether the subscription was answered, or why not.
    private let ready = Mutex<Result<Void, MQTTError>?>(nil)

    /// The requests received, in order.
    var received: [Census.Request] { requests.withLock { $0 } }

    init(broker: Mosquitto, hosts: [String], schedule: @escaping Schedule) async throws {
        self.hosts = hosts
        self.schedule = schedule
        let settings = try BrokerSettings(address: BrokerAddress.parse(broker.url).get(), keepAliveSeconds: 30)
        let client = try MQTTClient(clientID: "census-answerer-\(UInt32.random(in: 0...UInt32.max))", settings: settings)
        try client.connect(address: settings.address, keepAliveSeconds: 30)
        nonisolated(unsafe) let owned = client
        Thread { [self] in self.run(owned) }.start()
        let deadline = ContinuousClock.now + .seconds(10)
        while ready.withLock({ $0 }) == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        guard case .success = ready.withLock({ $0 }) else {
            stop()
            throw MQTTError(.unreachable, "census answerer: not subscribed: \(String(describing: ready.withLock { $0 }))")
        }
    }

    func stop() {
        stopped.store(true, ordering: .sequentiallyConsistent)
        while !done.withLock({ $0 }) { usleep(1000) }
    }

    private struct Owed {
        var due: UInt64
        var host: Int
        var responseTopic: String
        var correlation: [UInt8]?
    }

    private func run(_ client: MQTTClient) {
        defer {
            client.disconnect()
            done.withLock { $0 = true }
        }
        var subscription: Int32?
        var owed: [Owed] = []
        while !stopped.load(ordering: .sequentiallyConsistent) {
            guard let socket = client.socket else {
                ready.withLock { $0 = $0 ?? .failure(MQTTError(.unreachable, "closed")) }
                return
            }
            let now = monotonicNanoseconds()
            var next: Int32 = 20
            if let due = owed.map(\.due).min() {
                let milliseconds: UInt64 = due <= now ? 0 : (due - now) / 1_000_000 + 1
                next = Int32(min(milliseconds, 20))
            }
            var wait = pollfd(fd: socket.rawValue, events: Int16(POLLIN | (client.wantsWrite ? POLLOUT : 0)), revents: 0)
            _ = poll(&wait, 1, next)
            if wait.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { client.read() }
            if wait.revents & Int16(POLLOUT) != 0 { client.write() }
            client.housekeeping()
            let after = monotonicNanoseconds()
            for event in client.takeEvents() {
                switch event {
                case .connected(nil):
                    subscription = try? client.subscribe(["accmon/$census/+"])  // try?: no SUBACK is a failure below
                case .connected(let error?), .disconnected(let error?):
                    ready.withLock { $0 = $0 ?? .failure(error) }
                    return
                case .subscribed(let id, _) where id == subscription:
                    ready.withLock { $0 = .success(()) }
                case .message(_, let payload, _, let properties):
                    let request = Census.Request.decode(payload)
                    requests.withLock { $0.append(request) }
                    guard let responseTopic = properties.responseTopic else { continue }
                    for host in hosts.indices {
                        guard let delay = schedule(request, host) else { continue }
                        owed.append(
                            Owed(
                                due: after + UInt64(delay * 1e9), host: host, responseTopic: responseTopic,
                                correlation: properties.correlationData))
                    }
                default: break
                }
            }
            let now2 = monotonicNanoseconds()
            for answer in owed where answer.due <= now2 {
                let name = hosts[answer.host]
                let status = HostStatus(
                    state: .online, host: name, machineID: "machine-\(name)", runID: "run", since: 1, bridge: "0.1.0",
                    retained: ["accessories": 0], lease: 600)
                let payload = Census.Answer(host: name, accessories: 0, digest: String(repeating: "0", count: 16), status: status)
                    .payload
                _ = try? client.publish(  // try?: a failed publication ends the connection, seen above
                    topic: answer.responseTopic, payload: payload, retained: false, qos: 0,
                    properties: MQTTMessageProperties(correlationData: answer.correlation))
            }
            owed.removeAll { $0.due <= now2 }
            if client.wantsWrite { client.write() }
        }
    }
}
