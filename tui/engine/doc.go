// Package engine holds the console's state that is not about drawing:
// what the console last learned about reaching each target (Contacts),
// the tasks run this session with every target's output (Task, Run,
// Buffer), and the per-host transcripts that the panes of the current
// target read like each host's terminal history (Transcript).
//
// Nothing here knows Bubble Tea. Fan-out and SSH goroutines write into
// these types under their locks and call an onChange function; a front
// end reads them when it draws. That keeps the console's engine movable
// behind a server with the terminal UI as one client of it.
package engine
