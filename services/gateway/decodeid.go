package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkaconn"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/settings"
	"github.com/ssegate/ssegate/services/gateway/internal/app"
	"github.com/ssegate/ssegate/services/gateway/internal/checkpoint"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// decodeID prints each position id of args as one line per partition, "partition P offset O" (the last offset
// the client got or passed in P), for comparing with kcat (docs/runbooks/kcat.md); the id of a stream of
// several topics as "topic T partition P offset O". A compact (v2) id is
// resolved first, reading its checkpoint from the position topic; its v1 equivalent and checkpoint go to
// errOut, so that out has the same lines for both formats. The Kafka connection is the gateway's settings
// (brokers, TLS, SASL), from flags, the environment (SSEGATE_KAFKA_..., KAFKA_BROKERS) or the gateway's own
// config file (--config; its other settings are ignored), so that in a pod it reads the checkpoints as the
// gateway does. An id that does not parse or resolve is reported on errOut with the reason the gateway would
// give in a resync, and makes the exit status 1.
func decodeID(args []string, getenv func(string) string, out, errOut io.Writer) int {
	var kc kafkaconn.Config
	ptopic := app.DefaultPositionTopic
	ss := append(settings.Kafka(&kc, "SSEGATE_"), settings.Setting{
		Name: "position-topic", Envs: []string{"SSEGATE_POSITION_TOPIC"},
		Usage: "topic of the checkpoints v2 ids refer to (default " + app.DefaultPositionTopic + ")", Value: settings.String(&ptopic),
	})
	var ids []string
	_, err := settings.Load(ss, args, getenv, settings.Options{
		Program: "decode-id", ConfigUsage: "optional YAML file of settings; the gateway's own works (its other settings are ignored)",
		OtherKeys: true, Rest: &ids, Out: errOut,
	})
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		_, _ = fmt.Fprintf(errOut, "decode-id: %v\n", err)
	}
	if err != nil || len(ids) == 0 {
		_, _ = io.WriteString(errOut, "usage: gateway decode-id [--config=FILE] [--kafka-...] [--position-topic=T] ID [ID...]\n")
		return 2
	}
	args = ids
	var res *checkpoint.Resolver
	var closeLog func()
	defer func() {
		if closeLog != nil {
			closeLog()
		}
	}()
	// compact resolves a compact id (a stream's, or a topic's part of one), reading its checkpoint from Kafka.
	// A resolver that cannot be made (the Kafka settings) is a usage error: setupErr, exit status 2.
	var setupErr error
	compact := func(id string) (position.Vector, error) {
		if res == nil {
			if res, closeLog, setupErr = newResolver(kc, ptopic); setupErr != nil {
				return position.Vector{}, setupErr
			}
		}
		return resolve(res, id, errOut)
	}
	status := 0
	for _, id := range args {
		var b []byte
		if len(args) > 1 {
			b = fmt.Appendf(b, "%s\n", id)
		}
		tps, err := positionsOf(id, compact)
		if setupErr != nil {
			_, _ = fmt.Fprintf(errOut, "decode-id: %v\n", setupErr)
			return 2
		}
		if err != nil {
			_, _ = out.Write(b)
			if _, werr := errOut.Write(fmt.Appendf(nil, "invalid id %q: %v\n", id, err)); werr != nil {
				return 1
			}
			status = 1
			continue
		}
		for _, tp := range tps {
			b = appendPositions(b, tp.Topic, tp.Pos)
		}
		if _, err := out.Write(b); err != nil {
			return 1
		}
	}
	return status
}

// positionsOf decodes an id into its topics' positions (one, with no topic name, for a one-topic id),
// resolving compact ids and the compact parts of several-topic ids through compact.
func positionsOf(id string, compact func(string) (position.Vector, error)) ([]position.TopicPosition, error) {
	switch {
	case position.IsTopics(id):
		tps, err := position.ParseTopics(id)
		for i := range tps {
			if err == nil && tps[i].Compact != "" {
				tps[i].Pos, err = compact(tps[i].Compact)
			}
		}
		return tps, err
	case position.IsCompact(id):
		v, err := compact(id)
		return []position.TopicPosition{{Pos: v}}, err
	default:
		v, err := position.Parse(id)
		return []position.TopicPosition{{Pos: v}}, err
	}
}

func newResolver(kc kafkaconn.Config, topic string) (*checkpoint.Resolver, func(), error) {
	if len(kc.Brokers) == 0 {
		return nil, nil, fmt.Errorf("a v2 id needs --kafka-brokers (or KAFKA_BROKERS) to read its checkpoint")
	}
	opts, err := kc.Opts()
	if err != nil {
		return nil, nil, err
	}
	log, err := replay.NewKafkaLog(opts...)
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
	if err := checkpoint.Matches(c.Ref(), cp); err != nil {
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

// appendPositions appends a position's lines, "partition P offset O", each after "topic T " for a topic of a
// stream of several topics (topic not empty).
func appendPositions(b []byte, topic string, v position.Vector) []byte {
	prefix := ""
	if topic != "" {
		prefix = "topic " + topic + " "
	}
	if v.Len() == 0 {
		b = fmt.Appendf(b, "%sno partition: the client has seen nothing yet\n", prefix)
	}
	for i := range v.Len() {
		e := v.At(i)
		b = fmt.Appendf(b, "%spartition %d offset %d\n", prefix, e.Partition, e.Offset)
	}
	return b
}
