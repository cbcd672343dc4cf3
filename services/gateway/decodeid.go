package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/checkpoint"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// decodeID prints each position id of args as one line per partition, "partition P offset O" (the last offset
// the client got or passed in P), for comparing with kcat (docs/runbooks/kcat.md). A compact (v2) id is
// resolved first, reading its checkpoint from the position topic of the brokers given by --kafka-brokers (or
// KAFKA_BROKERS); its v1 equivalent and checkpoint go to errOut, so that out has the same lines for both
// formats. An id that does not parse or resolve is reported on errOut with the reason the gateway would give
// in a resync, and makes the exit status 1.
func decodeID(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("decode-id", flag.ContinueOnError)
	fs.SetOutput(errOut)
	brokers := fs.String("kafka-brokers", os.Getenv("KAFKA_BROKERS"), "seed brokers (plaintext), to resolve v2 ids")
	ptopic := fs.String("position-topic", "ssegate.positions", "topic of the checkpoints v2 ids refer to")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	args = fs.Args()
	if len(args) == 0 {
		_, _ = io.WriteString(errOut, "usage: gateway decode-id [--kafka-brokers=B] [--position-topic=T] ID [ID...]\n")
		return 2
	}
	var res *checkpoint.Resolver
	status := 0
	for _, id := range args {
		var b []byte
		if len(args) > 1 {
			b = fmt.Appendf(b, "%s\n", id)
		}
		var v position.Vector
		var err error
		if position.IsCompact(id) {
			if res == nil {
				var closeLog func()
				if res, closeLog, err = newResolver(*brokers, *ptopic); err != nil {
					_, _ = fmt.Fprintf(errOut, "decode-id: %v\n", err)
					return 2
				}
				defer closeLog()
			}
			v, err = resolve(res, id, errOut)
		} else {
			v, err = position.Parse(id)
		}
		if err != nil {
			_, _ = out.Write(b)
			if _, werr := errOut.Write(fmt.Appendf(nil, "invalid id %q: %v\n", id, err)); werr != nil {
				return 1
			}
			status = 1
			continue
		}
		if v.Len() == 0 {
			b = append(b, "no partition: the client has seen nothing yet\n"...)
		}
		for i := range v.Len() {
			e := v.At(i)
			b = fmt.Appendf(b, "partition %d offset %d\n", e.Partition, e.Offset)
		}
		if _, err := out.Write(b); err != nil {
			return 1
		}
	}
	return status
}

func newResolver(brokers, topic string) (*checkpoint.Resolver, func(), error) {
	if brokers == "" {
		return nil, nil, fmt.Errorf("a v2 id needs --kafka-brokers (or KAFKA_BROKERS) to read its checkpoint")
	}
	log, err := replay.NewKafkaLog(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return nil, nil, err
	}
	gone := func(err error) bool {
		var oor *replay.OutOfRangeError
		return errors.As(err, &oor)
	}
	res, err := checkpoint.NewResolver(topic, log, gone, 16)
	if err != nil {
		log.Close()
		return nil, nil, err
	}
	return res, log.Close, nil
}

// resolve reads the checkpoint of a compact id and applies the id to it, telling errOut what it found.
func resolve(res *checkpoint.Resolver, id string, errOut io.Writer) (position.Vector, error) {
	c, err := position.ParseCompact(id)
	if err != nil {
		return position.Vector{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cp, err := res.Checkpoint(ctx, c.Ref())
	if err != nil {
		return position.Vector{}, err
	}
	v, err := c.Apply(cp.Vector)
	if err != nil {
		return position.Vector{}, err
	}
	_, _ = fmt.Fprintf(errOut, "%s = %s (checkpoint %s partition %d offset %d: topic %s, written by %s)\n",
		id, v, res.Topic(), c.Ref().Partition, c.Ref().Offset, cp.Topic, cp.Writer)
	return v, nil
}
