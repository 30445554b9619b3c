package fanout

// SetWaitHook lets a test see callers join a dial.
func SetWaitHook(p *Pool, f func(waiters int)) { p.waitHook = f }
