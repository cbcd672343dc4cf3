package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// prefill writes --prefill-records records before the readers connect, a backlog for resumes to read back:
// record i to partition i mod n (n the topic's partitions), so that every partition holds its even share of
// it, as the waves' positions spread their records behind evenly (live records go by their keys' hash, which
// leaves some partitions short). They are handed to a Kafka client of their own as fast as it takes them: it
// batches what waits and keeps several produce requests in flight (five a broker, with the idempotent
// producer it uses by default), so the backlog is written as fast as Kafka acknowledges it. Their values
// carry no send time (prefillValue): a reader that connects while the gateway is still reading them gets them
// live, and their age is not a latency. They are not counted as produced; the result has them as prefilled.
func (r *runner) prefill(ctx context.Context) error {
	n := r.cfg.PrefillRecords
	if n == 0 {
		return nil
	}
	parts, err := r.k.partitions(ctx)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(r.cfg.Brokers...),
		kgo.DefaultProduceTopic(r.k.topic),
		kgo.ClientID("ssegate-loadtest"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(100_000),
	)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	t0 := time.Now()
	var st produceStats
	done := func(_ *kgo.Record, err error) { st.done(err) }
	for i := range n {
		cl.Produce(ctx, &kgo.Record{
			Partition: int32(i % parts),
			Key:       []byte("p-" + strconv.Itoa(i%r.cfg.Keys)),
			Value:     prefillValue(int64(i), r.cfg.Size),
		}, done)
	}
	err = cl.Flush(ctx)
	r.res.Prefilled, r.res.PrefillSeconds = st.acked.Load(), time.Since(t0).Seconds()
	if err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	if f := st.failed.Load(); f > 0 {
		return fmt.Errorf("prefill: %d of %d records failed: %w", f, n, *st.lastErr.Load())
	}
	return nil
}

// prefillValue is the value of prefill record n: JSON {"prefill":<n>,"pad":"..."} padded with "x" to size
// bytes, like the live records but without their send time, so that sendTime passes over it.
func prefillValue(n int64, size int) []byte {
	b := make([]byte, 0, max(size, 48))
	b = append(b, `{"prefill":`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `,"pad":"`...)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}
