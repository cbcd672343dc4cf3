package main

import (
	"testing"
	"time"
)

// TestTopicsVector: a several-topic id is one vector to the tracker, each topic's partitions topicStride apart,
// so a frame of one topic moves one partition of it by one offset, as on a stream of one topic.
func TestTopicsVector(t *testing.T) {
	topics := streamTopics("lt", 2)
	if topics[0] != "lt" || topics[1] != "lt-2" || len(streamTopics("lt", 1)) != 1 {
		t.Fatalf("streamTopics = %v", topics)
	}
	v, err := topicsVector("v1:lt-2~0-5,lt~1-3", topics, nil)
	if err != nil || v.String() != "v1:1-3.1000-5" {
		t.Fatalf("topicsVector = %s, %v", v, err)
	}
	for _, id := range []string{"v1:other~0-1", "v1:0-1", "v2:lt~:AQID"} {
		if _, err := topicsVector(id, topics, nil); err == nil {
			t.Errorf("topicsVector(%q) accepted it", id)
		}
	}
	// The tracker counts across topics: a frame of lt-2 after one of lt moves one offset.
	tr := &tracker{topics: topics}
	if err := tr.open("v1:lt~0-9,lt-2~", time.Now()); err != nil {
		t.Fatal(err)
	}
	var clk lazyClock
	tr.frame("v1:lt-2~0-0,lt~0-9", &clk)
	tr.frame("v1:lt~0-11,lt-2~0-0", &clk) // lt's offset 10 skipped
	if n := tr.counts(); n.Delivered != 2 || n.Lost != 1 || n.Dup != 0 || n.BadIDs != 0 {
		t.Fatalf("tracker %+v, want 2 delivered, 1 lost", n)
	}
	if got := []string{topicOfSeq(topics, 4), topicOfSeq(topics, 5), topicOfSeq(nil, 5)}; got[0] != "lt" || got[1] != "lt-2" || got[2] != "" {
		t.Fatalf("topicOfSeq = %q", got)
	}
}
