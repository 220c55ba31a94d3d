import AccmonNodes
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// The model against the real kernel: random owners, groups, modes and ACLs on real files, opened by real other
/// users (setpriv). Runs as root (chown, setpriv), as `make test` does.
@Suite
struct KernelAccessTests {
    @Test func theAccessCheckIsTheKernels() async throws {
        let directory = try traversableDirectory()
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        var states: [NodeState] = []
        var files: [String] = []
        for index in 0..<160 {
            let state = random.nodeState()
            let path = directory.file("f\(index)")
            #expect(FileManager.default.createFile(atPath: path, contents: nil))
            try set(path, to: state)
            #expect(try await observedState(path, in: directory) == state, "seed \(seed): getfacl disagrees")
            states.append(state)
            files.append(path)
        }
        for _ in 0..<10 {
            let subject = random.subject()
            let found = try await KernelProbe.opens(uid: subject.uid, gids: subject.gids, files: files, in: directory)
            for (index, state) in states.enumerated() {
                let model = KernelProbe.Opens(state, uid: subject.uid, gids: subject.gids)
                #expect(
                    found[index] == model,
                    "seed \(seed): \(state) opened by \(subject): kernel \(found[index]), model \(model)")
            }
        }
    }

    /// Held by a keeper, each file opens for its holder as it did before (read and write with grant), and for no
    /// other user: the other members of its group among them.
    @Test func enforcementHoldsInTheKernel() async throws {
        let directory = try traversableDirectory()
        let nodes = directory.file("nodes")
        try FileManager.default.createDirectory(atPath: nodes, withIntermediateDirectories: false)
        let keeper = try NodeKeeper(policy: .beneath(nodes), stateDirectory: directory.file("state"))
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        var held: [(path: String, before: NodeState, holder: NodeHolder)] = []
        for index in 0..<120 {
            let state = random.nodeState()
            let path = "\(nodes)/f\(index)"
            #expect(FileManager.default.createFile(atPath: path, contents: nil))
            try set(path, to: state)
            let holder = random.holder()
            let outcome = try keeper.hold(path, holder: holder)
            #expect(outcome.change == .applied && outcome.original == state, "seed \(seed)")
            #expect(try await observedState(path, in: directory) == state.enforced(holder: holder), "seed \(seed)")
            held.append((path, state, holder))
        }
        let files = held.map(\.path)
        var subjects = Array(Set(held.map(\.holder.uid))).filter { $0 != 0 }.map { uid in
            held.first { $0.holder.uid == uid }!.holder
        }
        subjects += (0..<4).map { _ in
            let subject = random.subject()
            return NodeHolder(uid: subject.uid, gids: subject.gids)
        }
        for subject in subjects {
            let found = try await KernelProbe.opens(uid: subject.uid, gids: subject.gids, files: files, in: directory)
            for (index, node) in held.enumerated() {
                var expected = KernelProbe.Opens(read: false, write: false, both: false)
                if node.holder.uid == subject.uid {
                    // What the holder kept depends on its groups: compare only with the probe of the same groups.
                    guard Set(node.holder.gids) == Set(subject.gids) else { continue }
                    let kept =
                        node.holder.grant ? .readWrite : node.before.access(uid: subject.uid, gids: subject.gids)
                    expected = KernelProbe.Opens(
                        read: kept.contains(.read), write: kept.contains(.write), both: kept == .readWrite)
                }
                #expect(
                    found[index] == expected,
                    "seed \(seed): \(node.before) held by \(node.holder), opened by \(subject)")
            }
        }
        for node in held {
            let outcome = try keeper.release(node.path)
            #expect(outcome.result == .restored && outcome.restored == node.before && !outcome.rewriteAdopted)
            #expect(try await observedState(node.path, in: directory) == node.before, "seed \(seed): not restored")
        }
        #expect(keeper.held().nodes.isEmpty)
    }
}
