package feed

import (
	"cmp"
	"fmt"
	"slices"
)

// partsView is a topic's partition table as the readers outside the feed's goroutines see it: readiness,
// lag and progress. The refresher makes a new one under Topic.mu whenever the table changes (partitions
// assigned, the topic created again) and stores it in Topic.view; nothing changes a stored view, and the
// counters its partitions point at are atomics. So those readers take no lock, and never wait for the fetch
// loop, which holds the topic's lock while it frames a whole poll (tens of MB while it reads a prefill, and
// longer on a busy machine): a readiness probe that waited for it would time out on every pod at once.
type partsView struct {
	exists  bool       // partitions are assigned (Topic.exists)
	pending bool       // a partition that existed at the feed's first refresh is not assigned yet
	parts   []partView // ascending by partition
}

// partView is one partition of a partsView.
type partView struct {
	id    int32
	ready int64 // the partition's ready offset (partition.ready) when the view was made
	st    *partition
}

// storeView makes the view of the topic's partition table and stores it. The caller holds mu.
func (t *Topic) storeView() {
	v := &partsView{exists: t.exists, parts: make([]partView, 0, len(t.parts))}
	for p := range t.atEnd {
		v.pending = v.pending || t.parts[p] == nil
	}
	for p, ps := range t.parts {
		v.parts = append(v.parts, partView{id: p, ready: ps.ready, st: ps})
	}
	slices.SortFunc(v.parts, func(a, b partView) int { return cmp.Compare(a.id, b.id) })
	t.view.Store(v)
}

// Ready reports whether the feed serves every topic: each exists, every partition is assigned, and each
// partition has been read up to where reading started (the prefill included). When it is not ready, the
// reason says why.
//
// Readiness latches: once every topic has been ready, Ready answers true until the process ends, whatever
// Kafka or the lag do later (a broker blip, a slow poll, a topic deleted or created again). Every pod reads
// every partition, so what holds one pod back holds every pod back at the same moment, and a readiness that
// followed it would take all of them out of the Service together: clients would get refused connections
// instead of the open streams, the rings and the resumes the pods can still serve. Lag is for the metrics
// and alerts (ssegate_consumer_lag). A pod that shuts down turns unready in the app, not here.
//
// Ready takes no lock: it reads the topics' views (partsView) and the partitions' atomic counters.
func (f *Feed) Ready() (bool, string) {
	if f.ready.Load() {
		return true, ""
	}
	if !f.refreshed.Load() {
		return false, "kafka metadata not loaded yet"
	}
	for _, name := range f.names {
		if why := f.topics[name].notReady(); why != "" {
			return false, why
		}
	}
	f.ready.Store(true)
	return true, ""
}

// notReady says why the topic is not ready yet, or "" when it is.
func (t *Topic) notReady() string {
	v := t.view.Load()
	switch {
	case v == nil || !v.exists:
		return "topic " + t.name + " does not exist in kafka"
	case len(v.parts) == 0 || v.pending:
		return "topic " + t.name + " has partitions not assigned yet"
	}
	for _, p := range v.parts {
		// Caught up: read up to the last stable offset listed when reading began (next counts transaction
		// markers, so an aborted tail or a run of commit markers is passed too), or a fetch said the log holds
		// nothing stable beyond next.
		if p.ready > 0 && p.st.next.Load() < p.ready && !p.st.caught.Load() {
			return fmt.Sprintf("topic %s partition %d not caught up", t.name, p.id)
		}
	}
	return ""
}
