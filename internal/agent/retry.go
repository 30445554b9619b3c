package agent

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"strconv"
	"time"

	"charm.land/fantasy"
)

// Retry policy: only rate limits (429) and server errors (5xx) are tried
// again, with exponential backoff, honouring Retry-After up to maxDelay.
const (
	defaultRetries    = 4
	defaultRetryDelay = 2 * time.Second
	maxRetryDelay     = 60 * time.Second
)

// retryModel wraps a model so that a request the provider refuses with 429
// or 5xx before any of the answer arrived is made again after a pause.
// Everything else (a broken stream, a 4xx, a network error) fails the turn
// at once with what happened. fantasy's own retries are off.
type retryModel struct {
	fantasy.LanguageModel
	retries int
	delay   time.Duration
	onRetry func(err error, delay time.Duration)
}

// retryable reports whether the provider asked to be tried again.
func retryable(err error) bool {
	var pe *fantasy.ProviderError
	if !errors.As(err, &pe) {
		return false
	}
	return pe.StatusCode == http.StatusTooManyRequests || pe.StatusCode >= 500 && pe.StatusCode <= 599
}

// retryAfter is the provider's Retry-After, when it sent one.
func retryAfter(err error) time.Duration {
	var pe *fantasy.ProviderError
	if !errors.As(err, &pe) || pe.ResponseHeaders == nil {
		return 0
	}
	for _, k := range []string{"retry-after-ms", "Retry-After-Ms"} {
		if v, ok := pe.ResponseHeaders[k]; ok {
			if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
				return time.Duration(ms * float64(time.Millisecond))
			}
		}
	}
	for _, k := range []string{"retry-after", "Retry-After"} {
		if v, ok := pe.ResponseHeaders[k]; ok {
			if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
				return time.Duration(s * float64(time.Second))
			}
		}
	}
	return 0
}

// Stream implements fantasy.LanguageModel.
func (m *retryModel) Stream(ctx context.Context, call fantasy.Call) (fantasy.StreamResponse, error) {
	delay := m.delay
	for attempt := 0; ; attempt++ {
		stream, err := m.LanguageModel.Stream(ctx, call)
		var first []fantasy.StreamPart
		var next func() (fantasy.StreamPart, bool)
		var stop func()
		if err == nil {
			// Look at the start of the stream: a refusal comes before any
			// of the answer.
			next, stop = iter.Pull(iter.Seq[fantasy.StreamPart](stream))
			for {
				p, ok := next()
				if !ok {
					break
				}
				first = append(first, p)
				if p.Type != fantasy.StreamPartTypeWarnings {
					if p.Type == fantasy.StreamPartTypeError {
						err = p.Error
					}
					break
				}
			}
		}
		if err == nil || attempt >= m.retries || !retryable(err) || ctx.Err() != nil {
			if stream == nil {
				return nil, err
			}
			// An error part is handed on as part of the stream, as fantasy
			// expects it.
			return replay(first, next, stop), nil
		}
		stop()
		wait := delay
		if ra := retryAfter(err); ra > 0 {
			wait = min(ra, maxRetryDelay)
		}
		if m.onRetry != nil {
			m.onRetry(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		delay = min(delay*2, maxRetryDelay)
	}
}

// replay yields the parts already pulled, then the rest of the stream.
func replay(first []fantasy.StreamPart, next func() (fantasy.StreamPart, bool), stop func()) fantasy.StreamResponse {
	return func(yield func(fantasy.StreamPart) bool) {
		if stop != nil {
			defer stop()
		}
		for _, p := range first {
			if !yield(p) {
				return
			}
		}
		if next == nil {
			return
		}
		for {
			p, ok := next()
			if !ok || !yield(p) {
				return
			}
		}
	}
}
