package rexclient

// SetHooks has drop run at the end of every drop of c's transport, and
// resume in every Resume once rexd has answered, before the connection
// is settled (nil: none).
func SetHooks(c *Client, drop, resume func()) {
	c.mu.Lock()
	c.dropHook, c.resumeHook = drop, resume
	c.mu.Unlock()
}

// Queued is the number of events waiting for p's consumer.
func Queued(p *Process) int {
	p.s.c.mu.Lock()
	r := p.s.c.routes[p.ID]
	p.s.c.mu.Unlock()
	if r == nil {
		return 0
	}
	return len(r.ch)
}

// RouteQueue bounds the events waiting for one process's consumer.
const RouteQueue = routeQueue

// SetWriteHook has hook run before each write bounded by a context
// begins (nil: none). Set it before the calls it is for.
func SetWriteHook(c *Client, hook func()) {
	c.mu.Lock()
	c.writeHook = hook
	c.mu.Unlock()
}
