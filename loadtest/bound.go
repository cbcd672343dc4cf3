package main

import "time"

// What limited a steady run (result.Bound).
const (
	boundGateway  = "gateway"  // the readers fell behind the log: the delivery side could not keep up
	boundProducer = "producer" // the readers kept up with everything the producers wrote, short of the target or as fast as they went
	boundNone     = "none"     // the producers met the target rate and the readers kept up: neither limit was reached
)

// lagLimit is the catch-up beyond which the readers count as fallen behind. A reader that keeps up is a
// latency behind the log's end when producing stops, milliseconds to a few hundred on a busy machine; one that
// falls behind is further behind the longer the run, seconds within a few seconds of producing.
const lagLimit = time.Second

// rateShortfall is the share of the target rate below which the producers count as short of it: a run that
// keeps its rate acknowledges it within a percent or two (the producers' last records and their flush fall
// in the measured time too).
const rateShortfall = 0.95

// boundOf names what limited a steady run at rate (0: as fast as the producers go) from the acknowledged
// produce rate and the readers' catch-up: how long after producing stopped, every record acknowledged, the
// last reader had every record (caughtUp false: one never had them within the drain timeout).
//
// The readers fell behind when the catch-up is above lagLimit: then the gateway, or the tool's own readers,
// which share the machine with it, did not deliver as fast as the producers wrote, whatever the target, and
// the bound is the gateway. Otherwise the readers kept up, and the bound is the producers when they fell short
// of the target or had no target; none when they met it. The catch-up, not the readers' latency, is the
// measure: the latency starts when a record is handed to its producer's client and includes the wait there and
// in Kafka's produce, which is the producers' side; the catch-up starts once Kafka has acknowledged every
// record.
func boundOf(rate, producedPerSec float64, catchUp time.Duration, caughtUp bool) string {
	switch {
	case !caughtUp || catchUp > lagLimit:
		return boundGateway
	case rate == 0 || producedPerSec < rateShortfall*rate:
		return boundProducer
	default:
		return boundNone
	}
}

// setCatchUpTargets gives each client's tracker ends (the topic's next offset per partition once producing
// stopped), so that it stamps the moment the client has every record below them.
func setCatchUpTargets(cs []*client, ends []int64) {
	now := time.Now()
	for _, c := range cs {
		c.tr.setTarget(ends, now)
	}
}

// catchUp returns how long after t1 the last client that did not fail had every record below its target
// (setCatchUpTargets), and whether every one had; when one had not, it returns the time from t1 to now.
func catchUp(cs []*client, t1, now time.Time) (time.Duration, bool) {
	var last time.Duration
	for _, c := range cs {
		if c.failed.Load() {
			continue // counted in conn_errors, and its stream ended where it failed
		}
		at := c.reachedAt()
		if at.IsZero() {
			return now.Sub(t1), false
		}
		last = max(last, at.Sub(t1))
	}
	return last, true
}
