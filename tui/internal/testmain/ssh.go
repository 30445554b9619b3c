package main

import "github.com/rexconsole/rex/internal/fanout"

// sshConnector is nil until the SSH connector exists: SSH targets then
// fail in their panes with a clear message.
func sshConnector() fanout.Connector { return nil }
