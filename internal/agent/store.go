package agent

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"charm.land/fantasy"
)

// Store keeps conversations as JSON lines, one file per conversation in
// $XDG_STATE_HOME/rex/agent/: a meta line, then one line per turn (its
// prompt, the targets its calls went to, its messages, how it ended) and a
// summary line when older turns were summarised. Files are only appended
// to, one write per line. The API key is never in them.
type Store struct {
	Dir string
}

// record is one line of a conversation file.
type record struct {
	Type     string            `json:"type"` // meta, turn, summary
	Time     time.Time         `json:"time"`
	ID       string            `json:"id,omitempty"`
	Provider string            `json:"provider,omitempty"`
	Model    string            `json:"model,omitempty"`
	Prompt   string            `json:"prompt,omitempty"`
	Targets  []string          `json:"targets,omitempty"`
	Messages []fantasy.Message `json:"messages,omitempty"`
	Outcome  string            `json:"outcome,omitempty"`
	Usage    *Usage            `json:"usage,omitempty"`
	// Summary replaces every message before the last Keep ones.
	Summary string `json:"summary,omitempty"`
	Keep    int    `json:"keep,omitempty"`
}

// Conversation is one stored conversation.
type Conversation struct {
	ID      string
	Started time.Time
	Updated time.Time
	// Title is the first prompt.
	Title   string
	Turns   int
	Targets []string
	Model   string
}

// newID is a sortable, unique conversation id.
func newID(now time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

func (st *Store) path(id string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/\\") || strings.HasPrefix(id, ".") {
		return "", fmt.Errorf("%q is not a conversation id", id)
	}
	return filepath.Join(st.Dir, id+".jsonl"), nil
}

// append writes one record to a conversation's file.
func (st *Store) append(id string, r record) error {
	if st == nil || st.Dir == "" {
		return nil
	}
	p, err := st.path(id)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(st.Dir, 0o700); err != nil {
		return fmt.Errorf("keep the conversation: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("keep the conversation: %w", err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("keep the conversation: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("keep the conversation in %s: %w", p, err)
	}
	return nil
}

// read reads a conversation's records; a torn last line (a crash while
// writing) is left out.
func (st *Store) read(id string) ([]record, error) {
	p, err := st.path(id)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("there is no conversation %s; /agent resume lists them", id)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read conversation %s: %w", id, err)
	}
	return out, nil
}

// Load replays a conversation into the messages the model sees next.
func (st *Store) Load(id string) ([]fantasy.Message, Usage, error) {
	recs, err := st.read(id)
	if err != nil {
		return nil, Usage{}, err
	}
	var msgs []fantasy.Message
	var u Usage
	for _, r := range recs {
		switch r.Type {
		case "turn":
			msgs = append(msgs, r.Messages...)
			if r.Usage != nil {
				u.add(*r.Usage)
			}
		case "summary":
			keep := min(max(r.Keep, 0), len(msgs))
			msgs = append([]fantasy.Message{summaryMessage(r.Summary)}, msgs[len(msgs)-keep:]...)
		}
	}
	return msgs, u, nil
}

// List returns the stored conversations, the latest first.
func (st *Store) List() ([]Conversation, error) {
	if st == nil || st.Dir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(st.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Conversation
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || e.IsDir() {
			continue
		}
		recs, err := st.read(id)
		if err != nil || len(recs) == 0 {
			continue
		}
		c := Conversation{ID: id}
		seen := map[string]bool{}
		for _, r := range recs {
			switch r.Type {
			case "meta":
				c.Started, c.Model = r.Time, r.Model
			case "turn":
				c.Turns++
				if c.Title == "" {
					c.Title = r.Prompt
				}
				for _, t := range r.Targets {
					if !seen[t] {
						seen[t] = true
						c.Targets = append(c.Targets, t)
					}
				}
			}
			c.Updated = r.Time
		}
		if c.Turns > 0 {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Updated.After(out[j].Updated) })
	return out, nil
}

// summaryMessage stands for the turns a summary replaced.
func summaryMessage(text string) fantasy.Message {
	return fantasy.NewUserMessage("Summary of the earlier conversation (older turns were summarised to fit the context window):\n\n" + text)
}
