package limit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
)

// Kind is a kind of limit. Its String form is a metric label.
type Kind int

// Kinds of limits.
const (
	// KindRate: the pod's new streams per second.
	KindRate Kind = iota
	// KindStreams: the pod's open streams.
	KindStreams
	// KindIP: the streams of one client address, cluster-wide with Redis.
	KindIP
	// KindSubject: the streams of one token subject, cluster-wide with Redis.
	KindSubject
	// KindStore: the quota store could not answer and the limiter fails closed.
	KindStore

	numKinds
)

var kindNames = [numKinds]string{"pod_rate", "pod_streams", "ip", "subject", "quota_store"}

// String returns the kind's label, e.g. "ip".
func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return "unknown"
	}
	return kindNames[k]
}

// Kinds returns every Kind, for pre-registering metric series.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// Op is a store operation. Its String form is a metric label.
type Op int

// Store operations.
const (
	// OpAcquire takes a slot for a new stream.
	OpAcquire Op = iota
	// OpRelease gives a slot back.
	OpRelease
	// OpRefresh keeps this pod's slots from expiring.
	OpRefresh

	numOps
)

var opNames = [numOps]string{"acquire", "release", "refresh"}

// String returns the operation's label, e.g. "acquire".
func (o Op) String() string {
	if o < 0 || o >= numOps {
		return "unknown"
	}
	return opNames[o]
}

// Ops returns every Op, for pre-registering metric series.
func Ops() []Op {
	os := make([]Op, numOps)
	for i := range os {
		os[i] = Op(i)
	}
	return os
}

// Key is one identity whose streams a Store counts, and its maximum.
type Key struct {
	// Kind is KindIP or KindSubject.
	Kind Kind
	// Name names the identity within its kind (see IPKey and SubjectKey).
	Name string
	// Max is the most streams the identity may have open at once; at least 1.
	Max int
}

// IPKey returns the key of a client address: an IPv4 address as it is, an IPv6 address by its /64 network
// (one subscriber's allocation, which a client can walk through at will).
func IPKey(ip netip.Addr, maxStreams int) Key {
	ip = ip.Unmap().WithZone("")
	name := ip.String()
	if ip.Is6() {
		name = netip.PrefixFrom(ip, 64).Masked().String()
	}
	return Key{Kind: KindIP, Name: name, Max: maxStreams}
}

// SubjectKey returns the key of a token subject: a hash of it, so that the store holds neither the subject
// (often an e-mail address) nor a key of unbounded length.
func SubjectKey(subject string, maxStreams int) Key {
	h := sha256.Sum256([]byte(subject))
	return Key{Kind: KindSubject, Name: hex.EncodeToString(h[:16]), Max: maxStreams}
}

// id is the key's name in a store.
func (k Key) id() string { return k.Kind.String() + ":" + k.Name }

// Slot is what Store.Acquire took: one stream under each of its keys. The zero Slot holds nothing.
type Slot struct {
	member string   // the slot's own id in the store (Redis: the sorted set member)
	keys   []string // the store names of its keys
	// unsure says the store did not answer the acquire: it may take the slot at any later moment (Redis
	// runs a script whose answer was lost when it gets it), so giving the slot back must also stop that.
	unsure bool
}

// Store counts the streams of identities. Local and Redis implement it; both keep to this contract, which
// the same table test checks against each.
type Store interface {
	// Acquire takes one stream under every key, or under none: when a key's count has reached its Max it
	// returns a *Refusal of that key's Kind (the first such key); when the store cannot answer, a
	// *StoreError, possibly with a provisional Slot that the caller must Release whether it admits the
	// stream anyway (fail-open: the store counts it once it can) or not. No keys take nothing and return
	// the zero Slot.
	Acquire(ctx context.Context, keys []Key) (Slot, error)
	// Release gives a slot back, once. It never blocks. The zero Slot is fine.
	Release(s Slot)
	// Count returns the streams counted under key now.
	Count(ctx context.Context, key Key) (int, error)
	// Close stops the store, giving back every slot it still holds.
	Close() error
}
