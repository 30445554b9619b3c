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
	Duration    time.Duration
}

// Each runs fn on every target with a live session, with the same bounded
// concurrency, per-target connect timeout and failure isolation as Run. It
// is for work that is not one command: pushes, pulls, checks. Results come
// back in the order of targets.
func Each(ctx context.Context, pool *Pool, targets []Target, opts Options,
	fn func(ctx context.Context, t Target, s *rexclient.Session) error) []EachResult {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 15 * time.Second
	}
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
				r.Err, r.Unreachable = fmt.Errorf("%s: cancelled before it started", t.Name), true
				return
			}
			defer func() { <-sem }()
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
			sess, err := pool.Acquire(cctx, t)
			cancel()
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					err = fmt.Errorf("connect %s: no answer within %s; is the host up and reachable?", t.Name, opts.ConnectTimeout)
				}
				r.Err, r.Unreachable = err, true
				return
			}
			defer pool.Release(t)
			r.Err = fn(ctx, t, sess)
			if errors.Is(r.Err, rexclient.ErrClosed) {
				pool.Drop(t)
			}
			r.Duration = time.Since(start)
		}(i, t)
	}
	wg.Wait()
	return results
}
