import AccmonSys
import Synchronization

/// Messages other threads hand to the broker loop: posting one wakes the loop through its eventfd, and the loop
/// takes them all at its next turn, oldest first.
final class Mailbox<Message: Sendable>: Sendable {
    private let inbox = Mutex<[Message]>([])
    let wakeup: WakeupEvent

    init(wakeup: WakeupEvent) { self.wakeup = wakeup }

    /// Queues `messages` for the loop. Safe from any thread.
    func post(_ messages: [Message]) {
        inbox.withLock { $0.append(contentsOf: messages) }
        wakeup.signal()
    }

    /// The queued messages, oldest first; the inbox is left empty. Asked at every loop turn and every request, so an
    /// empty inbox costs no allocation (emptying a shared array while keeping its capacity would allocate a new one).
    func take() -> [Message] {
        inbox.withLock { inbox in
            guard !inbox.isEmpty else { return [] }
            defer { inbox = [] }
            return inbox
        }
    }
}
