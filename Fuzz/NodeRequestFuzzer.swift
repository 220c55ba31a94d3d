// libFuzzer target for the node helper's requests: bytes → lines → NodeRequest.decode and OpenerScanRequest.decode,
// which accmon-nodes and its opener scanner run on every line their client sends, and the path check every node
// operation starts with. Built and run by scripts/fuzz.sh (`make fuzz`), against the AccmonNodes module.
//
// The input is split at newlines, as the helper's loop splits a client's stream. Besides "does not crash", it checks,
// and traps on a violation:
// - a decoded request re-encodes to one line that decodes to the same request; the operations that need a path,
//   holder or port have them;
// - a refusal is a bad-request reply whose error reads `context: object: reason`, and encodes to one line;
// - NodePath accepts only paths below the directory whose every byte is from udev's name set, split into no empty,
//   `.` or `..` component, and gives back exactly the bytes after the directory.

@testable import AccmonNodes  // NodePath
import FoundationEssentials
import Glibc

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    for line in input.split(separator: 0x0A, omittingEmptySubsequences: false) {
        let bytes = Array(line)
        checkNodeRequest(bytes)
        checkScanRequest(bytes)
        checkPath(bytes)
    }
    return 0
}

private func checkNodeRequest(_ line: [UInt8]) {
    switch NodeRequest.decode(line) {
    case .refused(let reply):
        guard !reply.ok, let error = reply.error, error.code == .badRequest else {
            violated("a refusal that is not a bad-request error: \(reply)", line)
        }
        checkLine(reply.line, line)
    case .request(let request):
        switch request.op {
        case .hold where request.path == nil || request.holder == nil: violated("hold without path or holder", line)
        case .release, .openers, .cut, .openForIO, .state:
            if request.path == nil { violated("\(request.op) without a path", line) }
        case .markPort, .unmarkPort: if request.port == nil { violated("\(request.op) without a port", line) }
        default: break
        }
        let encoded = request.line
        checkLine(encoded, line)
        guard case .request(let again) = NodeRequest.decode(Array(encoded.dropLast())), again == request else {
            violated("a request does not survive re-encoding: \(request)", line)
        }
    }
}

private func checkScanRequest(_ line: [UInt8]) {
    switch OpenerScanRequest.decode(line) {
    case .refused(let reply):
        guard !reply.ok, reply.error?.code == .badRequest, reply.scan == nil else {
            violated("a scan refusal that is not a bad-request error: \(reply)", line)
        }
        checkLine(reply.line, line)
    case .request(let request):
        guard request.files.count <= OpenerScanProtocol.maximumFiles else { violated("too many files taken", line) }
        let encoded = request.line
        checkLine(encoded, line)
        guard case .request(let again) = OpenerScanRequest.decode(Array(encoded.dropLast())), again == request else {
            violated("a scan request does not survive re-encoding: \(request)", line)
        }
    }
}

/// The line as a path below `/dev` (and below a directory with a trailing slash).
private func checkPath(_ line: [UInt8]) {
    let path = String(decoding: line, as: UTF8.self)
    for directory in ["/dev", "/dev/"] {
        guard let checked = try? NodePath(path, below: directory) else { continue }  // try?: a refusal is fine
        let bytes = Array(path.utf8)
        let rest = Array(bytes.dropFirst(5))
        guard bytes.starts(with: Array("/dev/".utf8)), Array(checked.relative.utf8) == rest else {
            violated("a path accepted with another relative part: \(checked.relative)", line)
        }
        guard rest.allSatisfy(NodePath.isAllowed), !rest.contains(0) else { violated("a byte outside the set", line) }
        for component in rest.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            if component.isEmpty || component.elementsEqual([0x2E]) || component.elementsEqual([0x2E, 0x2E]) {
                violated("an empty, '.' or '..' component accepted", line)
            }
        }
    }
}

private func checkLine(_ encoded: [UInt8], _ input: [UInt8]) {
    guard encoded.last == 0x0A, encoded.dropLast().firstIndex(of: 0x0A) == nil else {
        violated("an encoding that is not one line", input)
    }
}

private func violated(_ what: String, _ input: [UInt8]) -> Never {
    // preconditionFailure drops its message in -O builds: say what broke first.
    let hex = input.prefix(256).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    fputs("NodeRequestFuzzer: invariant violated: \(what)\n  input (\(input.count) bytes): \(hex)\n", stderr)
    preconditionFailure(what)
}
