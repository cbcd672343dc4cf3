package e2e

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
	"github.com/ssegate/ssegate/pkg/sse"
)

// TestBlackBoxSlowRegistry: a registry that answers every lookup 404 after 4 s, and a producer writing
// records of 1,000 distinct unknown schema ids into an avro topic, do not hold up another, plain topic of the
// same gateway: its stream's live latency stays within twice that of the same run against a registry that
// answers at once (or 50 ms, whichever is more: the machine's noise), and no record of either topic is lost.
// Before, the feed looked each id up in its one fetch loop, under the topic's lock: the plain topic's records
// waited behind 4 s per new id.
func TestBlackBoxSlowRegistry(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	bin := filepath.Join(buildBinaries(t), "gateway")
	// A p99 of 100 records moves with the machine's load; a stalled feed costs seconds on every try. So a pair of
	// runs over the bound is tried once more, and the bound must hold in one of the two.
	for try := 1; ; try++ {
		base := slowRegistryRun(t, brokers, bin, 0)
		slow := slowRegistryRun(t, brokers, bin, 4*time.Second)
		t.Logf("try %d: plain topic's p99 latency: %v with a registry answering at once, %v with one answering after 4 s", try, base, slow)
		limit := max(2*base, 50*time.Millisecond)
		if slow <= limit {
			return
		}
		if try == 2 {
			t.Fatalf("p99 latency %v with the slow registry, want at most %v", slow, limit)
		}
	}
}

// slowRegistryRun runs a gateway over a plain and an avro topic against a stand-in registry that answers 404
// after delay, writes 1,000 records of distinct unknown schema ids into the avro topic while it writes 100
// timed records into the plain one, checks that both streams get every record, and returns the p99 of the
// plain records' latency (produce to receipt).
func slowRegistryRun(t *testing.T, brokers, bin string, delay time.Duration) time.Duration {
	t.Helper()
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error_code":40403,"message":"Schema not found"}`))
	}))
	t.Cleanup(registry.Close)
	avro, plain := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	addr, admin := proctest.FreeAddr(t), proctest.FreeAddr(t)
	startProcess(t, "gateway", bin, brokers, "--topics", avro+","+plain, "--listen", addr, "--admin-listen", admin,
		"--prefill", "0", "--topic-value-format", avro+"=avro", "--schema-registry-url", registry.URL)
	waitReady(t, "gateway", "http://"+admin+"/readyz")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	open := func(topic string) *sse.Parser {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/streams/"+topic+"?heartbeat=0&from=earliest", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", topic, resp, err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return sse.NewParser(resp.Body) // from the topic's start: no record is missed, however soon it is written
	}
	plainEvents, avroEvents := open(plain), open(avro)

	const ids, plainRecords = 1000, 100
	avroDone := make(chan int, 1)
	go func() {
		n := 0
		for n < ids {
			ev, err := avroEvents.Next()
			if err != nil {
				break
			}
			if ev.Data != "" {
				n++
			}
		}
		avroDone <- n
	}()
	latencies := make(chan time.Duration, plainRecords)
	go func() {
		defer close(latencies)
		for range plainRecords {
			ev, err := plainEvents.Next()
			if err != nil {
				return
			}
			sent, err := strconv.ParseInt(ev.Data, 10, 64)
			if err != nil {
				t.Errorf("plain record %q", ev.Data)
				return
			}
			latencies <- time.Since(time.Unix(0, sent))
		}
	}()

	cl := kafkatest.Client(t)
	go func() {
		// The hostile producer: 1,000 ids the registry does not know, 50 every 100 ms.
		for b := range ids / 50 {
			var recs []*kgo.Record
			for i := range 50 {
				v := binary.BigEndian.AppendUint32([]byte{0}, uint32(1_000_000+rand.IntN(1<<30)))
				recs = append(recs, &kgo.Record{Topic: avro, Value: append(v, byte(b), byte(i))})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Errorf("produce avro: %v", err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for range plainRecords {
		kafkatest.Produce(t, cl, &kgo.Record{Topic: plain, Value: strconv.AppendInt(nil, time.Now().UnixNano(), 10)})
		time.Sleep(20 * time.Millisecond)
	}
	var got []time.Duration
	for d := range latencies {
		got = append(got, d)
	}
	if len(got) != plainRecords {
		t.Fatalf("the plain topic's stream got %d of its %d records", len(got), plainRecords)
	}
	select {
	case n := <-avroDone:
		if n != ids {
			t.Fatalf("the avro topic's stream got %d of its %d records", n, ids)
		}
	case <-ctx.Done():
		t.Fatal("the avro topic's stream did not get its records")
	}
	slices.Sort(got)
	return got[len(got)*99/100]
}
