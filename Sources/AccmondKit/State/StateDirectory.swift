import AccmonLogging
import AccmonSys
import Glibc

/// The state directory, opened once and checked before accmond keeps anything in it; every later operation is by
/// name in the directory opened (``DirectoryDescriptor``).
///
/// accmond refuses a directory it cannot trust or cannot use, with the path and the reason, rather than run on:
/// - **writable by others than its owner**, or **owned by someone else** than accmond's user or root: whoever else
///   may write there could plant a link or a file for accmond to write through or read (OpenSSH's `StrictModes`).
///   The check is on the directory opened (`fstat`), after following the path's links: under systemd's
///   `DynamicUser=`, `/var/lib/accmon` is a link to `/var/lib/private/accmon`, and a link's own mode says nothing.
/// - **not writable** (a read-only file system, a directory of another user): found at start by creating, syncing
///   and removing a probe file, not at the first save. A daemon that cannot save would start numbering again at 1
///   after its next restart, and lose every preserved session.
struct StateDirectory: Sendable {
    /// The state file's name in the directory.
    static let stateFileName = "state.json"
    /// How many entries are looked at for temporaries left by a crash.
    private static let maximumEntriesScanned = 4096

    let directory: DirectoryDescriptor
    var path: String { directory.path }

    /// Creates `path` (mode 0700) when it does not exist, opens it, checks it, and removes temporaries a crash left.
    ///
    /// - Throws: a ``DaemonError`` naming the path and what is wrong, with what to do.
    static func open(_ path: String, logger: Logger) throws(DaemonError) -> StateDirectory {
        let advice = "choose another with --state-dir"
        do throws(Errno) {
            try DirectoryDescriptor.create(path, mode: 0o700)
        } catch {
            throw DaemonError(description: "'\(path)': cannot create it: \(error); \(advice)")
        }
        let directory: DirectoryDescriptor
        do throws(Errno) {
            directory = try DirectoryDescriptor.open(path)
        } catch {
            throw DaemonError(description: "'\(path)': cannot open it as a directory: \(error); \(advice)")
        }
        do throws(DaemonError) {
            try check(directory, advice: advice)
            try probe(directory, advice: advice)
        } catch {
            directory.close()
            throw error
        }
        let state = StateDirectory(directory: directory)
        state.removeLeftoverTemporaries(logger: logger)
        return state
    }

    /// Refuses a directory someone else than accmond's user (or root) may write in.
    private static func check(_ directory: DirectoryDescriptor, advice: String) throws(DaemonError) {
        let path = directory.path
        let status: FileStatus
        do throws(Errno) {
            status = try directory.status()
        } catch {
            throw DaemonError(description: "'\(path)': fstat: \(error)")
        }
        let user = geteuid()
        if status.owner != user && status.owner != 0 {
            throw DaemonError(
                description: "'\(path)': owned by uid \(status.owner), neither accmond's user (uid \(user)) nor root, "
                    + "who could plant files there for accmond to write through or read; chown it to uid \(user) or "
                    + advice)
        }
        if status.isWritableByGroupOrOthers {
            throw DaemonError(
                description: "'\(path)': writable by others than its owner (mode \(status.octalPermissions)), who "
                    + "could plant files there for accmond to write through or read; make it writable by its owner "
                    + "only (chmod go-w '\(path)') or " + advice)
        }
    }

    /// Creates, syncs and removes a file, as every save will: a directory accmond cannot write in is found now.
    private static func probe(_ directory: DirectoryDescriptor, advice: String) throws(DaemonError) {
        let refusal = { (error: String) in
            DaemonError(
                description: "'\(directory.path)': cannot write in it (\(error)), and without saving its state "
                    + "accmond would number events from 1 again after a restart; make it writable by uid \(geteuid()) "
                    + "or " + advice)
        }
        let name: String
        do throws(FileError) {
            let (created, file) = try AtomicFile.createTemporary(for: stateFileName, in: directory)
            name = created
            defer { file.close() }
            do throws(Errno) {
                try file.writeAll([0x0A])
                try file.synchronize()
            } catch {
                try? directory.remove(created)  // try?: the write's error is the one to report
                throw FileError(operation: "write", path: directory.pathOf(created), errno: error)
            }
        } catch {
            throw refusal("\(error)")
        }
        do throws(Errno) {
            try directory.remove(name)
            try directory.synchronize()
        } catch {
            throw refusal("removing '\(directory.pathOf(name))': \(error)")
        }
    }

    /// Removes the temporaries of the state file and the history file that a crash left behind (and whatever else
    /// was planted under such a name: a link is removed, never followed).
    private func removeLeftoverTemporaries(logger: Logger) {
        let prefixes = [Self.stateFileName, HistoryFile.name].map(AtomicFile.temporaryPrefix)
        let names: [String]
        do throws(Errno) {
            names = try directory.names(limit: Self.maximumEntriesScanned).names
        } catch {
            logger.warning(.state, "state: '\(path)': cannot list it to remove leftover temporaries: \(error)")
            return
        }
        for name in names where prefixes.contains(where: name.hasPrefix) {
            do throws(Errno) {
                try directory.remove(name)
                logger.notice(.state, "state: removed '\(directory.pathOf(name))', a temporary left by a crash")
            } catch {
                logger.warning(
                    .state, "state: cannot remove the leftover temporary '\(directory.pathOf(name))': \(error)")
            }
        }
    }
}
