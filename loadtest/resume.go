package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/sse"
)

// resume: the tool writes --resume-records records, each in a record batch of its own, partition i mod n,
// then resumes --resume-count times with the id of a client that has every record up to some way behind the
// head, and times each to the first frame: with --resume-conn=fresh (the default) from just before dialing a
// new connection, as a client that connects for each resume sees it; with open, from sending the request once
// the connection is made. The positions are far enough apart that no resume's first blocks were read by an
// earlier one (cold: the gateway's block cache cannot serve them); then the same resumes run again, served
// from the block cache (warm). Every resume must get exactly the records after its position, partition by
// partition, in the gateway's order, up to the head.

// sent is one record the resume mode wrote: where Kafka put it, its timestamp and the seq in its value.
type sent struct {
	Partition int32
	Offset    int64
	Timestamp time.Time
	Seq       int64
}

// resumeRun is one measured resume.
type resumeRun struct {
	Behind     int     `json:"behind"` // records between the position and the head
	ID         string  `json:"id"`     // the Last-Event-ID sent
	FirstFrame float64 `json:"first_frame_ms"`
	Dial       float64 `json:"dial_ms,omitempty"` // --resume-conn=fresh: the part of FirstFrame the dial took
	Frames     int     `json:"frames"`            // frames checked, up to the head
	Cold       bool    `json:"cold"`              // no earlier resume read the blocks of its first frame
}

// resumeStats summarizes one phase's times to the first frame. First is the phase's first resume: in the
// cold phase the first resume the gateway served since it started, which no earlier one warmed up.
type resumeStats struct {
	Count int     `json:"count"`
	First float64 `json:"first_ms"`
	Min   float64 `json:"min_ms"`
	P50   float64 `json:"p50_ms"`
	Max   float64 `json:"max_ms"`
}

// statsOf returns the first, min, median (the mean of the two middle values for an even count) and max of
// runs.
func statsOf(runs []resumeRun) *resumeStats {
	if len(runs) == 0 {
		return nil
	}
	ms := make([]float64, len(runs))
	for i, r := range runs {
		ms[i] = r.FirstFrame
	}
	slices.Sort(ms)
	n := len(ms)
	p50 := ms[n/2]
	if n%2 == 0 {
		p50 = (ms[n/2-1] + ms[n/2]) / 2
	}
	return &resumeStats{Count: n, First: runs[0].FirstFrame, Min: ms[0], P50: p50, Max: ms[n-1]}
}

// behinds returns count distances from the head spread evenly over [lo, hi], nearest the head first: each
// resume then starts before every earlier one, in blocks none of them read (each read from its position on).
func behinds(count, lo, hi int) []int {
	if count == 1 {
		return []int{lo}
	}
	out := make([]int, count)
	for i := range out {
		out[i] = lo + (hi-lo)*i/(count-1)
	}
	return out
}

// positionAt returns the position of a client that has recs[:have] (recs in the order they were written) and
// every record before them: per partition, the offset of its last record in recs[:have], or the partition's
// end offset before the tool wrote (start) less one. A partition with nothing at all before is left out.
func positionAt(start []int64, recs []sent, have int) position.Vector {
	var v position.Vector
	for p, end := range start {
		if end > 0 {
			v.Set(int32(p), end-1)
		}
	}
	for _, r := range recs[:have] {
		v.Set(r.Partition, r.Offset)
	}
	return v
}

// coldness says, for each position in order, whether the blocks its first frame needs (per partition, the
// block of the first offset after it) are read by no earlier resume. A resume reads, per partition, every block
// from its position's to the head's (ends: the partitions' end offsets).
func coldness(positions []position.Vector, ends []int64, block int64) []bool {
	out := make([]bool, len(positions))
	read := map[[2]int64]bool{} // {partition, block index}
	for i, v := range positions {
		out[i] = true
		first := func(p int) int64 {
			off, ok := v.Offset(int32(p))
			if !ok {
				off = -1
			}
			return off + 1
		}
		for p, end := range ends {
			if from := first(p); from < end && read[[2]int64{int64(p), from / block}] {
				out[i] = false
			}
		}
		for p, end := range ends {
			for b := first(p) / block; b <= (end-1)/block && first(p) < end; b++ {
				read[[2]int64{int64(p), b}] = true
			}
		}
	}
	return out
}

// writeOnePerBatch writes n records to the topic, partition i mod partitions, one at a time: each is produced
// and acknowledged before the next is handed over, so each is a record batch of its own in the log, the
// worst case for a replay (a batch per record to decode, no compression across records).
func (k *kafka) writeOnePerBatch(ctx context.Context, brokers []string, partitions, n, size int) ([]sent, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(k.topic),
		kgo.ClientID("ssegate-loadtest"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.MaxProduceRequestsInflightPerBroker(1),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	out := make([]sent, 0, n)
	for i := range n {
		r := &kgo.Record{
			Partition: int32(i % partitions),
			Key:       []byte("k-" + strconv.Itoa(i)),
			Value:     makeValue(time.Now().UnixNano(), int64(i), size),
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return out, fmt.Errorf("produce record %d: %w", i, err)
		}
		out = append(out, sent{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp, Seq: int64(i)})
	}
	return out, nil
}

// resumePlan is what both phases' resumes start from: the records written and, nearest the head first, how
// far behind each resume is and its position.
type resumePlan struct {
	recs      []sent
	behind    []int
	positions []position.Vector
}

// resume runs the resume mode.
func (r *runner) resume(ctx context.Context) error {
	cfg := r.cfg
	r.res.ResumeConn = cfg.ResumeConn
	t0 := time.Now()
	pl, err := r.planResumes(ctx)
	if err != nil {
		return err
	}
	// Let the gateway read the records live (its ring keeps only the newest), so that the resumes measure
	// the replay and not a gateway still catching up.
	sleep(ctx, time.Second)
	url := r.streamURL(cfg.URLs[0], 0)
	for _, cold := range []bool{true, false} {
		runs, d, err := r.resumePhase(ctx, url, pl, cold)
		if err != nil {
			return err
		}
		if cold {
			r.res.ResumesCold, r.res.Gateway = runs, &d
		} else {
			r.res.ResumesWarm, r.res.GatewayWarm = runs, &d
		}
	}
	r.res.Opened = 2 * len(pl.behind)
	r.res.Cold = statsOf(r.res.ResumesCold)
	r.res.Warm = statsOf(r.res.ResumesWarm)
	r.res.Elapsed = time.Since(t0)
	return nil
}

// planResumes writes the records and works out the resumes' positions, refusing positions that would not
// all be cold.
func (r *runner) planResumes(ctx context.Context) (*resumePlan, error) {
	cfg := r.cfg
	parts, err := r.k.partitions(ctx)
	if err != nil {
		return nil, err
	}
	r.res.Partitions = parts
	if cfg.ResumeMaxBehind >= cfg.ResumeRecords {
		return nil, fmt.Errorf("--resume-max-behind (%d) must be less than --resume-records (%d)", cfg.ResumeMaxBehind, cfg.ResumeRecords)
	}
	start, err := r.k.endOffsets(ctx)
	if err != nil {
		return nil, err
	}
	// The positions name a partition by its end offset before writing: one missing from the listing would be
	// read from its start by the gateway while the tool counted none of it as owed.
	if len(start) != parts {
		return nil, fmt.Errorf("topic %s has %d partitions, but end offsets were listed for %d", cfg.Topic, parts, len(start))
	}
	t0 := time.Now()
	recs, err := r.k.writeOnePerBatch(ctx, cfg.Brokers, parts, cfg.ResumeRecords, cfg.Size)
	r.res.Produced = int64(len(recs))
	if err != nil {
		return nil, err
	}
	r.res.ProduceSeconds = time.Since(t0).Seconds()
	ends, err := r.k.endOffsets(ctx)
	if err != nil {
		return nil, err
	}
	pl := &resumePlan{recs: recs, behind: behinds(cfg.ResumeCount, cfg.ResumeMinBehind, cfg.ResumeMaxBehind)}
	for _, b := range pl.behind {
		pl.positions = append(pl.positions, positionAt(start, recs, len(recs)-b))
	}
	for i, c := range coldness(pl.positions, ends, cfg.ResumeBlock) {
		if !c {
			return nil, notCold(cfg, parts, i, pl.behind[i])
		}
	}
	return pl, nil
}

// notCold says why resume i would not be cold, and which flags would make every resume so.
func notCold(cfg config, parts, i, behind int) error {
	maxBehind := resumeMaxBehind(parts, cfg.ResumeCount, cfg.ResumeMinBehind, cfg.ResumeBlock)
	hint := fmt.Sprintf("--resume-max-behind=%d --resume-records=%d would do", maxBehind, resumeRecords(maxBehind))
	if parts != cfg.Partitions {
		hint += fmt.Sprintf(" (the defaults with --partitions=%d)", parts)
	}
	return fmt.Errorf("resume %d (%d behind) would start in a block an earlier resume read (%d partitions, blocks of %d offsets: "+
		"resumes %d records apart never do); for %d resumes from %d behind, %s",
		i, behind, parts, cfg.ResumeBlock, int64(parts)*(cfg.ResumeBlock+1), cfg.ResumeCount, cfg.ResumeMinBehind, hint)
}

// resumePhase runs one phase's resumes, nearest the head first, and returns them with the change of the
// gateway's counters over the phase.
func (r *runner) resumePhase(ctx context.Context, url string, pl *resumePlan, cold bool) ([]resumeRun, gatewayCounters, error) {
	cfg := r.cfg
	m0, err := scrapeAll(ctx, r.hc, cfg.AdminURLs[:1], cfg.Topic)
	if err != nil {
		return nil, gatewayCounters{}, err
	}
	runs := make([]resumeRun, 0, len(pl.behind))
	for i, b := range pl.behind {
		id, _ := pl.positions[i].AppendText(nil)
		run := resumeRun{Behind: b, ID: string(id), Cold: cold}
		o := newOwed(pl.recs, len(pl.recs)-b, pl.positions[i])
		t, err := resumeOnce(ctx, url, cfg.ResumeConn == resumeFresh, pl.positions[i], o, cfg.DrainWait)
		run.FirstFrame, run.Dial, run.Frames = ms(t.first), ms(t.dial), o.checked
		r.res.Delivered += int64(o.checked)
		if err != nil {
			r.res.ConnErrors++
			r.res.Errors = append(r.res.Errors, fmt.Sprintf("resume %d behind: %v", b, err))
		}
		runs = append(runs, run)
	}
	m1, err := scrapeAll(ctx, r.hc, cfg.AdminURLs[:1], cfg.Topic)
	if err != nil {
		return nil, gatewayCounters{}, err
	}
	return runs, m1.sub(m0), nil
}

// resumeTimes are one resume's times: to the first record frame, and the dial's part of it (fresh only).
type resumeTimes struct {
	first, dial time.Duration
}

// resumeOnce resumes from pos on a connection of its own and reads until o has every record it is owed,
// checking each frame (owed.check). With fresh the clock starts just before dialing, as for a client that
// connects for each resume; otherwise once the connection is made, just before the request is written.
func resumeOnce(ctx context.Context, url string, fresh bool, pos position.Vector, o *owed, timeout time.Duration) (resumeTimes, error) {
	var t resumeTimes
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lastID, _ := pos.AppendText(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return t, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", string(lastID))
	start := time.Now()
	conn, err := dialer(0, netip.Addr{}).DialContext(ctx, "tcp", req.URL.Host) // one connection at a time: the kernel picks its source
	if err != nil {
		return t, fmt.Errorf("connect: %w", err)
	}
	if fresh {
		t.dial = time.Since(start)
	} else {
		start = time.Now()
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer func() {
		stop()
		_ = conn.Close()
	}()
	if err := req.Write(conn); err != nil {
		return t, fmt.Errorf("request: %w", err)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return t, fmt.Errorf("response: %w", err)
	}
	// The connection closes first: closing the body of a stream that does not end would read it to its end.
	defer func() { _ = conn.Close(); _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return t, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	body := bufio.NewReaderSize(resp.Body, 64<<10)
	open, err := readOpening(body)
	if err != nil {
		return t, err
	}
	if open != string(lastID) {
		return t, fmt.Errorf("the stream opened at %q, not at the id sent %q", open, lastID)
	}
	t.first, err = readOwed(sse.NewParser(body), o, start)
	return t, err
}

// readOwed reads frames until o has every record it is owed, checking each, and returns the time from start
// to the first frame.
func readOwed(p *sse.Parser, o *owed, start time.Time) (time.Duration, error) {
	var first time.Duration
	total := o.checked + o.left
	for n := 0; o.left > 0; n++ {
		ev, err := p.Next()
		if n == 0 {
			first = time.Since(start)
		}
		if err == nil {
			err = o.check(ev)
		}
		if err != nil {
			return first, fmt.Errorf("frame %d of %d: %w", o.checked+1, total, err)
		}
	}
	return first, nil
}

// seqOf extracts "seq" from a value the tool produced.
func seqOf(data string) (int64, bool) {
	const key = `,"seq":`
	i := strings.Index(data, key)
	if i < 0 {
		return 0, false
	}
	rest := data[i+len(key):]
	end := 0
	for end < len(rest) && (rest[end] >= '0' && rest[end] <= '9' || end == 0 && rest[end] == '-') {
		end++
	}
	n, err := strconv.ParseInt(rest[:end], 10, 64)
	return n, err == nil
}

var errNoTopic = errors.New("no such topic")

// partitions returns how many partitions the topic has.
func (k *kafka) partitions(ctx context.Context) (int, error) {
	md, err := k.adm.Metadata(ctx, k.topic)
	if err != nil {
		return 0, fmt.Errorf("metadata of %s: %w", k.topic, err)
	}
	td, ok := md.Topics[k.topic]
	if !ok {
		return 0, fmt.Errorf("metadata of %s: %w", k.topic, errNoTopic)
	}
	if td.Err != nil {
		return 0, fmt.Errorf("metadata of %s: %w", k.topic, td.Err)
	}
	return len(td.Partitions), nil
}
