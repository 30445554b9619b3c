package rexclient

// SetHooks has drop run at the end of every drop of c's transport, and
// resume in every Resume once rexd has answered, before the connection
// is settled (nil: none).
func SetHooks(c *Client, drop, resume func()) {
	c.mu.Lock()
	c.dropHook, c.resumeHook = drop, resume
	c.mu.Unlock()
}
