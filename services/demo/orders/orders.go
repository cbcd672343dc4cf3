// Package orders is the demo's order events: the JSON value and the headers of every record the demo
// producer writes, so that the runbooks' tests write records of the shape `make run` shows.
//
// Concurrency: everything here is a value or read-only.
package orders

import (
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Order is the JSON value of a demo record.
type Order struct {
	ID       string  `json:"id"`
	Status   string  `json:"status"`
	Customer string  `json:"customer"`
	Amount   float64 `json:"amount"`
	Seq      int     `json:"seq"`
	SentAt   string  `json:"sent_at"`
}

// Statuses are the order events' types, the records' "event" header.
var Statuses = []string{"order.created", "order.paid", "order.shipped", "order.cancelled"}

// Customers are the demo's users: each order is one of theirs.
var Customers = []string{"ada", "grace", "linus", "barbara", "ken", "margaret"}

// Key returns the key of order n: its id, "o-0042".
func Key(n int) string { return fmt.Sprintf("o-%04d", n) }

// Record returns o as a record: keyed by its id, its status as the "event" header.
func (o Order) Record() *kgo.Record {
	v, _ := json.Marshal(o) //nolint:errchkjson // a plain struct
	return &kgo.Record{Key: []byte(o.ID), Value: v, Headers: []kgo.RecordHeader{{Key: "event", Value: []byte(o.Status)}}}
}
