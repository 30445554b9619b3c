package fanout

// SetWaitHook lets a test see callers join a dial.
func SetWaitHook(p *Pool, f func(waiters int)) { p.waitHook = f }

// SetResumeHooks lets a test see callers of Acquire wait for a dropped
// connection (waiting) and hold watch when it sees a drop (dropped).
func SetResumeHooks(p *Pool, waiting func(), dropped func(target string)) {
	p.resumeWaitHook, p.droppedHook = waiting, dropped
}

// SetWatchEndHook lets a test see a connection's watch end.
func SetWatchEndHook(p *Pool, f func(target string)) { p.watchEndHook = f }
