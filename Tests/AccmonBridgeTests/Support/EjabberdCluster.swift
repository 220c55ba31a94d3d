import AccmonTestSupport
import Foundation
import Glibc

/// Two ejabberd 23.01 nodes clustered over Erlang distribution on the loopback interface, each with its own MQTT
/// listener and the configuration of docs/MQTT.md §10: the recipe of docs/MQTT.md §11 (two configurations, two node
/// names, `join_cluster`). Each node keeps its own index of retained topics: a subscriber on one is not sent what was
/// retained through the other, while live messages cross and a deletion through either deletes for both.
final class EjabberdCluster: @unchecked Sendable {
    let a: Ejabberd
    let b: Ejabberd

    /// Starts node A, then node B, and has B join A's cluster; `users` registered (password `pw-<user>`), `bridges`
    /// may write under their own names.
    static func start(users: [String] = [], bridges: [String] = []) async throws -> EjabberdCluster {
        let id = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let cookie = "accmon-test-\(id)"
        func options(_ node: String) -> Ejabberd.Options {
            Ejabberd.Options(
                users: users + bridges, bridges: bridges, node: ("accmon\(id)\(node)@localhost", cookie))
        }
        let a = try await Ejabberd.start(options("a"))
        let b = try await Ejabberd.start(options("b"))
        // What `ejabberdctl --node B join_cluster A` does, from a client node of the same cookie.
        let join =
            "R = rpc:call('accmon\(id)b@localhost', ejabberd_admin, join_cluster, [<<\"accmon\(id)a@localhost\">>]), "
            + "io:format(\"~p~n\", [R]), halt()."
        let joined = try await run(
            URL(fileURLWithPath: "/usr/bin/erl"),
            ["-noinput", "-sname", "accmon\(id)ctl@localhost", "-setcookie", cookie, "-eval", join], in: b.directory,
            environment: ["ERL_EPMD_ADDRESS": "127.0.0.1"], timeout: .seconds(60))
        guard joined.stdout.contains("ok") else {
            throw Binaries.LocateError(description: "ejabberd: join_cluster: \(joined)")
        }
        // B restarted its applications with A's database: serving again once a login works.
        let serving = await eventually(timeout: .seconds(30), interval: .milliseconds(100)) {
            let probe = try? await run(  // try?: not yet listening
                URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
                ["-V", "mqttv5", "-p", String(b.port)] + b.clientLogin + ["-t", "probe", "-m", "x"], in: b.directory)
            return probe?.termination == .exited(0)
        }
        guard serving else { throw Binaries.LocateError(description: "ejabberd: node B does not serve after joining") }
        return EjabberdCluster(a: a, b: b)
    }

    private init(a: Ejabberd, b: Ejabberd) {
        self.a = a
        self.b = b
    }
}
