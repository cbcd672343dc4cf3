package lease

import (
	"context"
	"errors"
	"testing"
)

func TestLocalOwnsEverything(t *testing.T) {
	m := NewLocal("me/1")
	l, err := m.Acquire(t.Context(), "x")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := m.Acquire(t.Context(), "x")
	if err != nil || l2 == nil {
		t.Fatalf("second Acquire: %v", err)
	}
	if o, _ := m.Owner(t.Context(), "x"); o != "me/1" {
		t.Fatalf("owner %q", o)
	}
	if isLost(l) {
		t.Fatal("lost before Release")
	}
	if err := l.Release(t.Context()); err != nil || !isLost(l) {
		t.Fatalf("Release: %v, lost %v", err, isLost(l))
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := m.Acquire(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire on an ended context: %v", err)
	}
}
