package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/rexclient"
)

// EachResult is how one target's function ended.
type EachResult struct {
	Target      string
	Err         error
	Unreachable bool
	// Cancelled: ctx ended before the target was reached.
	Cancelled bool
	Duration  time.Duration
}

// Each runs fn on every target with a live session, with the same bounded
// concurrency, per-target connect timeout, failure isolation and
// Options.Release as Run. It is for work that is not one command: pushes,
// pulls, checks. Results come back in the order of targets.
func Each(ctx context.Context, pool *Pool, targets []Target, opts Options,
	fn func(ctx context.Context, t Target, s *rexclient.Session) error) []EachResult {
	opts = opts.withDefaults()
	results := make([]EachResult, len(targets))
	sem := make(chan struct{}, opts.Concurrency)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func(i int, t Target) {
			defer wg.Done()
			r := &results[i]
			r.Target = t.Name
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				r.Err, r.Cancelled = fmt.Errorf("%s: cancelled before it started", t.Name), true
				return
			}
			defer func() { <-sem }()
			start := time.Now()
			t.ConnectTimeout = opts.ConnectTimeout
			lease, err := pool.AcquireAs(ctx, t, opts.ClientName)
			if err != nil {
				if ctx.Err() != nil {
					r.Err, r.Cancelled = err, true
					return
				}
				r.Err, r.Unreachable = err, true
				return
			}
			defer opts.endLease(lease)
			sess := lease.Session()
			if opts.Bulk {
				if sess, err = lease.Bulk(ctx); err != nil {
					r.Err = err
					return
				}
			}
			r.Err = fn(ctx, t, sess)
			// Only the connection's own loss drops it: a lost bulk lane is
			// replaced by the next Bulk, and dropping the connection for
			// it would end what other leases run there (terminals).
			if errors.Is(r.Err, rexclient.ErrClosed) && sess.Client() == lease.Session().Client() {
				lease.Drop()
			}
			r.Duration = time.Since(start)
		}(i, t)
	}
	wg.Wait()
	return results
}

// endLease ends a target's lease as o says: closed for a one-shot run
// (Release), else given back to the pool.
func (o Options) endLease(l *Lease) {
	if o.Release {
		l.Close()
	} else {
		l.Release()
	}
}
