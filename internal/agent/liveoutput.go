package agent

import (
	"sync"
	"unicode/utf8"

	"github.com/rexconsole/rex/internal/secrets"
)

// textJoiner turns a tool's output chunks into text of whole characters
// per host and stream: rexd's raw output frames may end inside a
// character, and an event's Data is a string of its own (rex ask --json
// prints each), so the start of a character waits for its end.
type textJoiner struct {
	mu   sync.Mutex
	held map[string][]byte // by host and stream
}

// text returns what of data (after the bytes held for key) is whole
// characters, holding back an unfinished one at the end.
func (j *textJoiner) text(key string, data []byte) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	b := data
	if held := j.held[key]; len(held) > 0 {
		b = append(held, data...)
		delete(j.held, key)
	}
	cut := wholeRunes(b)
	if cut < len(b) {
		if j.held == nil {
			j.held = map[string][]byte{}
		}
		j.held[key] = append([]byte(nil), b[cut:]...)
	}
	return string(b[:cut])
}

// flush returns and forgets what is held for key (the stream ended).
func (j *textJoiner) flush(key string) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := string(j.held[key])
	delete(j.held, key)
	return s
}

// wholeRunes is the length of b without an unfinished character at its
// end; bytes that can never start a valid one are not held.
func wholeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// liveOutput turns a tool's output chunks into the text of output events,
// per host and stream: masked by a streaming masker (a secret split
// between two chunks is masked all the same) and cut at whole characters.
type liveOutput struct {
	mask []string
	emit func(host, stream, job, text string)

	mu      sync.Mutex
	streams map[[2]string]*secrets.Masker
	jobs    map[string]string // the job of each host's last chunk
	joiner  textJoiner
}

// write takes a chunk of host's stream (of job, when it runs as one).
func (l *liveOutput) write(host, stream, job string, data []byte) {
	m := l.masker(host, stream, job)
	m.Write(data) // its writer never fails
}

// end sends what was held back for host's streams: the host is done.
func (l *liveOutput) end(host string) {
	for _, stream := range []string{"stdout", "stderr"} {
		k := [2]string{host, stream}
		l.mu.Lock()
		m := l.streams[k]
		delete(l.streams, k)
		l.mu.Unlock()
		if m != nil {
			m.Flush()
		}
		if s := l.joiner.flush(host + "\x00" + stream); s != "" {
			l.emit(host, stream, l.job(host), s)
		}
	}
}

func (l *liveOutput) job(host string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.jobs[host]
}

func (l *liveOutput) masker(host, stream, job string) *secrets.Masker {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.jobs == nil {
		l.jobs = map[string]string{}
	}
	l.jobs[host] = job
	k := [2]string{host, stream}
	if m := l.streams[k]; m != nil {
		return m
	}
	if l.streams == nil {
		l.streams = map[[2]string]*secrets.Masker{}
	}
	m := secrets.NewMasker(writerFunc(func(p []byte) (int, error) {
		if s := l.joiner.text(host+"\x00"+stream, p); s != "" {
			l.emit(host, stream, l.job(host), s)
		}
		return len(p), nil
	}), l.mask)
	l.streams[k] = m
	return m
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
