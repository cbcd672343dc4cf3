package stream

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/ssegate/ssegate/pkg/position"
)

// Streams of several topics (/streams/orders,payments): one stream of each topic, as a one-topic stream is
// served (start, resume, ring, replay, resyncs, filters, conflation, snapshots, token moments, drain), all
// writing into one mux, which writes the client's response. The mux keeps each topic's position (the id
// its stream last wrote) and gives every frame the stream's id: all topics' positions (position.AppendTopics),
// the frame's own topic first. A record frame gets a "topic:" line after its id; a topic's own events
// (resync, live, resumed) do too.
// The opening block, keep-alives, the retry line and the token's frames are the stream's: the mux sends each
// once.
//
// A topic's stream writes its ids frame by frame (conn.muxed takes the slow path): v1, or the ring's compact
// id when it is level with the ring, which makes the stream's id compact (position.AppendTopics). The mux only
// copies them. Each topic's stream runs on a goroutine of its own: a stream of several topics is never parked in
// the writer pool. The first topic's stream to end ends them all, and each counts that reason.

// TopicStream is one topic of a stream of several topics.
type TopicStream struct {
	Topic  *Topic
	Params Params // its OnEnd is not called: ServeTopics calls its own onEnd once
	Stats  *Stats
}

// errMuxEnded fails the writes of a topic's stream once the stream of several topics has ended.
var errMuxEnded = errors.New("stream: the stream of several topics ended")

// ServeTopics streams several topics to the client as one stream, from the position its id (a several-topic
// id, see position.ParseTopics) or its parameters ask for, until one topic's stream ends; it returns why, and
// calls onEnd (when not nil) with it once every topic's stream has ended. ts holds each topic once; their
// Params come from one request (ParseTopicParams) and share LastEventID, Heartbeat and Expires.
func (s *Server) ServeTopics(w http.ResponseWriter, r *http.Request, ts []TopicStream, onEnd func(CloseReason)) Outcome {
	ts = sortedTopics(ts)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	leaving := s.leaving.Load()
	if leaving {
		h.Set("Connection", "close")
	}
	w.WriteHeader(http.StatusOK)
	m := newMux(ts, &httpSink{w: w, rc: http.NewResponseController(w)})
	reason := m.run(r.Context(), s, ts, r.RemoteAddr, spanParent(r.Context()), leaving, nil)
	if onEnd != nil {
		onEnd(reason)
	}
	return Outcome{Reason: reason}
}

// sortedTopics returns ts in ascending topic order, the order of a several-topic id.
func sortedTopics(ts []TopicStream) []TopicStream {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(a, b TopicStream) int { return strings.Compare(a.Topic.Name, b.Topic.Name) })
	return ts
}

// mux merges the frames of several topics' streams into one stream (see ServeTopics).
type mux struct {
	out       sink
	heartbeat time.Duration // the stream's (every topic's Params share it)
	names     []string      // the topics, ascending

	mu        sync.Mutex
	ids       [][]byte        // each topic's position: the last id its stream wrote; nil until it wrote one
	unplaced  int             // topics whose streams wrote no id yet
	placed    chan struct{}   // closed when unplaced reaches 0
	stopped   chan struct{}   // closed when the stream ends (stop)
	gone      <-chan struct{} // the stream's context's Done: its client left
	pend      [][]byte        // each topic's bytes of a frame not whole yet
	buf       []byte          // what one write sends
	span      [1][]byte       // buf, as the sink takes it
	idBuf     []byte
	lastWrite int64 // when the mux last wrote (monoNow)
	retried   bool  // the retry line went out
	noticed   bool  // the token-expiring frame went out
	expired   bool  // the token-expired frame is going out: the stream ends with this write
	done      bool  // the stream ended: further writes fail

	ended  bool        // reason is set
	reason CloseReason // why the stream ended: the first topic's stream to end says, or the token's expiry
	cancel context.CancelFunc
}

// newMux returns the mux of a stream of the topics ts (ascending), writing to out.
func newMux(ts []TopicStream, out sink) *mux {
	m := &mux{
		out: out, heartbeat: ts[0].Params.Heartbeat, ids: make([][]byte, len(ts)), pend: make([][]byte, len(ts)), unplaced: len(ts),
		placed: make(chan struct{}), stopped: make(chan struct{}),
	}
	for _, t := range ts {
		m.names = append(m.names, t.Topic.Name)
	}
	return m
}

// run runs every topic's stream until the first ends (when the server is leaving, until all have said where
// they are) and returns why the stream ended. configure, when not nil, sets up each topic's conn (a
// WebSocket's frames carry their meta lines).
func (m *mux) run(ctx context.Context, s *Server, ts []TopicStream, remote string, parent *trace.SpanContext, leaving bool, configure func(*conn)) CloseReason {
	ctx, m.cancel = context.WithCancel(ctx)
	defer m.cancel()
	m.gone = ctx.Done()
	ids, idErr := SplitID(ts[0].Params.LastEventID, m.names)
	now, wall := monoNow(), time.Now()
	var wg sync.WaitGroup
	for i, t := range ts {
		p := t.Params
		p.OnEnd, p.LastEventID, p.idErr = nil, ids[i], idErr
		t.Stats.Open.Add(1)
		c := &conn{
			s: s, t: t.Topic, p: p.kept(t.Topic), stats: t.Stats, draining: s.draining, remote: remote, parent: parent,
			muxed: true, out: &muxSink{m: m, i: i},
		}
		if configure != nil {
			configure(c)
		}
		c.setExpiry(&p, now, wall)
		wg.Go(func() {
			r := c.run(ctx, p)
			c.end(m.finish(i, r, !leaving))
		})
	}
	wg.Wait()
	return m.reason
}

// finish records that topic i's stream ended with r, and returns the reason the stream of several topics
// ended with: the first topic's. Unless the server is leaving (every topic's stream then says where it is and
// ends by itself), the first end ends the others; a topic that ended without saying where it is ends them
// too, leaving or not: no id naming every topic can be sent any more, and a stream waiting for one would wait
// for ever.
func (m *mux) finish(i int, r CloseReason, endAll bool) CloseReason {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case endAll || m.ids[i] == nil:
		m.stop(r)
	case !m.ended:
		m.ended, m.reason = true, r
	}
	return m.reason
}

// stop ends the stream with r, unless it ended already: every topic's stream then fails its next write, and
// ends. The caller holds mu.
func (m *mux) stop(r CloseReason) {
	if !m.ended {
		m.ended, m.reason = true, r
	}
	if !m.done {
		close(m.stopped)
	}
	m.done = true
	if m.cancel != nil {
		m.cancel()
	}
}

// muxSink is where topic i's stream writes.
type muxSink struct {
	m *mux
	i int
}

func (s *muxSink) write(spans [][]byte, timeout time.Duration) (int, error) {
	return s.m.write(s.i, 0, spans, timeout)
}

// writeOwn takes a frame of the gateway's own, told what it is (see ownSink).
func (s *muxSink) writeOwn(kind frameKind, frame []byte, timeout time.Duration) (int, error) {
	return s.m.write(s.i, kind, [][]byte{frame}, timeout)
}

// holdsOwn: a topic's stream holds nothing for the mux when the mux's sink holds its writes itself; it waits
// for the mux (another topic's write) without holding either.
func (s *muxSink) holdsOwn() bool { return holdsOwn(s.m.out) }

// write takes topic i's frames, and writes what the client gets of them. A frame waits until every topic
// has said where it starts (its opening block): from then on every id names every topic, so a resume from
// any of them is exact in each. kind is 0 for whatever a stream writes (records, opening blocks,
// keep-alives, resyncs), else what the one frame that spans complete is (the stream wrote whole frames before
// it: only its retry line can wait in front of it).
func (m *mux) write(i int, kind frameKind, spans [][]byte, timeout time.Duration) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return 0, errMuxEnded
	}
	for _, b := range spans {
		m.pend[i] = append(m.pend[i], b...)
	}
	m.buf = m.buf[:0]
	rest, n := m.pend[i], 0
	for {
		j := bytes.Index(rest, []byte("\n\n"))
		if j < 0 {
			break
		}
		block := m.takeRetry(rest[:j+2])
		rest = rest[j+2:]
		m.place(i, block)
		if m.unplaced > 0 && !opening(block) {
			k, err := m.flush(timeout)
			n += k
			if err != nil {
				return n, err
			}
			// Only a resync a topic's stream writes before its opening block gets here (a stream waits in
			// awaitPlaced before it catches up), holding no catch-up or snapshot slot.
			m.mu.Unlock()
			err = m.waitPlaced(nil)
			m.mu.Lock()
			if err != nil || m.done {
				return n, errMuxEnded
			}
		}
		m.translate(i, block, kind)
	}
	m.pend[i] = m.pend[i][:copy(m.pend[i], rest)]
	if cap(m.pend[i]) > slowFlushBytes && len(m.pend[i]) <= slowFlushBytes/4 {
		m.pend[i] = append([]byte(nil), m.pend[i]...) // a snapshot's piece is not kept for the rest of the stream
	}
	k, err := m.flush(timeout)
	if m.expired {
		m.stop(ReasonTokenExpired) // whichever topic's stream ends first, the stream ended at the token's expiry
	}
	return n + k, err
}

// place keeps the id of topic i's first frame (its opening block, or a resync before it, whose id is where
// the topic starts) as the topic's position.
func (m *mux) place(i int, block []byte) {
	if m.ids[i] != nil || !bytes.HasPrefix(block, []byte("id: ")) {
		return
	}
	m.ids[i] = append([]byte{}, block[len("id: "):bytes.IndexByte(block, '\n')]...)
	m.unplaced--
	if m.unplaced == 0 {
		close(m.placed)
	}
}

// waitPlaced waits, without m.mu, until every topic's stream has said where it starts; it fails when the
// stream ended or its client left first. tick, when not nil, is called on each of its ticks (keep-alives).
func (m *mux) waitPlaced(tick *tickFunc) error {
	var ticks <-chan time.Time
	if tick != nil {
		tk := time.NewTicker(tick.every)
		defer tk.Stop()
		ticks = tk.C
	}
	for {
		select {
		case <-m.placed:
			return nil
		case <-m.stopped:
			return errMuxEnded
		case <-m.gone:
			return errMuxEnded
		case <-ticks:
			if err := tick.fn(); err != nil {
				return err
			}
		}
	}
}

// tickFunc is something done every so often while waiting.
type tickFunc struct {
	every time.Duration
	fn    func() error
}

// awaitPlaced holds a topic's stream, after its opening block and before it catches up, until every topic of
// the stream has said where it starts, writing keep-alives meanwhile: its frames could not go out before (an
// id must name every topic), and it must not wait for that inside a write of its catch-up or snapshot, which
// hold the pod's catch-up and snapshot slots (a topic not created yet would then stall every resume from Kafka
// and every snapshot on the pod). A stream of one topic does not wait.
func (c *conn) awaitPlaced() error {
	ms, ok := c.out.(*muxSink)
	if !ok {
		return nil
	}
	if err := c.flushBuf(); err != nil {
		return err
	}
	var tick *tickFunc
	if c.p.Heartbeat > 0 {
		tick = &tickFunc{every: c.p.Heartbeat, fn: c.keepAliveIfDue}
	}
	if err := ms.m.waitPlaced(tick); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

// flush writes what m.buf holds.
func (m *mux) flush(timeout time.Duration) (int, error) {
	if len(m.buf) == 0 {
		return 0, nil
	}
	m.span[0] = m.buf
	n, err := m.out.write(m.span[:], timeout)
	m.span[0] = nil
	m.lastWrite = monoNow()
	m.buf = m.buf[:0]
	if cap(m.buf) > slowFlushBytes {
		m.buf = nil // a catch-up's buffer is not kept for the rest of the stream
	}
	return n, err
}

// takeRetry takes the retry line a stream's first block starts with off it: the first goes to the client, the
// others' are dropped.
func (m *mux) takeRetry(block []byte) []byte {
	if !bytes.HasPrefix(block, retryPrefix) {
		return block
	}
	nl := bytes.IndexByte(block, '\n')
	if !m.retried {
		m.retried = true
		m.buf = append(m.buf, block[:nl+1]...)
	}
	return block[nl+1:]
}

// opening says block (its retry line taken off) carries no frame for the client: nothing, a keep-alive, or
// an id alone.
func opening(block []byte) bool {
	if len(block) <= 1 || block[0] == ':' {
		return true
	}
	nl := bytes.IndexByte(block, '\n')
	return bytes.HasPrefix(block, []byte("id: ")) && nl == len(block)-2
}

var (
	retryPrefix     = []byte("retry:")
	topicLinePrefix = []byte("topic: ")
	liveTypeLine    = []byte("event: " + LiveEvent + "\n")
)

// translate appends to m.buf what the client gets of block, a whole frame of topic i's stream (without its
// retry line), of kind (see write): the token's frames and the end of a snapshot are known by kind, never by
// their event lines, which a record's frame could hold too.
func (m *mux) translate(i int, block []byte, kind frameKind) {
	switch {
	case len(block) <= 1:
		return
	case block[0] == ':':
		// A keep-alive: one topic's stream wrote nothing for a heartbeat, but the client may have had
		// other topics' frames.
		if m.heartbeat > 0 && monoNow()-m.lastWrite >= int64(m.heartbeat)/2 {
			m.buf = append(m.buf, block...)
		}
		return
	case !bytes.HasPrefix(block, []byte("id: ")):
		m.appendTopicLine(i)
		m.buf = append(m.buf, block...)
		return
	}
	nl := bytes.IndexByte(block, '\n')
	m.ids[i] = append(m.ids[i][:0], block[len("id: "):nl]...)
	rest := block[nl+1:]
	if m.unplaced > 0 {
		return // an opening block: the stream's opening goes out once every topic placed itself
	}
	expiring, expired := kind == kindTokenExpiring, kind == kindTokenExpired
	if expiring && m.noticed {
		return
	}
	m.noticed, m.expired = m.noticed || expiring, m.expired || expired
	own := len(rest) == 1 || expiring || expired
	first := i
	if own {
		first = -1 // the stream's own frames: names in order
	}
	m.idBuf = position.AppendTopics(m.idBuf[:0], m.names, m.ids, first)
	m.buf = append(m.buf, "id: "...)
	m.buf = append(m.buf, m.idBuf...)
	m.buf = append(m.buf, '\n')
	switch {
	case own:
		// The opening block and the token's frames name no topic.
	case kind == kindLive:
		// A topic's snapshot ended: its data names the stream's id, and the topic.
		m.appendTopicLine(i)
		m.buf = append(m.buf, liveTypeLine...)
		m.buf = append(m.buf, `data: {"id":"`...)
		m.buf = append(m.buf, m.idBuf...)
		m.buf = append(m.buf, `","topic":"`...)
		m.buf = append(m.buf, m.names[i]...)
		m.buf = append(m.buf, "\"}\n\n"...)
		return
	default:
		m.appendTopicLine(i)
	}
	m.buf = append(m.buf, rest...)
}

func (m *mux) appendTopicLine(i int) {
	m.buf = append(m.buf, topicLinePrefix...)
	m.buf = append(m.buf, m.names[i]...)
	m.buf = append(m.buf, '\n')
}

// SplitID returns each topic's one-topic id (v1, or a compact part as its compact id; "" for none) from a
// stream's id, for a stream of topics
// (ascending). A several-topic id gives each topic its part, "" for a topic it does not name (that topic
// starts as the from parameter says); a one-topic id is the id of a stream of one topic only. An id that
// cannot be read so is returned as err, and every topic gets "": each says so in a resync, and starts as the
// from parameter says.
func SplitID(id string, topics []string) ([]string, error) {
	out := make([]string, len(topics))
	switch {
	case id == "":
		return out, nil
	case !position.IsTopics(id):
		if len(topics) == 1 {
			out[0] = id
			return out, nil
		}
		return out, errors.New("the id is a one-topic id, and this stream has several topics")
	}
	tps, err := position.ParseTopics(id)
	if err != nil {
		return out, err
	}
	for i, name := range topics {
		if k := slices.IndexFunc(tps, func(tp position.TopicPosition) bool { return tp.Topic == name }); k >= 0 {
			out[i] = cmp.Or(tps[k].Compact, tps[k].Pos.String())
		}
	}
	return out, nil
}
