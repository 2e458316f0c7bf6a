import Logging
import ReachabilityCore
import ReachabilityLoop

extension NetworkObserver {
    /// Follows how the namespace's TCP connections end (`ConnectionOutcomeMonitor`) and, when
    /// they say that nothing gets out (`UpstreamEvidence`: `destinations` distinct destinations
    /// unanswered within `window` µs, nothing answered), asks NetworkManager to check its
    /// connectivity now, and again at the first connection answered after that. Its verdict
    /// (`limited` for a dead upstream) comes back as any change of NetworkManager's. Alone the
    /// evidence never makes the network limited. The daemon's: a library's process has no
    /// business listening to every connection of the machine.
    public func followConnectionOutcomes(destinations: Int, window: Int64, askInterval: Int64) {
        upstream = UpstreamEvidence(destinations: destinations, window: window, askInterval: askInterval)
        updateConnectionOutcomes()
    }

    /// Listens while there is a check to ask (NetworkManager used, and checking connectivity),
    /// and only then: every TCP socket's end costs the kernel a message to each listener, which
    /// a server closing thousands a second would pay for nothing. Called with every reading of
    /// the facts.
    func updateConnectionOutcomes() {
        guard upstream != nil else { return }
        let wanted = usedNetworkManager?.checksConnectivity == true
        if wanted && connectionOutcomes == nil {
            do {
                connectionOutcomes = try ConnectionOutcomeMonitor { [unowned self] outcome in self.took(outcome) }
                logger.info("following how TCP connections end: connections nobody answers make NetworkManager check its connectivity at once")
            } catch {
                logger.warning("cannot follow how TCP connections end (\(error)): a dead upstream is found only at NetworkManager's own interval")
                upstream = nil
            }
        } else if !wanted && connectionOutcomes != nil {
            connectionOutcomes = nil
            logger.info("not following how TCP connections end: NetworkManager does not check connectivity here")
        }
    }

    private func took(_ outcome: ConnectionOutcome) {
        let ask = upstream?.record(outcome, at: MonotonicClock.microseconds())
        connectionOutcomes?.passesAnswered = upstream?.wantsAnswered ?? false
        guard let ask else { return }
        let why = switch ask {
        case .nothingGetsOut(let count): "connections to \(count) destinations went unanswered"
        case .somethingGotOut: "a connection was answered again"
        }
        guard let networkManager = usedNetworkManager, networkManager.checksConnectivity else { return }
        logger.notice("\(why); asking NetworkManager to check its connectivity now")
        networkManager.checkConnectivity()
    }
}
