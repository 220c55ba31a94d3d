import AccmonJSON
import AccmonProtocol
import AccmonSys
import Glibc

/// Reading manifest files from disk, for the daemon and `accmon manifest check` alike.
public enum ManifestFiles {
    /// The largest manifest file read.
    public static let maximumFileSize = 4 << 20
    /// The most entries read from the drop-in directory: more is a problem, so that a directory of thousands of
    /// files is refused at once rather than read, parsed and merged at length.
    public static let maximumDropInEntries = 1000

    /// The files to read: `explicit` when given, else the main file then the drop-ins of `directory` in name order.
    /// A drop-in directory that cannot be read is a problem; a missing one is none.
    public static func paths(explicit: [String]?, main: String, directory: String) -> ([String], [ManifestProblem]) {
        if let explicit { return (explicit, []) }
        switch listDirectory(directory) {
        case .success(let names): return ([main] + Manifest.orderedDropIns(names).map { "\(directory)/\($0)" }, [])
        case .failure(let problem): return ([main], [problem])
        }
    }

    /// Reads `paths`; returns what could be read and a problem for each file that could not.
    public static func read(_ paths: [String]) -> (files: [ManifestFile], problems: [ManifestProblem]) {
        var files: [ManifestFile] = []
        var problems: [ManifestProblem] = []
        for path in paths {
            switch readFile(path) {
            case .success(let bytes): files.append(ManifestFile(path: path, contents: bytes))
            case .failure(let problem): problems.append(problem)
            }
        }
        return (files, problems)
    }

    /// Reads one manifest file; an unreadable one is a problem at 1:1.
    ///
    /// A symbolic link is followed (an admin may link a file into place), but the file is opened without blocking
    /// and checked with `fstat` to be a regular file of at most ``maximumFileSize`` bytes before it is read: a FIFO,
    /// a device or a directory is a problem, never a wait or an endless read.
    public static func readFile(_ path: String) -> Result<[UInt8], ManifestProblem> {
        let file: FileDescriptor
        do throws(Errno) {
            file = try FileDescriptor.openForReading(path, followingSymbolicLinks: true)
        } catch {
            return .failure(.unreadable(file: path, reason: error.description))
        }
        defer { file.close() }
        do throws(FileError) {
            return .success(try AtomicFile.readRegularFile(file, path: path, limit: maximumFileSize))
        } catch {
            // A file of the wrong kind or size is named as such; a failed call keeps "cannot read the file".
            guard let errno = error.errno else {
                return .failure(ManifestProblem(.unreadable, file: path, position: .start, reason: error.reason))
            }
            return .failure(.unreadable(file: path, reason: errno.description))
        }
    }

    /// The names in a directory, at most ``maximumDropInEntries``; a missing directory has none.
    static func listDirectory(_ path: String) -> Result<[String], ManifestProblem> {
        func problem(_ reason: String) -> Result<[String], ManifestProblem> {
            .failure(ManifestProblem(.unreadable, file: path, position: .start, reason: reason))
        }
        let directory: DirectoryDescriptor
        do throws(Errno) {
            directory = try DirectoryDescriptor.open(path)
        } catch {
            if error == .noSuchFileOrDirectory { return .success([]) }
            return problem("cannot read the drop-in directory: \(error)")
        }
        defer { directory.close() }
        do throws(Errno) {
            let (names, truncated) = try directory.names(limit: maximumDropInEntries)
            if truncated {
                return problem(
                    "the drop-in directory has more than \(maximumDropInEntries) entries; at most that many are "
                        + "read: merge or remove some")
            }
            return .success(names)
        } catch {
            return problem("cannot read the drop-in directory: \(error)")
        }
    }
}
