import AccmonJSON
import AccmonProtocol
import AccmonSys
import Glibc

/// Reading manifest files from disk, for the daemon and `accmon manifest check` alike.
public enum ManifestFiles {
    /// The largest manifest file read.
    public static let maximumFileSize = 4 << 20

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
    public static func readFile(_ path: String) -> Result<[UInt8], ManifestProblem> {
        func failure(_ reason: String) -> Result<[UInt8], ManifestProblem> {
            .failure(.unreadable(file: path, reason: reason))
        }
        var descriptor: Int32
        repeat { descriptor = open(path, O_RDONLY | O_CLOEXEC) } while descriptor < 0 && errno == EINTR
        guard descriptor >= 0 else { return failure(Errno.current.description) }
        let file = FileDescriptor(rawValue: descriptor)
        defer { file.close() }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return failure(Errno.current.description) }
        if status.st_mode & S_IFMT == S_IFDIR { return failure(Errno(rawValue: EISDIR).description) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { buffer in
                Glibc.read(descriptor, buffer.baseAddress, buffer.count)
            }
            if count < 0 {
                if errno == EINTR { continue }
                return failure(Errno.current.description)
            }
            if count == 0 { return .success(bytes) }
            bytes += chunk[..<count]
            if bytes.count > maximumFileSize { return failure("larger than \(maximumFileSize >> 20) MiB") }
        }
    }

    /// The names in a directory; a missing directory has none.
    static func listDirectory(_ path: String) -> Result<[String], ManifestProblem> {
        guard let directory = opendir(path) else {
            if errno == ENOENT { return .success([]) }
            return .failure(
                ManifestProblem(
                    .unreadable, file: path, position: .start,
                    reason: "cannot read the drop-in directory: \(Errno.current)"))
        }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return .success(names)
    }
}
