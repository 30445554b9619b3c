package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// DefaultEachConcurrency is how many loops of /agent each talk to the model
// at once: model servers, local ones above all, serve few requests at a
// time.
const DefaultEachConcurrency = 4

// EachOptions run one agent loop per host: CLIO's execute_parallel, with
// the loops here and only rexd on the hosts.
type EachOptions struct {
	// Session are the options every loop starts from; Target, Prompt,
	// Each and Host are set per loop. Its Consent is shared, so one
	// "allow on all hosts" answers every loop.
	Session Options
	// Target is the TARGETS the hosts came from, for the prompt.
	Target string
	Hosts  []string
	Task   string
	// Concurrency bounds the loops running at once; 0 is 4.
	Concurrency int
	// Emit receives every loop's events, each with Host set.
	Emit func(Event)
}

// EachResult is one host's loop.
type EachResult struct {
	Host    string
	Outcome string
	Steps   int
	Tokens  int64
	// Text is the loop's last answer; Err why it did not finish.
	Text     string
	Err      error
	Duration time.Duration
	// Conversation is the loop's stored conversation.
	Conversation string
}

// RunEach runs the task on every host, one loop each, routed to its own
// host, and returns when all have ended, in the order of the hosts.
func RunEach(ctx context.Context, o EachOptions) []EachResult {
	n := o.Concurrency
	if n <= 0 {
		n = DefaultEachConcurrency
	}
	emit := o.Emit
	if emit == nil {
		emit = func(Event) {}
	}
	if c := o.Session.Consent; c != nil {
		// "allow on all hosts" answers this run's loops, not a later run's.
		c.forgetAll()
		defer c.forgetAll()
	}
	var emitMu sync.Mutex
	results := make([]EachResult, len(o.Hosts))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, host := range o.Hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[i]
			r.Host = host
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				r.Outcome, r.Err = OutcomeCancelled, fmt.Errorf("cancelled before it started")
				return
			}
			defer func() { <-sem }()
			opts := o.Session
			opts.Target = func() string { return host }
			opts.Each, opts.Host = true, host
			opts.Prompt = strings.TrimSpace(opts.Prompt + "\n" + fmt.Sprintf(
				"This loop is one of %d in an /agent each run over %s: it works on host %s only, and every tool call goes there. "+
					"The same task runs on each other host in a loop of its own. End with a short account of what you found or did on %s.",
				len(o.Hosts), o.Target, host, host))
			s := New(opts)
			start := time.Now()
			tr := s.Turn(ctx, o.Task, func(e Event) {
				emitMu.Lock()
				defer emitMu.Unlock()
				emit(e)
			})
			r.Outcome, r.Steps, r.Text, r.Err = tr.Outcome, tr.Steps, tr.Text, tr.Err
			r.Tokens = s.Usage().TotalTokens
			r.Duration = time.Since(start)
			r.Conversation = s.ID()
		}()
	}
	wg.Wait()
	return results
}

// EachTable is the table that ends an /agent each run: host, outcome,
// steps, tokens.
func EachTable(results []EachResult) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tOUTCOME\tSTEPS\tTOKENS\tNOTE")
	ok := 0
	for _, r := range results {
		note := ""
		if r.Err != nil {
			note = r.Err.Error()
		}
		if r.Outcome == OutcomeFinished {
			ok++
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", r.Host, r.Outcome, r.Steps, r.Tokens, note)
	}
	tw.Flush()
	fmt.Fprintf(&b, "%d/%d finished", ok, len(results))
	return b.String()
}
