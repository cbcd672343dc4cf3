package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
)

// checkpoints resolves the checkpoints compact (v2) ids name: on first use it reads the position topic from
// its start, on one client, and keeps every checkpoint, so the tracker checks v2 streams as exactly as v1
// ones. Each checkpoint is read from Kafka once.
type checkpoints struct {
	brokers []string
	topic   string

	once sync.Once
	cl   *kgo.Client
	err  error // the client could not be made

	mu      sync.Mutex
	m       map[position.Ref]position.Checkpoint // by where the record is (Ref.Record)
	records int64                                // checkpoint records read
	bytes   int64                                // their keys and values
}

// checkpointWait is how long a compact id waits for its checkpoint to be read: a gateway names only
// acknowledged ones, so it comes soon, unless the id is wrong.
const checkpointWait = 10 * time.Second

func newCheckpoints(brokers []string, topic string) *checkpoints {
	return &checkpoints{brokers: brokers, topic: topic, m: map[position.Ref]position.Checkpoint{}}
}

func (c *checkpoints) start() {
	c.cl, c.err = kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.ConsumeTopics(c.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if c.err != nil {
		return
	}
	go func() {
		for {
			fs := c.cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				cp, err := position.ParseCheckpoint(r.Value)
				if err != nil {
					return // not a checkpoint: an id naming it finds nothing
				}
				c.mu.Lock()
				c.m[position.Ref{Partition: r.Partition, Offset: r.Offset}] = cp
				c.records++
				c.bytes += int64(len(r.Key) + len(r.Value))
				c.mu.Unlock()
			})
		}
	}()
}

// read returns how many checkpoint records have been read, and their key and value bytes.
func (c *checkpoints) read() (records, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.records, c.bytes
}

// close stops reading.
func (c *checkpoints) close() {
	if c.cl != nil {
		c.cl.Close()
	}
}

// base returns the vector of the checkpoint at ref, waiting up to checkpointWait for it to be read; an id whose
// check is not the record's is an error.
func (c *checkpoints) base(ref position.Ref) (position.Vector, error) {
	c.once.Do(c.start)
	if c.err != nil {
		return position.Vector{}, c.err
	}
	deadline := time.Now().Add(checkpointWait)
	for {
		c.mu.Lock()
		cp, ok := c.m[ref.Record()]
		c.mu.Unlock()
		switch {
		case ok && !ref.Fits(&cp):
			return position.Vector{}, fmt.Errorf("the id's check %d is not that of the checkpoint at %s partition %d offset %d (%d)", ref.Check, c.topic, ref.Partition, ref.Offset, cp.Sum)
		case ok:
			return cp.Vector, nil
		}
		if time.Now().After(deadline) {
			return position.Vector{}, fmt.Errorf("no checkpoint at %s partition %d offset %d", c.topic, ref.Partition, ref.Offset)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
