import AccmonClient
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// Registering a unit for relaunch in `hello`, against the real daemon and `accmon watch`, as root and as `nobody`:
/// the manifest decides who may register which template; the registration is kept with the preserved session, in
/// the state file. (Starting the unit needs systemd: packaging/systemd-test/checks/93-relaunch.sh.)
@Suite(.serialized, .timeLimit(.minutes(2))) struct RelaunchRegistrationTests {
    static let manifest = #"""
        {"version": 1,
         "relaunch": [{"unit": "accmon-viewer@.service", "access": {"users": [65534]}}],
         "accessories": [{"name": "all", "match": {"id": "*:*"}, "access": {"users": [65534]}}]}
        """#

    @Test func aListedUserRegistersAndTheRegistrationIsKeptWithThePreservedSession() async throws {
        let setup = try await ManifestEnforcementTests.Setup(manifest: Self.manifest)
        let accmon = try Binaries.accmon.path
        let watch = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            [
                "--reuid=65534", "--regid=65534", "--clear-groups", accmon, "--socket", setup.socketPath, "watch",
                "--json", "--restore-id", "viewer", "--relaunch", "accmon-viewer@.service",
            ], name: "watch", directory: setup.directory)
        let started = await eventually { watch.stdout.contains("\"type\":\"session\"") }
        #expect(started, "\(watch.stderr)")
        watch.send(SIGKILL)
        _ = await watch.waitForExit()
        let statePath = setup.directory.file("state/state.json")
        let saved = await eventually {
            let state = (try? String(contentsOfFile: statePath, encoding: .utf8)) ?? ""  // try?: not written yet
            return state.contains("\"relaunch\":\"accmon-viewer@.service\"") && state.contains("\"restoreID\":\"viewer\"")
        }
        #expect(saved, "the state file keeps the registration with the session")
        #expect(setup.daemon.stderr.contains("relaunch registered: accmon-viewer@65534.service"), "\(setup.daemon.stderr)")
    }

    @Test func aUserTheManifestDoesNotListIsRefused() async throws {
        let setup = try await ManifestEnforcementTests.Setup(
            manifest: Self.manifest.replacingOccurrences(of: "[65534]}}],", with: "[\"root\"]}}],"))
        let result = try await setup.accmon(
            ["watch", "--json", "--restore-id", "viewer", "--relaunch", "accmon-viewer@.service"], asNobody: true)
        #expect(result.termination == .exited(77), "\(result)")
        #expect(
            result.stderr.contains(
                "hello: relaunch: uid 65534 may not register 'accmon-viewer@.service': the manifest's relaunch list"),
            "\(result)")
        let other = try await setup.accmon(
            ["watch", "--json", "--restore-id", "viewer", "--relaunch", "accmon-other@.service"], asNobody: false)
        #expect(other.termination == .exited(77), "root too needs the template in the list: \(other)")
    }

    @Test(arguments: [
        (["--relaunch", "accmon-viewer@.service"], "--relaunch needs --restore-id"),
        (["--restore-id", "r", "--relaunch", "rescue.target"], "--relaunch: 'rescue.target' is refused"),
        (["--restore-id", "r", "--relaunch", "accmon-viewer@1000.service"], "is refused: not a template unit"),
    ])
    func usageErrorsExit64(_ arguments: [String], _ message: String) async throws {
        let directory = try TemporaryDirectory()
        let result = try await run(try Binaries.accmon, ["watch"] + arguments, in: directory)
        #expect(result.termination == .exited(64), "\(result)")
        #expect(result.stderr.contains(message), "\(result)")
    }
}
