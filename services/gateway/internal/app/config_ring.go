package app

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"

	"github.com/ssegate/ssegate/pkg/settings"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// minRing is the smallest ring capacity a setting may give a topic.
const minRing = 64 << 10

// ringSettings are the settings that size the topics' rings: ring-bytes per topic, or one ring-budget for
// the pod shared by the topics above a ring-floor; topic-ring-bytes gives single topics their own size.
func ringSettings(c *Config) []settings.Setting {
	return []settings.Setting{
		setting("ring-bytes", "memory of each topic's ring of recent frames (bytes, or with KiB/MiB/GiB); not with ring-budget",
			settings.Bytes(&c.RingBytes)),
		setting("ring-budget", "memory of all the topics' rings together, shared by their traffic (bytes, or with KiB/MiB/GiB); 0 means none: ring-bytes per topic",
			settings.Bytes(&c.RingBudget)),
		setting("ring-floor", "with ring-budget, the smallest ring of a topic (bytes, or with KiB/MiB/GiB)",
			settings.Bytes(&c.RingFloor)),
		setting("topic-ring-bytes", "per-topic ring sizes, comma-separated topic=size pairs (orders=256MiB,audit=1MiB): instead of ring-bytes, or fixed shares of ring-budget",
			settings.Map(&c.TopicRingBytes)),
		setting("topic-snapshot-index", "per-topic key indexes for from=snapshot, comma-separated topic=size pairs (prices=64MiB): the latest record of every key, kept in memory up to the size, read from the topic's start at startup",
			settings.Map(&c.TopicSnapshotIndex)),
	}
}

// ringGiven records which ring settings a flag, variable or file gave, so that a setting that does not go
// with another is refused even when it is given its default value.
type ringGiven struct {
	bytes, floor bool
}

// watch makes the ring-bytes and ring-floor settings of ss record that they were given.
func (g *ringGiven) watch(ss []settings.Setting) {
	for i, s := range ss {
		switch s.Name {
		case "ring-bytes":
			ss[i].Value = &givenValue{Value: s.Value, given: &g.bytes}
		case "ring-floor":
			ss[i].Value = &givenValue{Value: s.Value, given: &g.floor}
		}
	}
}

// check refuses ring-bytes together with ring-budget, and ring-floor without it.
func (g *ringGiven) check(c Config) error {
	if c.RingBudget != 0 && g.bytes {
		return errors.New("invalid setting ring-budget (SSEGATE_RING_BUDGET): not with ring-bytes (SSEGATE_RING_BYTES): with a budget the rings are sized by their traffic; set one of the two (topic-ring-bytes gives a topic its own size)")
	}
	if c.RingBudget == 0 && g.floor {
		return errors.New("invalid setting ring-floor (SSEGATE_RING_FLOOR): only goes with ring-budget, which is not set")
	}
	return nil
}

// givenValue is a flag.Value that records that it was set.
type givenValue struct {
	flag.Value
	given *bool
}

func (v *givenValue) String() string {
	if v == nil || v.Value == nil {
		return ""
	}
	return v.Value.String()
}

func (v *givenValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return err
	}
	*v.given = true
	return nil
}

// validateRings checks the ring settings together. Its errors name the settings at fault.
func (c Config) validateRings() error {
	const (
		budgetSetting = "invalid setting ring-budget (SSEGATE_RING_BUDGET)"
		topicSetting  = "invalid setting topic-ring-bytes (SSEGATE_TOPIC_RING_BYTES)"
	)
	if c.RingBytes < minRing {
		return errors.New("invalid setting ring-bytes (SSEGATE_RING_BYTES): must be at least 64KiB")
	}
	if c.RingBudget != 0 && c.RingBudget < minRing {
		return fmt.Errorf("%s: must be 0 (none: ring-bytes per topic) or at least 64KiB", budgetSetting)
	}
	if c.RingFloor < minRing {
		return errors.New("invalid setting ring-floor (SSEGATE_RING_FLOOR): must be at least 64KiB")
	}
	sizes, err := c.topicRingBytes()
	if err != nil {
		return fmt.Errorf("%s: %w", topicSetting, err)
	}
	if _, err := c.topicBytes(c.TopicSnapshotIndex); err != nil {
		return fmt.Errorf("invalid setting topic-snapshot-index (SSEGATE_TOPIC_SNAPSHOT_INDEX): %w", err)
	}
	if c.RingBudget == 0 {
		return nil
	}
	var fixed int64
	for _, b := range sizes {
		fixed += b
	}
	if fixed > c.RingBudget {
		return fmt.Errorf("%s: the topics' own sizes (topic-ring-bytes) add up to %s, more than the budget of %s", budgetSetting, sizeText(fixed), sizeText(c.RingBudget))
	}
	shared := int64(len(uniq(c.Topics)) - len(sizes))
	if need := fixed + shared*c.RingFloor; need > c.RingBudget {
		return fmt.Errorf("%s: %s is less than %d topics x ring-floor %s plus the topics' own sizes %s = %s; raise the budget or lower ring-floor",
			budgetSetting, sizeText(c.RingBudget), shared, sizeText(c.RingFloor), sizeText(fixed), sizeText(need))
	}
	return nil
}

// topicRingBytes parses topic-ring-bytes: each topic served, each size at least 64KiB.
func (c Config) topicRingBytes() (map[string]int64, error) { return c.topicBytes(c.TopicRingBytes) }

// topicBytes parses a per-topic byte size setting (topic-ring-bytes, topic-snapshot-index): each topic
// served, each size at least 64KiB.
func (c Config) topicBytes(m map[string]string) (map[string]int64, error) {
	out := make(map[string]int64, len(m))
	err := c.perTopic(m, func(topic, v string) error {
		var n int64
		if err := settings.Bytes(&n).Set(v); err != nil {
			return fmt.Errorf("topic %s: %w", topic, err)
		}
		if n < minRing {
			return fmt.Errorf("topic %s: must be at least 64KiB, got %q", topic, v)
		}
		out[topic] = n
		return nil
	})
	return out, err
}

// ringFeed sets the ring sizes of a feed configuration from a validated configuration.
func (c Config) ringFeed(fc *feed.Config) error {
	sizes, err := c.topicRingBytes()
	if err != nil {
		return err
	}
	fc.RingBytes = int(c.RingBytes)
	fc.RingBudget = c.RingBudget
	fc.RingFloor = c.RingFloor
	fc.TopicRingBytes = sizes
	fc.KeyIndex, err = c.topicBytes(c.TopicSnapshotIndex)
	return err
}

// sizeText writes a byte size the way the settings take it, in the largest binary unit that divides it.
func sizeText(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// uniq returns the distinct names.
func uniq(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}
