package stream

import "errors"

// errReplay is a failure to read what the ring does not hold from Kafka.
var errReplay = errors.New("stream: replay failed")

// errWrite is a failure to write to the client.
var errWrite = errors.New("stream: write failed")

// errDrained ends a stream that was still waiting to start when the server drained, or that started while it
// was leaving.
var errDrained = errors.New("stream: server draining")

// errTokenExpired ends a stream whose token expired while it was waiting for its topic.
var errTokenExpired = errors.New("stream: token expired")

// errRejoin is returned by pull when the topic's partitions changed (partitions were added, or the topic was
// deleted and created again): the stream joins the ring again and catches up as a resume, on a goroutine of
// its own, so that a key filter covers the partitions its keys now go to and a position past a recreated
// topic's end gets an ahead resync.
var errRejoin = errors.New("stream: the topic's partitions changed")

// errPending refuses a write that would take the bytes of writes not finished past Config.PendingBytes.
var errPending = errors.New("stream: too many bytes of unfinished writes to slow clients")
