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

// now is the Lua prelude that reads Redis's clock, in ms.
const luaNow = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// claimPattern matches a claim's value: owner, until, partition, from, digest.
const claimPattern = `'^c|(.*)|(%d+)|(%-?%d+)|(%-?%d+)|(%x*)$'`

// claimScript: KEYS[1] the entry; ARGV owner, lease ms, window ms, partition, from, digest. Returns {state,
// value}: state 0 claimed, 1 taken over, 2 held, 3 done, 4 conflict (another digest); value the entry before (or
// "" when new).
var claimScript = redis.NewScript(luaNow + `
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], 'c|' .. ARGV[1] .. '|' .. (now + tonumber(ARGV[2])) .. '|' .. ARGV[4] .. '|' .. ARGV[5] .. '|' .. ARGV[6], 'PX', ARGV[3])
  return {0, ''}
end
if string.sub(v, 1, 2) == 'd|' then
  if string.match(v, '|(%x*)$') ~= ARGV[6] then return {4, v} end
  return {3, v}
end
local owner, untilms, part, from, digest = string.match(v, ` + claimPattern + `)
if untilms == nil then return redis.error_reply('malformed entry') end
if digest ~= ARGV[6] then return {4, v} end
if tonumber(untilms) > now then return {2, v} end
redis.call('SET', KEYS[1], 'c|' .. ARGV[1] .. '|' .. (now + tonumber(ARGV[2])) .. '|' .. part .. '|' .. from .. '|' .. digest, 'KEEPTTL')
return {1, v}
`)

// ownedScript: KEYS[1] the entry; ARGV owner, what, then what's arguments. When owner holds the claim, sets
// its value and returns 1, else returns 0. what: "extend" (lease ms): held until now + lease; "done"
// (partition, offset, time ms): the result; "release" (from): not held, from raised to it.
var ownedScript = redis.NewScript(luaNow + `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local owner, untilms, part, from, digest = string.match(v, ` + claimPattern + `)
if owner ~= ARGV[1] then return 0 end
local nv
if ARGV[2] == 'extend' then
  nv = 'c|' .. owner .. '|' .. (now + tonumber(ARGV[3])) .. '|' .. part .. '|' .. from .. '|' .. digest
elseif ARGV[2] == 'done' then
  nv = 'd|' .. ARGV[3] .. '|' .. ARGV[4] .. '|' .. ARGV[5] .. '|' .. digest
else
  nv = 'c|' .. owner .. '|0|' .. part .. '|' .. math.max(tonumber(from), tonumber(ARGV[3])) .. '|' .. digest
end
redis.call('SET', KEYS[1], nv, 'KEEPTTL')
return 1
`)

// Claim implements Store.
func (s *RedisStore) Claim(ctx context.Context, key, owner string, lease time.Duration, digest string, partition int32, from int64) (Entry, error) {
	res, err := claimScript.Run(ctx, s.rdb, []string{s.prefix + key}, owner, lease.Milliseconds(), s.window.Milliseconds(), partition, from, digest).Slice()
	if err != nil {
		return Entry{}, fmt.Errorf("publish: idempotency store: %w", err)
	}
	if len(res) != 2 {
		return Entry{}, fmt.Errorf("publish: idempotency store: unexpected answer %v", res)
	}
	state, _ := res[0].(int64)
	before, _ := res[1].(string)
	if state == 0 {
		return Entry{State: Claimed, Partition: partition, From: from, Digest: digest}, nil
	}
	p, err := parseValue(before)
	if err != nil {
		return Entry{}, err
	}
	return p.entry(State(state)), nil
}

// owned runs ownedScript.
func (s *RedisStore) owned(ctx context.Context, key, owner string, args ...any) (bool, error) {
	n, err := ownedScript.Run(ctx, s.rdb, []string{s.prefix + key}, append([]any{owner}, args...)...).Int()
	if err != nil {
		return false, fmt.Errorf("publish: idempotency store: %w", err)
	}
	return n == 1, nil
}

// Extend implements Store.
func (s *RedisStore) Extend(ctx context.Context, key, owner string, lease time.Duration) (bool, error) {
	return s.owned(ctx, key, owner, "extend", lease.Milliseconds())
}

// Complete implements Store.
func (s *RedisStore) Complete(ctx context.Context, key, owner string, partition int32, offset int64, ts time.Time) (bool, error) {
	return s.owned(ctx, key, owner, "done", partition, offset, ts.UnixMilli())
}

// Release implements Store.
func (s *RedisStore) Release(ctx context.Context, key, owner string, from int64) error {
	_, err := s.owned(ctx, key, owner, "release", from)
	return err
}
