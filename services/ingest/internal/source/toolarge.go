package source

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/sse"
	"github.com/ssegate/ssegate/services/ingest/internal/txn"
)

// reasonRecordTooLarge is the dead-letter reason of an event whose record the broker refused as larger
// than the topic's max.message.bytes (or the broker's limit).
const reasonRecordTooLarge = "record-too-large"

// redoTooLarge saves a transaction that failed because the broker refused records as too large. Without
// it the source would reconnect, be sent the same event again and fail forever.
//
// The broker refuses a whole batch, so the refused records are only suspects. Each attempt aborts the
// transaction and produces sent again in order, every suspect alone in its batch (txn.Producer.Send): a
// suspect refused alone is a culprit, and is replaced by a dead-letter record naming its id (or dropped
// without a dead-letter topic) and counted as oversized; a refused record that was not a suspect becomes
// one. Each failed attempt adds a culprit or a suspect, so the attempts are bounded by twice the number
// of records. It returns the counts of target and dead-letter records committed, or an error that is not
// a size refusal (the caller then reopens the producer as for any Kafka error).
func (s *Source) redoTooLarge(ctx context.Context, p *txn.Producer, sent []item, id string) (records, dead int, err error) {
	suspects := map[*kgo.Record]bool{}
	for _, r := range p.TooLarge() {
		suspects[r] = true
	}
	culprits := map[*kgo.Record]*kgo.Record{} // culprit -> its dead-letter record (nil: dropped)
	for attempt := 0; attempt <= 2*len(sent)+1; attempt++ {
		if aerr := p.Abort(ctx); aerr != nil {
			return 0, 0, aerr
		}
		records, dead, err = 0, 0, nil
		var alone *kgo.Record // the suspect whose Send failed
		for _, it := range sent {
			rec := it.rec
			if dl, bad := culprits[rec]; bad {
				if dl == nil {
					continue
				}
				rec = dl
			}
			if suspects[rec] {
				if err = p.Send(ctx, rec); err != nil {
					alone = rec
					break
				}
			} else if err = p.Add(ctx, rec); err != nil {
				break
			}
			if rec.Topic == s.opt.DeadLetterTopic && rec.Topic != s.spec.Topic {
				dead++
			} else {
				records++
			}
		}
		if err == nil {
			if err = p.Commit(ctx, id); err == nil {
				return records, dead, nil
			}
		}
		if !errors.Is(err, txn.ErrProduce) || !txn.IsTooLarge(err) {
			return 0, 0, err
		}
		refused := p.TooLarge()
		if alone != nil && len(refused) == 1 && refused[0] == alone {
			culprits[alone] = s.markTooLarge(sent, alone, err)
			continue
		}
		for _, r := range refused {
			suspects[r] = true
		}
	}
	return 0, 0, err
}

// markTooLarge counts and logs rec, the record of one of sent, as too large and returns its dead-letter
// record, or nil without a dead-letter topic.
func (s *Source) markTooLarge(sent []item, rec *kgo.Record, cause error) *kgo.Record {
	id := ""
	for _, it := range sent {
		if it.rec == rec {
			id = it.id
		}
	}
	s.stats.Oversized.Add(1)
	s.log.Warn("record too large for the topic", "err", cause, "id", id, "bytes", len(rec.Key)+len(rec.Value),
		"dead_letter", s.opt.DeadLetterTopic != "")
	if s.opt.DeadLetterTopic == "" {
		return nil
	}
	return s.deadLetterRecord("id", id, reasonRecordTooLarge)
}

// deadLetter returns the record written for an oversized event. The parser drops the event before its
// own id is known, so the record names the id before it.
func (s *Source) deadLetter(afterID string, cause error) *kgo.Record {
	reason := "event-too-large"
	if errors.Is(cause, sse.ErrLineTooLong) {
		reason = "line-too-long"
	}
	return s.deadLetterRecord("after_id", afterID, reason)
}

// deadLetterRecord builds a dead-letter record: JSON {"source", idField: id, "reason"} keyed by the source,
// with the source, id and reason also as headers.
func (s *Source) deadLetterRecord(idField, id, reason string) *kgo.Record {
	val, _ := json.Marshal(map[string]string{"source": s.spec.Name, idField: id, "reason": reason})
	return &kgo.Record{
		Topic: s.opt.DeadLetterTopic,
		Key:   []byte(s.spec.Name),
		Value: val,
		Headers: []kgo.RecordHeader{
			{Key: HeaderSource, Value: []byte(s.spec.Name)},
			{Key: HeaderID, Value: []byte(id)},
			{Key: "reason", Value: []byte(reason)},
		},
	}
}
