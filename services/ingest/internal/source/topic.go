package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicCreation says whether and how ingest creates a topic it writes to that does not exist.
type TopicCreation struct {
	// Enabled creates the topic when it is missing. False (the default) reports it missing instead
	// (*TopicMissingError) and retries with backoff until someone creates it.
	Enabled bool
	// Partitions is the partition count of a created topic. Zero means the broker's default
	// (num.partitions).
	Partitions int32
	// ReplicationFactor is the replication factor of a created topic. Zero means the broker's default
	// (default.replication.factor).
	ReplicationFactor int16
}

// topicReadyTimeout bounds the wait for a created topic's partitions to have leaders.
const topicReadyTimeout = 10 * time.Second

// ensureTopics checks, before each start of the source, that the topics it writes to exist (the
// destination topic and the dead-letter topic, if any), creating a missing one when its TopicCreation
// allows. A missing topic that is not created gives a *TopicMissingError; a failure to ask Kafka gives the
// Kafka error.
//
// Without this check a missing topic shows only as a failed produce, after the source has connected to the
// upstream and read events; the connection delivered events, so the backoff was reset and the source
// reconnected about once a second forever, reporting Kafka's raw text.
func (s *Source) ensureTopics(ctx context.Context) error {
	// kadm answers Metadata from the client's cache, which would hide a just-created topic for
	// MetadataMinAge (5s by default): keep it short for this short-lived client.
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, s.opt.Kafka...), kgo.MetadataMinAge(10*time.Millisecond))...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	adm := kadm.NewClient(cl)
	defer adm.Close()
	if err := ensureTopic(ctx, adm, s.spec.Topic, "destination", s.spec.CreateTopic); err != nil {
		return err
	}
	if dlt := s.opt.DeadLetterTopic; dlt != "" && dlt != s.spec.Topic {
		return ensureTopic(ctx, adm, dlt, "dead-letter", s.opt.CreateDeadLetterTopic)
	}
	return nil
}

// ensureTopic makes sure topic exists, creating it if c allows; role names it in errors.
func ensureTopic(ctx context.Context, adm *kadm.Client, topic, role string, c TopicCreation) error {
	exists, err := topicExists(ctx, adm, topic)
	if err != nil || exists {
		return err
	}
	if !c.Enabled {
		return &TopicMissingError{Topic: topic, Role: role}
	}
	partitions, replicas := int32(-1), int16(-1) // -1: the broker's default
	if c.Partitions > 0 {
		partitions = c.Partitions
	}
	if c.ReplicationFactor > 0 {
		replicas = c.ReplicationFactor
	}
	resp, err := adm.CreateTopic(ctx, partitions, replicas, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) { // another source or replica may create it too
		return &TopicMissingError{Topic: topic, Role: role, Create: true, Err: err}
	}
	// The topic is created; wait until the brokers know its leaders, so that the first produce does not
	// fail with an unknown topic.
	wctx, cancel := context.WithTimeout(ctx, topicReadyTimeout)
	defer cancel()
	for !topicReady(wctx, adm, topic) {
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-t.C:
		case <-wctx.Done():
			t.Stop()
			// Not ready in time: carry on; a produce that fails is retried like any Kafka failure.
			return ctx.Err()
		}
	}
	return nil
}

// topicExists reports whether the cluster knows topic.
func topicExists(ctx context.Context, adm *kadm.Client, topic string) (bool, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return false, fmt.Errorf("metadata of topic %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	switch {
	case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		return false, nil
	case td.Err != nil:
		return false, fmt.Errorf("metadata of topic %s: %w", topic, td.Err)
	}
	return true, nil
}

// topicReady reports whether every partition of topic has a leader; an error counts as not yet.
func topicReady(ctx context.Context, adm *kadm.Client, topic string) bool {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return false
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		return false
	}
	for _, p := range td.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}
