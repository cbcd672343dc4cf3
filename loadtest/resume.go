package main

import (
	"bufio"
	"cmp"
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

// resume: the tool writes --resume-records records, each in a record batch of its own, then resumes
// --resume-count times with the id of a client that has every record up to some way behind the head, and
// times each from the request to the first frame. The positions are far enough apart that no resume's first
// blocks were read by an earlier one (cold: the gateway's block cache cannot serve them); then the same
// resumes run again, served from the block cache (warm). Every resume must get exactly the records after its
// position, in the gateway's order, up to the head.

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
	Frames     int     `json:"frames"` // frames checked, up to the head
	Cold       bool    `json:"cold"`   // no earlier resume read the blocks of its first frame
}

// resumeStats summarizes one phase's times to the first frame.
type resumeStats struct {
	Count int     `json:"count"`
	Min   float64 `json:"min_ms"`
	P50   float64 `json:"p50_ms"`
	Max   float64 `json:"max_ms"`
}

// statsOf returns the min, median (the mean of the two middle values for an even count) and max of runs.
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
	return &resumeStats{Count: n, Min: ms[0], P50: p50, Max: ms[n-1]}
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

// expectedAfter returns the records after recs[:have] in the order the gateway delivers a replay: by record
// timestamp, ties by partition, each partition in offset order.
func expectedAfter(recs []sent, have int) []sent {
	out := slices.Clone(recs[have:])
	slices.SortStableFunc(out, func(a, b sent) int {
		if c := a.Timestamp.Compare(b.Timestamp); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Partition, b.Partition); c != 0 {
			return c
		}
		return cmp.Compare(a.Offset, b.Offset)
	})
	return out
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

// resume runs the resume mode.
func (r *runner) resume(ctx context.Context) error {
	cfg := r.cfg
	parts, err := r.k.partitions(ctx)
	if err != nil {
		return err
	}
	if cfg.ResumeMaxBehind >= cfg.ResumeRecords {
		return fmt.Errorf("--resume-max-behind (%d) must be less than --resume-records (%d)", cfg.ResumeMaxBehind, cfg.ResumeRecords)
	}
	start, err := r.k.endOffsets(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	recs, err := r.k.writeOnePerBatch(ctx, cfg.Brokers, parts, cfg.ResumeRecords, cfg.Size)
	r.res.Produced = int64(len(recs))
	if err != nil {
		return err
	}
	r.res.ProduceSeconds = time.Since(t0).Seconds()
	ends, err := r.k.endOffsets(ctx)
	if err != nil {
		return err
	}
	var positions []position.Vector
	bs := behinds(cfg.ResumeCount, cfg.ResumeMinBehind, cfg.ResumeMaxBehind)
	for _, b := range bs {
		positions = append(positions, positionAt(start, recs, len(recs)-b))
	}
	cold := coldness(positions, ends, cfg.ResumeBlock)
	for i, c := range cold {
		if !c {
			return fmt.Errorf("resume %d (%d behind) would start in a block an earlier resume read: with %d partitions and blocks of %d "+
				"offsets, resumes must be more than %d records apart (fewer --resume-count, fewer partitions, or a wider range)",
				i, bs[i], parts, cfg.ResumeBlock, int64(parts)*cfg.ResumeBlock)
		}
	}
	// Let the gateway read the records live (its ring keeps only the newest), so that the resumes measure
	// the replay and not a gateway still catching up.
	sleep(ctx, time.Second)
	url := r.streamURL(cfg.URLs[0])
	for phase, out := range []*[]resumeRun{&r.res.ResumesCold, &r.res.ResumesWarm} {
		m0, err := scrapeAll(ctx, r.hc, cfg.AdminURLs[:1], cfg.Topic)
		if err != nil {
			return err
		}
		for i, b := range bs {
			id, _ := positions[i].AppendText(nil)
			want := expectedAfter(recs, len(recs)-b)
			run := resumeRun{Behind: b, ID: string(id), Cold: phase == 0}
			d, n, err := resumeOnce(ctx, url, positions[i], want, cfg.DrainWait)
			run.FirstFrame, run.Frames = ms(d), n
			r.res.Delivered += int64(n)
			if err != nil {
				r.res.ConnErrors++
				r.res.Errors = append(r.res.Errors, fmt.Sprintf("resume %d behind: %v", b, err))
			}
			*out = append(*out, run)
		}
		m1, err := scrapeAll(ctx, r.hc, cfg.AdminURLs[:1], cfg.Topic)
		if err != nil {
			return err
		}
		d := m1.sub(m0)
		if phase == 0 {
			r.res.Gateway = &d
		} else {
			r.res.GatewayWarm = &d
		}
	}
	r.res.Opened = 2 * len(bs)
	r.res.Cold = statsOf(r.res.ResumesCold)
	r.res.Warm = statsOf(r.res.ResumesWarm)
	r.res.Elapsed = time.Since(t0)
	return nil
}

// resumeOnce resumes from pos and reads until every record of want has come, checking each frame: its id must
// be pos advanced by want's records so far, and its data the value of that record. It returns the time from
// sending the request (after the connection is made) to the first frame, and how many frames matched.
func resumeOnce(ctx context.Context, url string, pos position.Vector, want []sent, timeout time.Duration) (time.Duration, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lastID, _ := pos.AppendText(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", string(lastID))
	conn, err := dialer(0, netip.Addr{}).DialContext(ctx, "tcp", req.URL.Host) // one connection at a time: the kernel picks its source
	if err != nil {
		return 0, 0, fmt.Errorf("connect: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer func() {
		stop()
		_ = conn.Close()
	}()
	requested := time.Now()
	if err := req.Write(conn); err != nil {
		return 0, 0, fmt.Errorf("request: %w", err)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return 0, 0, fmt.Errorf("response: %w", err)
	}
	// The connection closes first: closing the body of a stream that does not end would read it to its end.
	defer func() { _ = conn.Close(); _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, 0, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	body := bufio.NewReaderSize(resp.Body, 64<<10)
	open, err := readOpening(body)
	if err != nil {
		return 0, 0, err
	}
	if open != string(lastID) {
		return 0, 0, fmt.Errorf("the stream opened at %q, not at the id sent %q", open, lastID)
	}
	p := sse.NewParser(body)
	var first time.Duration
	cur := pos.Clone()
	for n := range want {
		ev, err := p.Next()
		if n == 0 {
			first = time.Since(requested)
		}
		if err != nil {
			return first, n, fmt.Errorf("frame %d of %d: %w", n+1, len(want), err)
		}
		w := want[n]
		cur.Set(w.Partition, w.Offset)
		wantID, _ := cur.AppendText(nil)
		if ev.ID != string(wantID) || ev.Type != "" && ev.Type != "message" {
			return first, n, fmt.Errorf("frame %d of %d: event %q id %q, want the record at %d/%d, id %q",
				n+1, len(want), ev.Type, ev.ID, w.Partition, w.Offset, wantID)
		}
		if seq, ok := seqOf(ev.Data); !ok || seq != w.Seq {
			return first, n, fmt.Errorf("frame %d of %d (id %q): data %.60q is not record %d", n+1, len(want), ev.ID, ev.Data, w.Seq)
		}
	}
	return first, len(want), nil
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
