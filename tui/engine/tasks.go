package engine

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// Tasks is the session's task list: every command run since the console
// started, numbered from 1, oldest first.
type Tasks struct {
	mu     sync.Mutex
	list   []*Task
	nextID int
}

// New makes a task of command on the named targets, each with an output
// buffer of limit lines; ctx ends it. It is on the list at once.
func (l *Tasks) New(ctx context.Context, command, spec string, targets []string, started time.Time, limit int, seed maphash.Seed, onChange func()) *Task {
	ctx, cancel := context.WithCancel(ctx)
	l.mu.Lock()
	l.nextID++
	t := &Task{
		ID:      l.nextID,
		Command: OneLine(command), // it may come from a model or a host
		Spec:    spec,
		Started: started,
		byName:  make(map[string]*Run, len(targets)),
		ctx:     ctx,
		cancel:  cancel,
		exited:  make(chan struct{}),
	}
	for _, name := range targets {
		if t.byName[name] != nil {
			continue // a target named twice runs once
		}
		r := &Run{Target: name, Task: t, Buf: NewBuffer(limit, seed, onChange)}
		t.Runs = append(t.Runs, r)
		t.byName[name] = r
	}
	l.list = append(l.list, t)
	l.mu.Unlock()
	return t
}

// List returns the tasks, oldest first.
func (l *Tasks) List() []*Task {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Task(nil), l.list...)
}

// Get returns task id, or nil.
func (l *Tasks) Get(id int) *Task {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.list {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// Running lists the tasks that have not ended.
func (l *Tasks) Running() []*Task {
	var out []*Task
	for _, t := range l.List() {
		if !t.Done() {
			out = append(out, t)
		}
	}
	return out
}

// Retain bounds what finished tasks' output costs: newest first, the
// output of finished tasks is kept while it adds up to budget lines, and
// beyond that let go — except for tasks that pinned says are still shown
// (a pane, a transcript). A task let go stays on the list with its
// status; its output reads as gone.
func (l *Tasks) Retain(budget int, pinned func(*Task) bool) {
	kept := 0
	list := l.List()
	for i := len(list) - 1; i >= 0; i-- {
		t := list[i]
		if !t.Done() || t.Released() {
			continue
		}
		n := 0
		for _, r := range t.Runs {
			n += r.Buf.Len()
		}
		if pinned(t) || kept+n <= budget {
			kept += n
			continue
		}
		t.mu.Lock()
		t.released = true
		t.mu.Unlock()
		for _, r := range t.Runs {
			r.Buf.Clear()
		}
	}
}
