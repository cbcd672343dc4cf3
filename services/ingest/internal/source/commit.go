package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ssegate/ssegate/services/ingest/internal/txn"
)

// batch produces the items into transactions, committing each with the last id it covers, every
// CommitInterval or CommitEvents, or early when the reader waits for bytes the open transaction holds
// (see buffer), until the buffer's channel is closed (the connection ended: what was read is committed),
// Kafka fails (ReasonKafka) or ctx ends (ReasonShutdown).
func (s *Source) batch(ctx context.Context, p *txn.Producer, buf *buffer, committed string) outcome {
	pendingID, n, records, dead := committed, 0, 0, 0
	var held int64 // bytes of the open transaction's items, released to buf when it commits
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var tick <-chan time.Time
	var sent []item // the records of the open transaction, for redoTooLarge
	commit := func(cctx context.Context) error {
		if n == 0 {
			return nil
		}
		err := s.traceCommit(cctx, pendingID, records, dead, func(cctx context.Context) error {
			err := p.Commit(cctx, pendingID)
			if err != nil && errors.Is(err, txn.ErrProduce) && txn.IsTooLarge(err) {
				records, dead, err = s.redoTooLarge(cctx, p, sent, pendingID)
			}
			return err
		})
		if err != nil {
			s.stats.Aborts.Add(1)
			return err
		}
		s.stats.Commits.Add(1)
		s.stats.CommittedAt.Store(time.Now().UnixNano())
		s.stats.Records.Add(int64(records))
		s.stats.DeadLettered.Add(int64(dead))
		committed, n, records, dead, tick = pendingID, 0, 0, 0, nil
		buf.release(held)
		held = 0
		clear(sent)
		sent = sent[:0]
		s.setCommitted(committed)
		return nil
	}
	fail := func(err error) outcome {
		return outcome{reason: ReasonKafka, err: fmt.Errorf("kafka: %w", err), lastID: committed}
	}
	// full reports whether the reader waits for bytes that only a commit frees: the open transaction holds
	// half the bound, or nothing else is queued. (While items are queued, taking them in frees nothing but
	// moves their bytes into the transaction; committing after each would make a transaction per event.)
	full := func() bool {
		return buf.blocked() && (held >= buf.limit/2 || len(buf.items) == 0)
	}
	for {
		select {
		case it, ok := <-buf.items:
			if !ok {
				if ctx.Err() != nil {
					return s.stop(ctx, p, commit, committed)
				}
				if err := commit(ctx); err != nil {
					return fail(err)
				}
				return outcome{lastID: committed}
			}
			if it.rec != nil {
				if err := p.Add(ctx, it.rec); err != nil {
					return fail(err)
				}
				sent = append(sent, it)
				if it.rec.Topic == s.opt.DeadLetterTopic && it.rec.Topic != s.spec.Topic {
					dead++
				} else {
					records++
				}
			}
			pendingID = it.id
			held += it.size
			n++
			if tick == nil {
				timer.Reset(s.opt.CommitInterval)
				tick = timer.C
			}
			if n >= s.opt.CommitEvents || full() {
				if err := commit(ctx); err != nil {
					return fail(err)
				}
			}
		case <-buf.nudge:
			// The reader began to wait for bytes while this loop was idle.
			if full() {
				if err := commit(ctx); err != nil {
					return fail(err)
				}
			}
		case <-tick:
			if err := commit(ctx); err != nil {
				return fail(err)
			}
		case <-ctx.Done():
			return s.stop(ctx, p, commit, committed)
		}
	}
}

// stop ends the open transaction at shutdown: it commits what was read (the upstream would replay it
// anyway, but a commit spares read_committed consumers the wait for an abandoned transaction), or aborts
// if the commit fails. With AbandonOnStop it does neither, like a crash.
func (s *Source) stop(ctx context.Context, p *txn.Producer, commit func(context.Context) error, committed string) outcome {
	o := outcome{reason: ReasonShutdown, lastID: committed}
	if s.opt.AbandonOnStop {
		return o
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := commit(sctx); err != nil {
		s.log.Warn("commit at shutdown failed; aborting", "err", err)
		if aerr := p.Abort(sctx); aerr != nil {
			s.log.Warn("abort at shutdown failed; the next start fences the transaction", "err", aerr)
		}
	}
	return o
}
