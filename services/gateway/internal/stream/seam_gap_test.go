package stream

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
)

// TestSeamFeedFallsBelowLogStart: when retention passes offsets the pod has not read yet (its fetches were
// held up), the feed resumes at the log start, as franz-go does, and every live stream gets a retention
// resync naming the lost offsets, with the id that skips them, before the next records: on both paths,
// filtered or not (a filter never hides a resync). Before, live streams skipped those records silently.
func TestSeamFeedFallsBelowLogStart(t *testing.T) {
	for _, writers := range []int{0, 2} {
		for _, query := range []string{"", "?event=x", "?key=k"} {
			t.Run(query+sinkName(writers), func(t *testing.T) {
				kc := memlog.New()
				kc.CreateTopic("t", 1)
				pd := startPod(t, kc, "t", podOpts{writers: writers})
				pd.waitReady(t)
				c := pd.open(t, query, "")
				put := func(v string) {
					kc.Produce("t", &kgo.Record{Key: []byte("k"), Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "event", Value: []byte("x")}}})
				}
				put("a")
				if ev := c.next(t); ev.Data != "a" || ev.ID != "v1:0-0" {
					t.Fatalf("first event %+v", ev)
				}
				kc.PausePolls(true)
				for _, v := range []string{"b", "c", "d"} {
					put(v)
				}
				kc.DeleteRecords("t", 0, 3) // b and c are gone before the pod read them
				put("e")
				kc.PausePolls(false)
				ev := c.next(t)
				want := ResyncData{Reason: ResyncRetention, Topic: "t", Partitions: []ResyncPartition{
					{Partition: 0, Requested: 1, LowWatermark: 3, ResumesAt: 3, Skipped: 2},
				}}
				if d := resyncData(t, ev); fmt.Sprint(d) != fmt.Sprint(want) || ev.ID != "v1:0-2" {
					t.Fatalf("%+v id %s, want %+v id v1:0-2", d, ev.ID, want)
				}
				for i, want := range []string{"d", "e"} {
					if ev := c.next(t); ev.Data != want || ev.ID != fmt.Sprintf("v1:0-%d", 3+i) {
						t.Fatalf("after the resync: %+v, want %s", ev, want)
					}
				}
				resyncs, skipped := int64(0), int64(0)
				pd.f.Gaps(func(_ string, _ int32, r, s int64) { resyncs, skipped = resyncs+r, skipped+s })
				if resyncs != 1 || skipped != 2 {
					t.Errorf("Gaps: %d resyncs, %d skipped; want 1 and 2", resyncs, skipped)
				}
			})
		}
	}
}
