package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Modes of the tool (--mode).
const (
	modeSteady = "steady"
	modeIdle   = "idle"
	modeStorm  = "storm"
	modeSlow   = "slow"
	modeResume = "resume"
	modeFloor  = "floor" // the bare write loop of loadtest/floor, no gateway and no Kafka (floormode.go)
	modeWaves  = "waves" // steady's resume waves alone, no readers and no producing (wavesproc.go)
)

// How the resume mode connects (--resume-conn).
const (
	resumeFresh = "fresh" // a new connection for each resume, dialed inside the timing
	resumeOpen  = "open"  // a new connection for each resume, the timing from the request once it is made
)

// maxConnections bounds --connections.
const maxConnections = 100_000

// config is everything the flags say.
type config struct {
	Mode          string
	URLs          []string // gateway base URLs, checked to be loopback
	AdminURLs     []string // the gateways' admin ports (readyz, metrics), one per URL, checked to be loopback
	Topic         string
	Brokers       []string // checked to be loopback
	PositionTopic string   // where the checkpoints of compact (v2) ids are read from
	CreateTopic   bool
	Partitions    int
	Connections   int
	Rate          float64 // records per second; 0 = as fast as possible
	Duration      time.Duration
	Size          int
	AvroID        int // values in Avro with this schema id; 0: JSON
	Keys          int
	GatewayPIDs   []int
	ConnectPar    int
	PerSource     int // connections per loopback source address (source.go); 0 lets the kernel choose
	IdleProbe     int // idle: records produced after measuring, which every connection must receive
	ReadyWait     time.Duration
	DrainWait     time.Duration
	JSON          bool
	CPUProfile    string // file for the tool's own CPU profile (runtime/pprof); empty means none

	Topics    int           // steady: the topics of each stream (topics.go): --topic, --topic-2, ...
	Shape     string        // steady: what each stream asks for (shape.go): plain, filter or conflate
	FilterMod int           // --shape=filter: connections are filtered into this many classes; 0: one each
	Conflate  time.Duration // --shape=conflate: the interval

	Proto          string // protoH1, protoH2C, protoH2 (h2.go) or protoWS (ws.go)
	StreamsPerConn int    // h2, h2c: streams that share one HTTP/2 connection
	Insecure       bool   // h2: accept any certificate
	CAFile         string // h2: PEM certificates to trust instead of the system's
	HeapProfile    string // idle: file for the first gateway's heap profile, fetched after the hold
	WSAcks         int    // ws: acknowledge every WSAcks-th message (ack=1); 0 asks for no acknowledgements
	WSMaxInFlight  int    // ws with WSAcks: the stream's max_in_flight

	StormConsume       time.Duration
	StormGap           time.Duration
	StormWindow        time.Duration
	StormCross         bool
	StormStopProducing bool // stop producing at the end of the gap rather than once every client is served

	SlowFraction float64
	SlowAfter    time.Duration // zero means Duration/3
	SlowRcvBuf   int
	SlowCheck    time.Duration

	ResumeRecords   int
	ResumeCount     int
	ResumeMinBehind int
	ResumeMaxBehind int
	ResumeBlock     int64
	ResumeConn      string // resumeFresh or resumeOpen

	FloorBin     string // floor: the floor program; a relative path is looked for from the working directory up
	FloorWriters int    // floor: the floor's writer goroutines; 0 leaves its default (the number of CPUs)

	// Steady's resume waves (waves.go): every WaveEvery from the start of producing, Waves clients resume
	// WaveBehind records behind the head and hang up WaveCut after dialing. WaveEvery is also the length of
	// the windows the live readers' latency is reported over, with or without waves.
	Waves      int
	WaveEvery  time.Duration
	WaveBehind int
	WaveCut    time.Duration
	// WavesProcess runs steady's waves in a process of their own (--mode=waves), under nice WavesNice, rather
	// than as goroutines of the tool's process. WaveStart is when --mode=waves counts its waves from (zero:
	// once it is ready).
	WavesProcess bool
	WavesNice    int
	WaveStart    time.Time

	// PrefillRecords are written before the readers connect, as fast as Kafka acknowledges them (prefill.go),
	// so that a run starts with a backlog to resume into.
	PrefillRecords int

	// Producers are the Kafka clients that produce at Rate together (producers.go), each with at most
	// ProducerInFlight records in flight (0: producerWindow's default for the rate).
	Producers        int
	ProducerInFlight int
}

// producesAtRate reports whether mode produces at --rate through startProducer, the modes --producers is for.
func producesAtRate(mode string) bool {
	return mode == modeSteady || mode == modeStorm || mode == modeSlow
}

// Bounds of the resume flags, far above any useful run, that keep the range computed from them from
// overflowing.
const (
	maxResumeCount  = 1000
	maxResumeBlock  = 1 << 20
	maxResumeBehind = 1 << 30
)

// resumeMaxBehind returns the default --resume-max-behind: 19,000, or farther when count resumes from
// minBehind on would be closer than partitions x (block+1) records. The records are written round-robin, so
// each partition's offsets of two neighboring resumes that far apart differ by more than a block, and the
// farther one starts in a block below every block the nearer one reads.
func resumeMaxBehind(partitions, count, minBehind int, block int64) int {
	return max(19000, minBehind+(count-1)*partitions*int(block+1))
}

// resumeRecords returns the default --resume-records for a farthest resume maxBehind behind: 1,000 more.
func resumeRecords(maxBehind int) int { return maxBehind + 1000 }

// parseConfig reads the flags. It returns flag.ErrHelp for -h.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(out)
	var urls, adminURLs, brokers, pids, waveStart string
	defBrokers := getenv("KAFKA_BROKERS")
	if defBrokers == "" {
		defBrokers = "127.0.0.1:9092"
	}
	fs.StringVar(&c.Mode, "mode", modeSteady, "scenario: steady, idle, storm, slow, resume, floor or waves")
	fs.StringVar(&urls, "url", "http://127.0.0.1:8080", "gateway base URLs, comma-separated; connection i goes to URL i mod n (loopback only)")
	fs.StringVar(&adminURLs, "admin-url", "http://127.0.0.1:9090",
		"the gateways' admin base URLs (/readyz, /metrics), comma-separated, one per --url in the same order (loopback only)")
	fs.StringVar(&c.Topic, "topic", "loadtest", "topic to produce to and stream")
	fs.StringVar(&brokers, "brokers", defBrokers, "Kafka seed brokers, comma-separated (loopback only); default $KAFKA_BROKERS, else 127.0.0.1:9092")
	fs.StringVar(&c.PositionTopic, "position-topic", "ssegate.positions", "topic of the checkpoints the gateways' v2 ids refer to (their position-topic)")
	fs.BoolVar(&c.CreateTopic, "create-topic", false, "create the topic (replication factor 1) if it does not exist")
	fs.IntVar(&c.Partitions, "partitions", 3, "partitions of a topic created by --create-topic (resume: default 1)")
	fs.IntVar(&c.Connections, "connections", 100, fmt.Sprintf("SSE connections to open, 1 to %d", maxConnections))
	fs.Float64Var(&c.Rate, "rate", 100, "records produced per second; 0 means as fast as possible")
	fs.IntVar(&c.Producers, "producers", 1,
		fmt.Sprintf("steady, storm, slow: Kafka clients producing in parallel, each with its own connections, its share of --rate and its own --producer-in-flight; 1 to %d", maxProducers))
	fs.IntVar(&c.ProducerInFlight, "producer-in-flight", 0,
		fmt.Sprintf("steady, storm, slow: records each producer has handed to Kafka and not yet seen acknowledged, at most (up to %d); 0: %d with a --rate, %d with --rate=0",
			maxProducerInFlight, inFlightAtRate, inFlightAtFull))
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long to produce (steady, slow) or to hold the connections (idle)")
	fs.IntVar(&c.Size, "size", 200, "bytes per record value (JSON, padded)")
	fs.IntVar(&c.AvroID, "avro-schema-id", 0, "steady, storm, slow: write the values in Avro, in a schema registry's wire format with this schema id (the schema of loadtest/testdata/avro/1.avsc), for a gateway serving the topic with value-format avro, which gives clients the same JSON; 0 writes JSON")
	fs.IntVar(&c.Keys, "keys", 1000, "distinct record keys, used round-robin")
	fs.StringVar(&pids, "gateway-pid", "", "gateway process ids, comma-separated, for CPU seconds and RSS per connection from /proc")
	fs.IntVar(&c.PerSource, "conns-per-source", 2000,
		"connections that share one loopback source address (127.1.0.1, 127.1.0.2, ...); 0 lets the kernel choose (one address, ports run out near 28,000)")
	fs.IntVar(&c.IdleProbe, "idle-probe", 3, "idle: records produced after measuring, which every connection must then receive; 0 skips the check")
	fs.IntVar(&c.ConnectPar, "connect-concurrency", 64, "connections being opened at the same time")
	fs.DurationVar(&c.ReadyWait, "ready-timeout", 60*time.Second, "how long to wait for every gateway's /readyz; 0 skips the check")
	fs.DurationVar(&c.DrainWait, "drain-timeout", 15*time.Second, "after producing stops, how long clients get to receive everything")
	fs.StringVar(&c.CPUProfile, "cpu-profile", "", "write the tool's own CPU profile for the whole run to this file (go tool pprof)")
	fs.StringVar(&c.Proto, "proto", protoH1,
		"how streams are spoken: h1 (HTTP/1.1, a TCP connection each), h2c (cleartext HTTP/2 with prior knowledge), h2 (HTTP/2 over TLS by ALPN, https:// URLs) "+
			"or ws (WebSocket, GET /ws/{topic}, a TCP connection each, cleartext); h2, h2c and ws in steady, idle and storm only")
	fs.IntVar(&c.WSAcks, "ws-acks", 0,
		"ws: ask for acknowledgements (ack=1) and acknowledge every N-th message (1: every message); 0: no acknowledgements")
	fs.IntVar(&c.WSMaxInFlight, "ws-max-in-flight", 100, "ws with --ws-acks: messages the gateway sends unacknowledged (max_in_flight), 1 to 10000, at least --ws-acks")
	fs.IntVar(&c.StreamsPerConn, "streams-per-conn", 100, fmt.Sprintf("h2, h2c: streams that share one HTTP/2 connection, 1 to %d", maxStreamsPerConn))
	fs.BoolVar(&c.Insecure, "insecure", false, "h2: accept the gateway's certificate without checking it")
	fs.StringVar(&c.CAFile, "ca-file", "", "h2: PEM file of the certificates to trust (a self-signed gateway certificate is its own); default the system's")
	fs.StringVar(&c.HeapProfile, "gateway-heap-profile", "",
		"idle: after the hold, write the first gateway's heap profile (/debug/pprof/heap on its admin port, which needs the gateway's pprof setting) to this file")
	fs.StringVar(&c.Shape, "shape", shapePlain, "steady: what each stream asks for: plain (every record), filter (connection i: filter=int(value.seq) % F == i mod F), conflate (conflate=--conflate) or snapshot (from=snapshot: the topic's state, then live)")
	fs.IntVar(&c.Topics, "topics", 1, "steady: topics of each stream, 1 to 10: /streams/T,T-2,...,T-N with T the --topic; record seq goes to topic seq mod N (the gateways must serve them all)")
	fs.IntVar(&c.FilterMod, "filter-mod", 0, "--shape=filter: F, the classes connections are filtered into; 0 means --connections (a distinct filter each)")
	fs.DurationVar(&c.Conflate, "conflate", 250*time.Millisecond, "--shape=conflate: the conflation interval, 10ms to 1m")
	fs.BoolVar(&c.JSON, "json", false, "after the summary line, print the full result as one JSON line")
	fs.DurationVar(&c.StormConsume, "storm-consume", 3*time.Second, "storm: how long clients consume before they all disconnect")
	fs.DurationVar(&c.StormGap, "storm-gap", 5*time.Second, "storm: how long records are produced while every client is away")
	fs.DurationVar(&c.StormWindow, "storm-window", time.Second, "storm: window over which all clients reconnect, each at a random moment")
	fs.BoolVar(&c.StormCross, "storm-cross", true, "storm: reconnect each client to the next gateway URL (another pod), not the one it left")
	fs.BoolVar(&c.StormStopProducing, "storm-stop-producing", false,
		"storm: stop producing at the end of the gap, so the clients reconnect to a topic that no longer grows, rather than once every client is served")
	fs.Float64Var(&c.SlowFraction, "slow-fraction", 0.1, "slow: fraction of connections that stop reading")
	fs.DurationVar(&c.SlowAfter, "slow-after", 0, "slow: when the slow connections stop reading; 0 means a third of --duration")
	fs.IntVar(&c.SlowRcvBuf, "slow-rcvbuf", 4096, "slow: socket receive buffer of the slow connections, bytes (0: kernel default)")
	fs.DurationVar(&c.SlowCheck, "slow-check", 3*time.Second, "slow: at the end, how long a slow connection reads what is left to see whether the gateway closed it")
	fs.IntVar(&c.ResumeRecords, "resume-records", 0,
		"resume: records written, each in a record batch of its own (default --resume-max-behind + 1000: 20000 unless the range is wider)")
	fs.IntVar(&c.ResumeCount, "resume-count", 10, "resume: resumes per phase (cold, then warm)")
	fs.IntVar(&c.ResumeMinBehind, "resume-min-behind", 1000, "resume: records behind the head of the nearest resume")
	fs.IntVar(&c.ResumeMaxBehind, "resume-max-behind", 0,
		"resume: records behind the head of the farthest resume (default 19000, or farther when the resumes would be closer than partitions x (resume-block+1) records)")
	fs.Int64Var(&c.ResumeBlock, "resume-block", 1024, "resume: offsets per block of the gateway's replay cache, to choose cold positions")
	fs.StringVar(&c.ResumeConn, "resume-conn", resumeFresh,
		"resume: fresh (time each resume from just before dialing its connection) or open (from the request, once the connection is made)")
	fs.StringVar(&c.FloorBin, "floor-bin", ".run/bin/floor",
		"floor: the floor program (go build -o .run/bin/floor ./loadtest/floor); a relative path is looked for in the working directory, then in each directory above it")
	fs.IntVar(&c.FloorWriters, "floor-writers", 0, "floor: the floor's writer goroutines; 0 leaves its default, the number of CPUs")
	fs.IntVar(&c.Waves, "waves", 0, "steady, waves: clients that resume in each wave, from --wave-behind records back; 0: no waves")
	fs.DurationVar(&c.WaveEvery, "wave-every", 20*time.Second,
		"steady, waves: time between waves, the first this long after producing starts; also the windows of the live readers' p99")
	fs.IntVar(&c.WaveBehind, "wave-behind", 48000, "steady, waves: records behind the head that a wave resumes from, spread evenly over the partitions")
	fs.DurationVar(&c.WaveCut, "wave-cut", 500*time.Millisecond,
		"steady, waves: how long a wave client reads, from just before dialing, before it hangs up with a reset")
	fs.BoolVar(&c.WavesProcess, "waves-process", false,
		"steady with --waves: run the waves in a process of their own (this tool with --mode=waves, under nice --waves-nice), started when producing starts")
	fs.IntVar(&c.WavesNice, "waves-nice", 19, "steady with --waves-process: the nice value of the waves' process, 0 (none) to 19")
	fs.StringVar(&waveStart, "wave-start", "",
		"waves: when the waves are counted from, RFC 3339 with fractions of a second (the first wave is --wave-every after it); default once the tool is ready")
	fs.IntVar(&c.PrefillRecords, "prefill-records", 0,
		"records written as fast as Kafka acknowledges them before the readers connect (a backlog for the waves); not in resume or floor")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.Mode == modeResume && !set["partitions"] {
		// One partition keeps the run short: a resume's first blocks span P x 1024 records with P partitions,
		// and the default range of the resumes grows with them.
		c.Partitions = 1
	}
	// The range of the resumes follows the partitions unless given, so that every resume of the cold phase
	// starts in blocks no earlier one read. It is computed from flags in bounds only, so that it cannot
	// overflow; validate refuses the others.
	if c.ResumeCount >= 1 && c.ResumeCount <= maxResumeCount && c.ResumeBlock >= 1 && c.ResumeBlock <= maxResumeBlock &&
		c.ResumeMinBehind >= 1 && c.ResumeMinBehind <= maxResumeBehind && c.Partitions >= 1 && c.Partitions <= 1000 {
		if !set["resume-max-behind"] {
			c.ResumeMaxBehind = resumeMaxBehind(c.Partitions, c.ResumeCount, c.ResumeMinBehind, c.ResumeBlock)
		}
		if !set["resume-records"] {
			c.ResumeRecords = resumeRecords(c.ResumeMaxBehind)
		}
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for u := range strings.SplitSeq(urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			c.URLs = append(c.URLs, strings.TrimSuffix(u, "/"))
		}
	}
	for u := range strings.SplitSeq(adminURLs, ",") {
		if u = strings.TrimSpace(u); u != "" {
			c.AdminURLs = append(c.AdminURLs, strings.TrimSuffix(u, "/"))
		}
	}
	for b := range strings.SplitSeq(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Brokers = append(c.Brokers, b)
		}
	}
	for p := range strings.SplitSeq(pids, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("--gateway-pid: %q is not a process id", p)
		}
		c.GatewayPIDs = append(c.GatewayPIDs, n)
	}
	if c.SlowAfter == 0 {
		c.SlowAfter = c.Duration / 3
	}
	if waveStart != "" {
		t, err := time.Parse(time.RFC3339Nano, waveStart)
		if err != nil {
			return c, fmt.Errorf("--wave-start: want a time like %s, got %q", time.RFC3339Nano, waveStart)
		}
		c.WaveStart = t
	}
	return c, c.validate()
}

// validateProto checks --proto and the flags that go with it.
func (c config) validateProto() error {
	switch c.Proto {
	case protoH1:
	case protoH2C, protoH2, protoWS:
		if c.Mode == modeSlow || c.Mode == modeResume {
			return fmt.Errorf("--proto=%s: mode %s speaks HTTP/1.1 only (it reads the stream's socket itself); use --proto=h1", c.Proto, c.Mode)
		}
		if c.Mode == modeFloor {
			return fmt.Errorf("--proto=%s: the floor speaks HTTP/1.1 only; use --proto=h1", c.Proto)
		}
	default:
		return fmt.Errorf("--proto: want h1, h2c, h2 or ws, got %q", c.Proto)
	}
	if c.WSAcks < 0 || (c.WSAcks > 0 && c.Proto != protoWS) {
		return errors.New("--ws-acks: 0 or more, with --proto=ws only")
	}
	if c.WSMaxInFlight < 1 || c.WSMaxInFlight > 10000 {
		return errors.New("--ws-max-in-flight: want 1 to 10000")
	}
	if c.WSAcks > c.WSMaxInFlight {
		// The gateway would stop at max_in_flight messages, and the tool wait for more before acknowledging.
		return fmt.Errorf("--ws-acks=%d: at most --ws-max-in-flight (%d), or the stream stalls", c.WSAcks, c.WSMaxInFlight)
	}
	if c.StreamsPerConn < 1 || c.StreamsPerConn > maxStreamsPerConn {
		return fmt.Errorf("--streams-per-conn: want 1 to %d", maxStreamsPerConn)
	}
	if (c.Insecure || c.CAFile != "") && c.Proto != protoH2 {
		return errors.New("--insecure and --ca-file: with --proto=h2 only (TLS)")
	}
	if c.Insecure && c.CAFile != "" {
		return errors.New("--insecure and --ca-file: one or the other")
	}
	return nil
}

// validate checks the configuration, including the loopback-only rule.
func (c config) validate() error {
	switch c.Mode {
	case modeSteady, modeIdle, modeStorm, modeSlow, modeResume, modeFloor, modeWaves:
	default:
		return fmt.Errorf("--mode: want steady, idle, storm, slow, resume, floor or waves, got %q", c.Mode)
	}
	if len(c.URLs) == 0 {
		return errors.New("--url: at least one gateway URL is required")
	}
	if err := c.validateProto(); err != nil {
		return err
	}
	if err := c.validateWaves(); err != nil {
		return err
	}
	for _, u := range c.URLs {
		if _, err := checkGatewayURL(u, c.Proto == protoH2); err != nil {
			return err
		}
	}
	for _, u := range c.AdminURLs {
		if _, err := checkGatewayURL(u, false); err != nil {
			return err
		}
	}
	if len(c.AdminURLs) != len(c.URLs) {
		return fmt.Errorf("--admin-url: want one admin URL per --url (%d), got %d", len(c.URLs), len(c.AdminURLs))
	}
	if len(c.Brokers) == 0 {
		return errors.New("--brokers: at least one broker is required")
	}
	for _, b := range c.Brokers {
		if err := checkBroker(b); err != nil {
			return err
		}
	}
	checks := []struct {
		bad  bool
		what string
	}{
		{c.Topic == "" || url.PathEscape(c.Topic) != c.Topic, "--topic: a plain Kafka topic name is required"},
		{c.Connections < 1 || c.Connections > maxConnections, fmt.Sprintf("--connections: want 1 to %d", maxConnections)},
		{c.Rate < 0, "--rate: want 0 (as fast as possible) or more"},
		{c.Producers < 1 || c.Producers > maxProducers, fmt.Sprintf("--producers: want 1 to %d", maxProducers)},
		{c.ProducerInFlight < 0 || c.ProducerInFlight > maxProducerInFlight, fmt.Sprintf("--producer-in-flight: want 0 to %d", maxProducerInFlight)},
		{(c.Producers != 1 || c.ProducerInFlight != 0) && !producesAtRate(c.Mode), "--producers and --producer-in-flight: steady, storm and slow only"},
		{c.Duration <= 0, "--duration: want more than 0"},
		{c.Size < 0 || c.Size > 1<<20, "--size: want 0 to 1MiB"},
		{c.AvroID < 0, "--avro-schema-id: want a schema id, or 0"},
		{c.Keys < 1, "--keys: want at least 1"},
		{c.Partitions < 1 || c.Partitions > 1000, "--partitions: want 1 to 1000"},
		{c.ConnectPar < 1, "--connect-concurrency: want at least 1"},
		{c.PerSource < 0 || (c.PerSource > 0 && (c.Connections-1)/c.PerSource >= sourceAddrs), "--conns-per-source: want 0 or more"},
		{c.IdleProbe < 0, "--idle-probe: want 0 or more"},
		{c.ReadyWait < 0 || c.DrainWait <= 0, "--ready-timeout and --drain-timeout: want more than 0"},
		{c.StormConsume < 0 || c.StormGap < 0 || c.StormWindow < 0, "--storm-*: durations must not be negative"},
		{c.SlowFraction <= 0 || c.SlowFraction >= 1, "--slow-fraction: want more than 0 and less than 1"},
		{c.SlowAfter < 0 || c.SlowAfter >= c.Duration, "--slow-after: want less than --duration"},
		{c.SlowRcvBuf < 0 || c.SlowCheck <= 0, "--slow-rcvbuf and --slow-check: want 0 or more, more than 0"},
		{c.ResumeCount < 1 || c.ResumeMinBehind < 1 || c.ResumeMaxBehind < c.ResumeMinBehind, "--resume-count and --resume-min-behind: want at least 1, --resume-max-behind: at least --resume-min-behind"},
		{c.ResumeCount > maxResumeCount || c.ResumeBlock > maxResumeBlock, fmt.Sprintf("--resume-count: at most %d; --resume-block: at most %d", maxResumeCount, maxResumeBlock)},
		{c.ResumeMinBehind > maxResumeBehind || c.ResumeMaxBehind > maxResumeBehind, fmt.Sprintf("--resume-min-behind and --resume-max-behind: at most %d", maxResumeBehind)},
		{c.ResumeMaxBehind >= c.ResumeRecords, "--resume-max-behind: want less than --resume-records"},
		{c.ResumeBlock < 1, "--resume-block: want at least 1"},
		{c.ResumeConn != resumeFresh && c.ResumeConn != resumeOpen, fmt.Sprintf("--resume-conn: want %s or %s, got %q", resumeFresh, resumeOpen, c.ResumeConn)},
		{c.HeapProfile != "" && c.Mode != modeIdle, "--gateway-heap-profile: idle mode only"},
		{c.Mode == modeFloor && !(c.Rate > 0), "--rate: the floor publishes at a rate, want more than 0"},
		{c.Mode == modeFloor && len(c.GatewayPIDs) > 0, "--gateway-pid: not with --mode=floor, which measures the floor it starts"},
		{!slices.Contains([]string{shapePlain, shapeFilter, shapeConflate, shapeSnapshot}, c.Shape), "--shape: want plain, filter, conflate or snapshot"},
		{c.Shape != shapePlain && c.Mode != modeSteady, "--shape: steady mode only"},
		{c.Topics < 1 || c.Topics > 10, "--topics: want 1 to 10"},
		{
			c.Topics > 1 && (c.Mode != modeSteady || c.Shape != shapePlain || c.PrefillRecords > 0 || c.Waves > 0 || c.AvroID > 0),
			"--topics: more than 1 in steady mode only, with --shape=plain, and without --prefill-records, --waves or --avro-schema-id",
		},
		{c.FilterMod < 0 || c.FilterMod > maxConnections, fmt.Sprintf("--filter-mod: want 0 to %d", maxConnections)},
		{c.Conflate < 10*time.Millisecond || c.Conflate > time.Minute, "--conflate: want 10ms to 1m"},
		{c.FloorBin == "" || c.FloorWriters < 0, "--floor-bin: a path is required; --floor-writers: want 0 or more"},
	}
	for _, ch := range checks {
		if ch.bad {
			return errors.New(ch.what)
		}
	}
	return nil
}
