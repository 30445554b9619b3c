package toolset

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/secrets"
)

// Bounds of the file tools' answers.
const (
	// maxReadBytes is the most of a file read or edited.
	maxReadBytes = 1 << 20
	// maxEntries bounds list and glob.
	maxEntries = 1000
)

// runFS runs a file tool on every host through rexd's fs methods.
func (ts *Toolset) runFS(ctx context.Context, a *Action, progress func(Event)) *Result {
	progress(Event{Kind: EventStart, Tool: a.Tool.Name, Hosts: a.Hosts})
	var mu sync.Mutex
	outs := map[string]outcome{}
	res := fanout.Each(ctx, ts.opts.App.Pool, a.targets, ts.fanOpts(nil),
		func(ctx context.Context, t fanout.Target, s *rexclient.Session) error {
			mask, err := ts.deviceMask(ctx, t)
			var body, status string
			switch {
			case err != nil:
				status, body = "error", err.Error()
			default:
				body, status, err = ts.fsOne(ctx, a, s, t.Name == commands.LocalName)
				if err != nil {
					status, body = "error", homeRel(s, fsError(err))
				}
			}
			body = secrets.Mask(body, mask)
			o := outcome{host: t.Name, ok: err == nil, status: status, out: text(body)}
			mu.Lock()
			outs[t.Name] = o
			mu.Unlock()
			if body != "" {
				progress(Event{Kind: EventOutput, Tool: a.Tool.Name, Host: t.Name, Data: []byte(body + "\n")})
			}
			progress(Event{Kind: EventHostDone, Tool: a.Tool.Name, Host: t.Name, Status: o.status, OK: o.ok, Result: fsResult(t.Name, err)})
			return err
		})
	list := make([]outcome, 0, len(a.Hosts))
	for _, r := range res {
		o, ran := outs[r.Target]
		if !ran {
			o = outcome{host: r.Target, status: "unreachable", out: text(errText(r.Err))}
			if !r.Unreachable {
				o.status = "failed"
			}
			progress(Event{Kind: EventHostDone, Tool: a.Tool.Name, Host: r.Target, Status: o.status,
				Result: &fanout.Result{Target: r.Target, Err: r.Err, Unreachable: r.Unreachable}})
		}
		list = append(list, o)
	}
	progress(Event{Kind: EventDone, Tool: a.Tool.Name})
	r := render(a.Target, a.Hosts, list, "")
	if ctx.Err() != nil {
		r.IsError = true
		r.Text += "\n" + errCancelled.Error()
	}
	return r
}

// deviceMask is the values of t's device secrets: what the file tools
// return shows them as ***, as bash's output does (a file on the device
// may hold one). A device that names a secret not set fails, as bash
// does there.
func (ts *Toolset) deviceMask(ctx context.Context, t fanout.Target) ([]string, error) {
	sec, err := ts.opts.App.DeviceSecrets(ctx, t)
	if err != nil {
		return nil, err
	}
	values := make([]string, 0, len(sec))
	for _, v := range sec {
		values = append(values, v)
	}
	return values, nil
}

// fsResult is a file tool's end on a host as a fan-out result: exit 0 when
// it worked, its error otherwise.
func fsResult(host string, err error) *fanout.Result {
	if err != nil {
		return &fanout.Result{Target: host, Err: err}
	}
	return &fanout.Result{Target: host, ExitCode: new(int)}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// homeRel writes paths under the remote home as ~/..., in messages, so
// hosts whose homes differ still answer alike.
func homeRel(s *rexclient.Session, msg string) string {
	home := s.Info.Cwd
	if home == "" || home == "/" {
		return msg
	}
	return strings.ReplaceAll(msg, home+"/", "~/")
}

// fsError is a rexd error as one sentence: its message without the
// "rexd error -32002:" kind of prefix a model has no use for.
func fsError(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

// fsOne does a file tool's work on one host and returns the text the
// model sees of it and its status.
// local says the host is rex's own machine.
func (ts *Toolset) fsOne(ctx context.Context, a *Action, s *rexclient.Session, local bool) (string, string, error) {
	switch in := a.input.(type) {
	case *ReadInput:
		if err := credentialPath(in.Path, s.Info.Cwd, local); err != nil {
			return "", "", err
		}
		return readFile(ctx, s, in)
	case *WriteInput:
		res, err := s.WriteFile(ctx, protocol.FSWriteParams{SessionID: s.ID, Path: in.Path, Content: in.Content,
			Encoding: protocol.EncodingUTF8, Mode: protocol.WriteReplace, MkdirParents: true})
		if err != nil {
			return "", "", err
		}
		verb := "replaced"
		if res.Created {
			verb = "created"
		}
		return homeRel(s, fmt.Sprintf("%s %s (%s)", verb, res.Path, commands.HumanBytes(res.BytesWritten))), "ok", nil
	case *EditInput:
		return editFile(ctx, s, in)
	case *ListInput:
		return listDir(ctx, s, in)
	case *GlobInput:
		res, err := s.Glob(ctx, protocol.FSGlobParams{SessionID: s.ID, Pattern: in.Pattern, Cwd: in.Path, MaxMatches: maxEntries})
		if err != nil {
			return "", "", err
		}
		if len(res.Matches) == 0 {
			return "", "no matches", nil
		}
		base := in.Path
		if base == "" || base == "." {
			base = s.Info.Cwd
		} else if !path.IsAbs(base) {
			base = path.Join(s.Info.Cwd, strings.TrimPrefix(base, "~/"))
		}
		matches := make([]string, len(res.Matches))
		for i, m := range res.Matches {
			if rel, ok := strings.CutPrefix(m, strings.TrimSuffix(base, "/")+"/"); ok {
				m = rel
			}
			matches[i] = m
		}
		body := strings.Join(matches, "\n")
		if res.Truncated {
			body += fmt.Sprintf("\n… more than %d matches; narrow the pattern", maxEntries)
		}
		return body, plural(len(res.Matches), "match"), nil
	}
	return "", "", fmt.Errorf("%s is not a file tool", a.Tool.Name)
}

// readWhole reads a text file of up to maxReadBytes.
func readWhole(ctx context.Context, s *rexclient.Session, p string) (protocol.FSReadResult, string, error) {
	n := int64(maxReadBytes)
	res, err := s.ReadFile(ctx, protocol.FSReadParams{SessionID: s.ID, Path: p, Length: &n, Encoding: protocol.EncodingUTF8})
	if err != nil {
		return res, "", err
	}
	if res.Encoding != protocol.EncodingUTF8 {
		return res, "", fmt.Errorf("%s is not a text file (%s)", homeRel(s, res.Path), commands.HumanBytes(res.Size))
	}
	return res, res.Content, nil
}

func readFile(ctx context.Context, s *rexclient.Session, in *ReadInput) (string, string, error) {
	res, content, err := readWhole(ctx, s, in.Path)
	if err != nil {
		return "", "", err
	}
	if content == "" {
		return "(empty file)", "ok", nil
	}
	lines := strings.SplitAfter(content, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	first := max(1, in.Offset)
	limit := in.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	if first > len(lines) {
		return "", "", fmt.Errorf("%s has %s; offset %d is past its end", homeRel(s, res.Path), plural(len(lines), "line"), first)
	}
	last := min(len(lines), first-1+limit)
	text := strings.Join(lines[first-1:last], "")
	status := "ok"
	if first > 1 || last < len(lines) || res.Truncated {
		status = fmt.Sprintf("lines %d-%d of %d", first, last, len(lines))
		if res.Truncated {
			status = fmt.Sprintf("lines %d-%d of the first %s", first, last, commands.HumanBytes(int64(len(content))))
		}
	}
	return text, status, nil
}

func editFile(ctx context.Context, s *rexclient.Session, in *EditInput) (string, string, error) {
	res, content, err := readWhole(ctx, s, in.Path)
	if err != nil {
		return "", "", err
	}
	if res.Truncated {
		return "", "", fmt.Errorf("%s is larger than %s; edit it with bash", homeRel(s, res.Path), commands.HumanBytes(maxReadBytes))
	}
	n := strings.Count(content, in.Old)
	switch {
	case n == 0:
		return "", "", fmt.Errorf("old text not found in %s; read the file and copy the text exactly", homeRel(s, res.Path))
	case n > 1 && !in.ReplaceAll:
		return "", "", fmt.Errorf("old text occurs %d times in %s; include more lines around it to make it unique, or set replace_all", n, homeRel(s, res.Path))
	}
	out := strings.Replace(content, in.Old, in.New, map[bool]int{true: -1, false: 1}[in.ReplaceAll])
	w, err := s.WriteFile(ctx, protocol.FSWriteParams{SessionID: s.ID, Path: res.Path, Content: out,
		Encoding: protocol.EncodingUTF8, Mode: protocol.WriteReplace, ExpectedMtime: res.Mtime})
	if err != nil {
		return "", "", err
	}
	return homeRel(s, fmt.Sprintf("replaced %s in %s", plural(n, "occurrence"), w.Path)), "ok", nil
}

// listDir walks a directory breadth first, depth levels down, at most
// maxEntries entries.
func listDir(ctx context.Context, s *rexclient.Session, in *ListInput) (string, string, error) {
	depth := in.Depth
	if depth <= 0 {
		depth = defaultDepth
	}
	depth = min(depth, maxDepth)
	root := in.Path
	if root == "" {
		root = "."
	}
	type dir struct {
		path, rel string
		level     int
	}
	var lines []string
	queue := []dir{{path: root, level: 1}}
	truncated := false
	for len(queue) > 0 && !truncated {
		d := queue[0]
		queue = queue[1:]
		res, err := s.List(ctx, protocol.FSListParams{SessionID: s.ID, Path: d.path, MaxEntries: maxEntries})
		if err != nil {
			if d.level == 1 {
				return "", "", err
			}
			lines = append(lines, d.rel+"/ (unreadable: "+fsError(err)+")")
			continue
		}
		ents := res.Entries
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
		for _, e := range ents {
			rel := path.Join(d.rel, e.Name)
			if len(lines) >= maxEntries {
				truncated = true
				break
			}
			switch e.Type {
			case protocol.TypeDir:
				lines = append(lines, rel+"/")
				if d.level < depth {
					queue = append(queue, dir{path: e.Path, rel: rel, level: d.level + 1})
				}
			case protocol.TypeSymlink:
				lines = append(lines, rel+"@")
			default:
				lines = append(lines, rel)
			}
		}
		truncated = truncated || res.Truncated
	}
	sort.Strings(lines)
	text := strings.Join(lines, "\n")
	if text == "" {
		text = "(empty directory)"
	}
	if truncated {
		text += fmt.Sprintf("\n… more than %d entries; list a subdirectory or less depth", maxEntries)
	}
	return text, "ok", nil
}

// File is one file of one host, read whole (up to 1 MiB), for front ends
// that hand files over as they are (MCP resources) rather than as the
// numbered lines of read.
type File struct {
	Host string
	// Path is where the file is on the host, as rexd resolved it.
	Path string
	// Text is the content when it is UTF-8; otherwise Binary is set and
	// Data holds the bytes.
	Text   string
	Data   []byte
	Binary bool
	// Size is the file's whole size; Truncated says only its first 1 MiB
	// was read.
	Size      int64
	Truncated bool
}

// ReadFile reads a file of one host through rexd, in the toolset's
// session (audited under its client name) and within rexd's roots. The
// error is one sentence.
func (ts *Toolset) ReadFile(ctx context.Context, host, p string) (*File, error) {
	targets, err := ts.opts.App.Resolve(host)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", host, err)
	}
	if len(targets) != 1 {
		return nil, fmt.Errorf("%s names %s; a file is read from one host", host, plural(len(targets), "host"))
	}
	var f *File
	res := fanout.Each(ctx, ts.opts.App.Pool, targets, ts.fanOpts(nil),
		func(ctx context.Context, t fanout.Target, s *rexclient.Session) error {
			if err := credentialPath(p, s.Info.Cwd, t.Name == commands.LocalName); err != nil {
				return fmt.Errorf("%s: %w", t.Name, err)
			}
			mask, err := ts.deviceMask(ctx, t)
			if err != nil {
				return fmt.Errorf("%s: %w", t.Name, err)
			}
			n := int64(maxReadBytes)
			r, err := s.ReadFile(ctx, protocol.FSReadParams{SessionID: s.ID, Path: p, Length: &n, Encoding: protocol.EncodingUTF8})
			if err != nil {
				return fmt.Errorf("%s: %s", t.Name, homeRel(s, fsError(err)))
			}
			f = &File{Host: t.Name, Path: r.Path, Size: r.Size, Truncated: r.Truncated}
			if r.Encoding == protocol.EncodingUTF8 {
				f.Text = secrets.Mask(r.Content, mask)
				return nil
			}
			f.Binary = true
			f.Data, err = base64.StdEncoding.DecodeString(r.Content)
			if len(mask) > 0 {
				f.Data = []byte(secrets.Mask(string(f.Data), mask))
			}
			if err != nil {
				return fmt.Errorf("rexd sent %s in bad base64: %v", r.Path, err)
			}
			return nil
		})
	if err := res[0].Err; err != nil {
		return nil, err
	}
	return f, nil
}
