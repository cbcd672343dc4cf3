package replay

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A resume's first fetch needs its client's metadata of the topic (which broker leads the partition) and the
// client's fetch connection to that broker. Cold, that is a metadata round trip and a dial (with SASL and TLS,
// several) before the fetch, on each of the fetch clients, for the first resume of every topic after start
// and again for any resume a minute after the metadata was last asked for. KeepWarm does that work ahead of
// the resumes, in the background, so that a resume pays only its fetches.

// warmEvery is how often KeepWarm refreshes: well within the minute a fetch takes cached metadata for.
const warmEvery = 20 * time.Second

// KeepWarm keeps every fetch client's metadata of the topics fresh and its fetch connections to their
// leaders open, until ctx ends: at once, then every warmEvery. topics returns the topics to keep warm.
func (l *KafkaLog) KeepWarm(ctx context.Context, topics func() []string) {
	tick := time.NewTicker(warmEvery)
	defer tick.Stop()
	for {
		l.Warm(ctx, topics())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Warm refreshes every fetch client's metadata of topics and opens its fetch connection to each of their
// leaders (an empty fetch, which a broker answers at once). Failures are left to the resumes, which retry
// with fresh metadata.
func (l *KafkaLog) Warm(ctx context.Context, topics []string) {
	if len(topics) == 0 {
		return
	}
	for _, cl := range l.cls {
		req := kmsg.NewPtrMetadataRequest()
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
		md, err := cl.RequestCachedMetadata(ctx, req, time.Millisecond)
		if err != nil {
			continue
		}
		leaders := map[int32]bool{}
		for _, t := range md.Topics {
			for _, p := range t.Partitions {
				if p.Leader >= 0 {
					leaders[p.Leader] = true
				}
			}
		}
		for id := range leaders {
			f := kmsg.NewPtrFetchRequest()
			f.ReplicaID = -1
			f.SessionEpoch = -1
			f.MaxBytes = 1
			f.MaxWaitMillis = 0 // answered at once: a resume's fetch on this connection must not wait behind it
			_, _ = cl.Broker(int(id)).Request(ctx, f)
		}
	}
}
