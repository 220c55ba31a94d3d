import AccmonLogging
import AccmonMQTT
import AccmonProtocol
import FoundationEssentials

extension ClaimGateway {
    /// The longest request payload read.
    static let maximumRequestSize = 16_384

    // MARK: Requests from MQTT users

    /// Handles a request `user` published (the topic's level: the broker's ACL pins it to the authenticated user).
    func request(
        from user: String, payload: [UInt8], retained: Bool, properties: MQTTMessageProperties, now: UInt64
    ) {
        // A retained request would be taken again by every bridge that subscribes: never a request.
        if retained {
            logger.debug(.bridgeAccmond, "claims: a retained request of '\(user)' ignored")
            return
        }
        let replies = topics.claimReplies(host: host, user: user)
        // The reply goes under the requester's own replies, whatever response topic it names.
        var replyTopic = replies + "replies"
        if let asked = properties.responseTopic, asked.hasPrefix(replies), asked.count > replies.count,
            !asked.contains("+"), !asked.contains("#")
        {
            replyTopic = asked
        }
        // A request is a few hundred bytes: a bigger one is refused before it is read (it would hold up the loop).
        guard payload.count <= Self.maximumRequestSize else {
            refuse(
                user, nonce: nil, replyTopic, properties.correlationData, "invalid-request",
                "claim request: longer than \(Self.maximumRequestSize) bytes")
            return
        }
        let request: RemoteClaimRequest
        do {
            request = try JSONDecoder().decode(RemoteClaimRequest.self, from: Data(payload))
        } catch {
            refuse(user, nonce: nil, replyTopic, properties.correlationData, "invalid-request", "claim request: \(error)")
            return
        }
        guard properties.expirySeconds != nil else {
            refuse(
                user, nonce: request.nonce, replyTopic, properties.correlationData, "invalid-request",
                "claim request: a request needs an MQTT 5 message expiry interval")
            return
        }
        guard !request.nonce.isEmpty, request.nonce.utf8.count <= 128 else {
            refuse(
                user, nonce: nil, replyTopic, properties.correlationData, "invalid-request",
                "claim request: nonce: 1 to 128 bytes, new for every request")
            return
        }
        guard nonces.admit(request.nonce, of: user) else {
            logger.warning(.bridgeAccmond, "claims: a request of '\(user)' repeats nonce '\(request.nonce)': ignored (a replay)")
            return
        }
        let requester = Requester(
            user: user, nonce: request.nonce, replyTopic: replyTopic, correlation: properties.correlationData)
        switch request.op {
        case .claim: claim(request, requester)
        case .renew:
            let unknown = leases.renew(request.claimIDs ?? [], of: user, now: now)
            var reply = RemoteClaimReply(kind: .renewed, host: host, nonce: request.nonce)
            reply.unknown = unknown
            reply.leaseSeconds = configuration.leaseSeconds
            publish(reply, to: replyTopic, correlation: requester.correlation)
        case .release:
            guard let claimID = request.claimIDs?.first, leases.lease(claimID, of: user) != nil else {
                refuse(
                    user, nonce: request.nonce, replyTopic, requester.correlation, "no-such-claim",
                    "release: no claim of yours on host '\(host)' is \(request.claimIDs?.first ?? "named")")
                return
            }
            guard accmond.isLive else {
                refuse(user, nonce: request.nonce, replyTopic, requester.correlation, "unavailable", "release: accmond is unreachable; the lease ends it")
                return
            }
            let id = accmond.send(.release(ReleaseRequest(.claim(claimID), remoteUser: user)))
            pending[id] = .release(requester, claimID: claimID)
        }
    }

    private func claim(_ request: RemoteClaimRequest, _ requester: Requester) {
        let target: ClaimRequest.Target
        if let connections = request.connections, !connections.isEmpty {
            target = .connections(connections.map { ConnectionID(rawValue: $0) })
        } else {
            target = .matching(request.filter ?? .all, serial: request.serial, count: request.count ?? 1)
        }
        guard accmond.isLive else {
            refuse(
                requester.user, nonce: requester.nonce, requester.replyTopic, requester.correlation, "unavailable",
                "claim: accmond on host '\(host)' is unreachable")
            return
        }
        let id = accmond.send(
            .claim(
                ClaimRequest(
                    target, wait: request.wait ?? false, reason: request.reason ?? "", preserve: true,
                    remoteUser: requester.user)))
        pending[id] = .claim(requester)
    }

    func refuse(_ user: String, nonce: String?, _ topic: String, _ correlation: [UInt8]?, _ code: String, _ message: String) {
        var reply = RemoteClaimReply(kind: .error, host: host, nonce: nonce)
        reply.code = code
        reply.message = message
        publish(reply, to: topic, correlation: correlation)
    }

    // MARK: accmond

    func handle(_ events: [ClaimSessionLink.Event], now: UInt64) {
        for event in events {
            switch event {
            case .session(let restored):
                logger.info(.bridgeAccmond, "claims: accmond: \(restored ? "session restored" : "new session")")
                pending = pending.filter { if case .adopt = $0.value { false } else { true } }
                // Claims made before (by this run, before accmond restarted, or by an earlier run) are taken up.
                let id = accmond.send(.claims)
                pending[id] = .adopt
                announceIfReady()
            case .lost:
                view = nil
                pending = [:]
            case .claims(let claims, let accessories):
                var fresh: [ConnectionID: (accessoryID: String, summary: ClaimSummary)] = [:]
                for (connection, summary) in claims {
                    guard let accessory = accessories.first(where: { $0.connectionID == connection }) else { continue }
                    fresh[connection] = (accessory.accessoryID, summary)
                }
                view = fresh
                reconcile()
            case .update(let update):
                if view == nil { continue }
                view![update.connectionID] = update.claim.map { (update.accessoryID, $0) }
                reconcile()
            case .notice(let notice):
                forward(notice)
            case .reply(let id, let message):
                guard let waiting = pending.removeValue(forKey: id) else { continue }
                answer(waiting, message, now: now)
            }
        }
    }

    private func forward(_ notice: ClaimNotice) {
        guard let lease = leases.leases[notice.claimID] else { return }
        guard let kind = RemoteClaimReply.Kind(rawValue: notice.kind.rawValue) else { return }
        var reply = RemoteClaimReply(kind: kind, host: host, claimID: notice.claimID)
        reply.by = notice.by
        reply.reason = notice.reason
        reply.accessories = notice.claim?.accessories ?? notice.accessory.map { [$0] }
        reply.nodes = notice.claim?.nodes
        switch notice.kind {
        case .broken, .lost, .expired, .cancelled: leases.remove(notice.claimID)
        default: break
        }
        publish(reply, to: lease.replyTopic, correlation: lease.correlation)
    }

    private func answer(_ waiting: Pending, _ message: ServerMessage, now: UInt64) {
        switch (waiting, message) {
        case (.claim(let requester), .claim(_, let info)):
            leases.start(
                LeaseBook.Lease(
                    claimID: info.claimID, user: requester.user, token: info.token, replyTopic: requester.replyTopic,
                    correlation: requester.correlation, renewedAt: now))
            var reply = RemoteClaimReply(
                kind: info.state == .waiting ? .waiting : .held, host: host, nonce: requester.nonce,
                claimID: info.claimID)
            reply.accessories = info.accessories
            reply.nodes = info.nodes
            reply.position = info.position
            reply.holders = info.blockers
            reply.renewSeconds = configuration.renewSeconds
            reply.leaseSeconds = configuration.leaseSeconds
            logger.info(
                .bridgeAccmond, "claims: \(info.claimID) \(info.state.rawValue) for MQTT user '\(requester.user)'")
            publish(reply, to: requester.replyTopic, correlation: requester.correlation)
        case (.claim(let requester), .error(_, let error)), (.release(let requester, _), .error(_, let error)):
            var reply = RemoteClaimReply(kind: .error, host: host, nonce: requester.nonce)
            reply.code = error.code.rawValue
            reply.message = error.message
            reply.holders = error.holders
            publish(reply, to: requester.replyTopic, correlation: requester.correlation)
        case (.release(let requester, let claimID), _):
            leases.remove(claimID)
            publish(
                RemoteClaimReply(kind: .released, host: host, nonce: requester.nonce, claimID: claimID),
                to: requester.replyTopic, correlation: requester.correlation)
        case (.resume(let claimID), .error):
            // Not taken up: it ended meanwhile (or it is this session's already, which the list below shows).
            logger.debug(.bridgeAccmond, "claims: \(claimID) not taken up again")
        case (.adopt, .claims(_, let list)):
            adopt(list, now: now)
        default:
            break
        }
    }

    /// After a session began: every remote claim and waiter accmond holds gets a lease (a fresh full one: the bridge
    /// does not know when it was last renewed), those with a token are taken up, and leases of claims that ended
    /// meanwhile are dropped with a `lost` notice.
    private func adopt(_ list: ClaimList, now: UInt64) {
        var remote: [(String, String)] = list.claims.filter(\.holder.remote).map { ($0.claimID, $0.holder.user) }
        remote += list.waiters.filter(\.party.remote).map { ($0.claimID, $0.party.user) }
        let known = Set(remote.map(\.0))
        for (claimID, lease) in leases.leases where !known.contains(claimID) {
            leases.remove(claimID)
            var notice = RemoteClaimReply(kind: .lost, host: host, claimID: claimID)
            notice.reason = "accmond no longer holds it"
            publish(notice, to: lease.replyTopic, correlation: lease.correlation)
        }
        for (claimID, user) in remote {
            if let lease = leases.leases[claimID] {
                if let token = lease.token {
                    let id = accmond.send(.claim(ClaimRequest(.resume(token: token), preserve: true, remoteUser: user)))
                    pending[id] = .resume(claimID: claimID)
                }
                continue
            }
            leases.start(
                LeaseBook.Lease(
                    claimID: claimID, user: user, token: nil,
                    replyTopic: topics.claimReplies(host: host, user: user) + "replies", correlation: nil,
                    renewedAt: now))
        }
        leases.refreshAll(now: now)
        logger.info(.bridgeAccmond, "claims: \(remote.count) remote claims and waiters held in accmond, with fresh leases")
    }
}
