package tui

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// HistoryFile is the command-line history's file name in the state dir.
const HistoryFile = "history"

// historyMax is how many entries are kept.
const historyMax = 1000

// historyReadMax bounds how much of the file is read.
const historyReadMax = 1 << 20

// history is the command line's memory, kept across runs in a file of one
// entry per line. Up and down walk it; with text already typed they walk
// only the entries that start with that text.
//
// Lines typed with a leading space are not kept, as in shells with
// HISTCONTROL=ignorespace: a way to keep a secret out of the file.
type history struct {
	path    string // "" keeps the history in memory only
	entries []string

	// Walking: pos indexes entries; len(entries) is the line being typed.
	pos    int
	draft  string
	prefix string
}

// loadHistory reads path. A missing file is an empty history; an
// unreadable one is reported and the history starts empty.
func loadHistory(path string) (*history, error) {
	h := &history{path: path}
	if path == "" {
		return h, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, fmt.Errorf("read history %s: %w", path, err)
	}
	defer f.Close()
	data, cut, err := readTail(f, historyReadMax)
	if err != nil {
		return h, fmt.Errorf("read history %s: %w", path, err)
	}
	h.entries = parseHistory(data)
	lines := bytes.Count(data, []byte{'\n'})
	if len(h.entries) > historyMax {
		h.entries = h.entries[len(h.entries)-historyMax:]
	}
	h.pos = len(h.entries)
	// The file only grows by appends; shrink it now and then: when it
	// holds twice the entries kept, or more than a load reads (long ones).
	if lines > 2*historyMax || cut {
		if err := h.rewrite(); err != nil {
			return h, err
		}
	}
	return h, nil
}

// readTail reads the last max bytes of f, from a line start, and says
// whether the file held more.
func readTail(f *os.File, max int64) ([]byte, bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	off := int64(0)
	if fi.Size() > max {
		off = fi.Size() - max
	}
	data, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return nil, false, err
	}
	if off > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return data, off > 0, nil
}

// parseHistory splits a history file into entries, dropping blank lines
// and lines that are not valid entries (see cleanEntry).
func parseHistory(data []byte) []string {
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSuffix(l, "\r")
		if e, ok := cleanEntry(l); ok && l == e {
			out = append(out, e)
		}
	}
	return out
}

// cleanEntry makes a typed line an entry: no control characters, no
// surrounding blanks. It reports false for lines not to keep.
func cleanEntry(line string) (string, bool) {
	if line == "" || line[0] == ' ' {
		return "", false
	}
	clean := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, line)
	clean = strings.TrimSpace(clean)
	if clean == "" || len(clean) > 4096 {
		return "", false
	}
	return clean, true
}

// Add remembers a submitted line and appends it to the file.
func (h *history) Add(line string) error {
	h.reset()
	e, ok := cleanEntry(line)
	if !ok {
		return nil
	}
	if n := len(h.entries); n > 0 && h.entries[n-1] == e {
		return nil
	}
	h.entries = append(h.entries, e)
	if len(h.entries) > historyMax {
		h.entries = h.entries[len(h.entries)-historyMax:]
	}
	h.pos = len(h.entries)
	if h.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	// One write per entry: appends from several consoles do not interleave.
	_, err = f.Write([]byte(e + "\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save history %s: %w", h.path, err)
	}
	return nil
}

// rewrite replaces the file with the kept entries, atomically.
func (h *history) rewrite() error {
	tmp, err := os.CreateTemp(filepath.Dir(h.path), ".history-*")
	if err != nil {
		return fmt.Errorf("compact history: %w", err)
	}
	_, err = tmp.WriteString(strings.Join(h.entries, "\n") + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), h.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("compact history %s: %w", h.path, err)
	}
	return nil
}

func (h *history) reset() {
	h.pos, h.draft, h.prefix = len(h.entries), "", ""
}

// Prev returns the previous entry that starts with what was typed before
// walking began; current is the line on screen.
func (h *history) Prev(current string) (string, bool) {
	if h.pos == len(h.entries) {
		h.draft, h.prefix = current, current
	}
	for i := h.pos - 1; i >= 0; i-- {
		if strings.HasPrefix(h.entries[i], h.prefix) && h.entries[i] != current {
			h.pos = i
			return h.entries[i], true
		}
	}
	return "", false
}

// Next walks back towards the line being typed, which it returns last.
func (h *history) Next() (string, bool) {
	if h.pos >= len(h.entries) {
		return "", false
	}
	cur := h.entries[h.pos]
	for i := h.pos + 1; i < len(h.entries); i++ {
		if strings.HasPrefix(h.entries[i], h.prefix) && h.entries[i] != cur {
			h.pos = i
			return h.entries[i], true
		}
	}
	h.pos = len(h.entries)
	return h.draft, true
}
