package publish

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisStore keeps entries in Redis, shared by every pod and outliving them: a key published through one pod
// is a duplicate on another, and after a restart. Each operation is one script, atomic in Redis, whose clock
// (TIME) decides whether a claim is still held, so the pods' clocks do not matter.
type RedisStore struct {
	rdb    redis.UniversalClient
	prefix string
	window time.Duration
}

// NewRedisStore returns a store of entries under prefix, each kept for window.
func NewRedisStore(rdb redis.UniversalClient, prefix string, window time.Duration) *RedisStore {
	return &RedisStore{rdb: rdb, prefix: prefix, window: window}
}

// claimScript: KEYS[1] the entry; ARGV owner, lease ms, window ms, partition, from. Returns {state, value}:
// state 0 claimed, 1 taken over, 2 held, 3 done; value the entry before (or "" when new).
var claimScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], 'c|' .. ARGV[1] .. '|' .. (now + tonumber(ARGV[2])) .. '|' .. ARGV[4] .. '|' .. ARGV[5], 'PX', ARGV[3])
  return {0, ''}
end
if string.sub(v, 1, 2) == 'd|' then return {3, v} end
local owner, untilms, part, from = string.match(v, '^c|(.*)|(%d+)|(%-?%d+)|(%-?%d+)$')
if untilms == nil then return redis.error_reply('malformed entry') end
if tonumber(untilms) > now then return {2, v} end
redis.call('SET', KEYS[1], 'c|' .. ARGV[1] .. '|' .. (now + tonumber(ARGV[2])) .. '|' .. part .. '|' .. from, 'KEEPTTL')
return {1, v}
`)

// ownedScript: KEYS[1] the entry; ARGV owner, new value (or "" to end the claim now). Sets the value when
// owner holds the claim; returns 1 then, else 0.
var ownedScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local owner, untilms, part, from = string.match(v, '^c|(.*)|(%d+)|(%-?%d+)|(%-?%d+)$')
if owner ~= ARGV[1] then return 0 end
local nv = ARGV[2]
if nv == '' then nv = 'c|' .. owner .. '|0|' .. part .. '|' .. from end
redis.call('SET', KEYS[1], nv, 'KEEPTTL')
return 1
`)

// Claim implements Store.
func (s *RedisStore) Claim(ctx context.Context, key, owner string, lease time.Duration, partition int32, from int64) (Entry, error) {
	res, err := claimScript.Run(ctx, s.rdb, []string{s.prefix + key}, owner, lease.Milliseconds(), s.window.Milliseconds(), partition, from).Slice()
	if err != nil {
		return Entry{}, fmt.Errorf("publish: idempotency store: %w", err)
	}
	if len(res) != 2 {
		return Entry{}, fmt.Errorf("publish: idempotency store: unexpected answer %v", res)
	}
	state, _ := res[0].(int64)
	before, _ := res[1].(string)
	if state == 0 {
		return Entry{State: Claimed, Partition: partition, From: from}, nil
	}
	p, err := parseValue(before)
	if err != nil {
		return Entry{}, err
	}
	return p.entry(State(state)), nil
}

// Complete implements Store.
func (s *RedisStore) Complete(ctx context.Context, key, owner string, partition int32, offset int64, ts time.Time) (bool, error) {
	n, err := ownedScript.Run(ctx, s.rdb, []string{s.prefix + key}, owner, doneValue(partition, offset, ts)).Int()
	if err != nil {
		return false, fmt.Errorf("publish: idempotency store: %w", err)
	}
	return n == 1, nil
}

// Release implements Store.
func (s *RedisStore) Release(ctx context.Context, key, owner string) error {
	if _, err := ownedScript.Run(ctx, s.rdb, []string{s.prefix + key}, owner, "").Int(); err != nil {
		return fmt.Errorf("publish: idempotency store: %w", err)
	}
	return nil
}
