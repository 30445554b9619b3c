package rexclient

import "context"

// WaitResumed waits, while the transport is down and the connection waits
// to be resumed, until it is back (nil), has ended (why it ended) or ctx
// ends (ctx's error). On a connection that is up it returns nil at once.
// A pool uses it so as not to hand out a connection whose calls would fail
// with ErrDropped while its reconnection is under way.
func (c *Client) WaitResumed(ctx context.Context) error {
	if c.waitBack(ctx) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.Err()
}
