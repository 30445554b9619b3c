package toolset

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/devices"
)

// What a model sees of output. A call's text stays within a few thousand
// tokens however much the hosts print; the full output goes to the panes.
const (
	// headBytes and tailBytes are kept of every host's output.
	headBytes = 16 << 10
	tailBytes = 32 << 10
	// blockLines is the line budget of all blocks of a result together;
	// each block gets at least minBlockLines.
	blockLines    = 240
	minBlockLines = 12
	// maxLineBytes cuts longer lines.
	maxLineBytes = 512
)

// capture keeps the head and tail of one host's output and a digest of
// all of it, so identical outputs are gathered exactly.
type capture struct {
	mu    sync.Mutex
	head  []byte
	tail  []byte
	total int64
	lines int64 // newlines seen
	sum   hash.Hash
}

func newCapture() *capture { return &capture{sum: sha256.New()} }

func (c *capture) write(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sum.Write(p)
	c.total += int64(len(p))
	c.lines += int64(bytes.Count(p, []byte{'\n'}))
	if room := headBytes - len(c.head); room > 0 {
		n := min(room, len(p))
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	if len(p) == 0 {
		return
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*tailBytes {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-tailBytes:]...)
	}
}

// output is the output as kept.
func (c *capture) output() output {
	c.mu.Lock()
	defer c.mu.Unlock()
	tail := c.tail
	if len(tail) > tailBytes {
		tail = tail[len(tail)-tailBytes:]
	}
	o := output{head: string(c.head), tail: string(tail), omittedBytes: c.total - int64(len(c.head)+len(tail))}
	if o.omittedBytes > 0 {
		o.lines = c.lines
	}
	return o
}

func (c *capture) digest() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%x:%d", c.sum.Sum(nil), c.total)
}

// outcome is how one host ended (or stands in) a call.
type outcome struct {
	host   string
	ok     bool
	status string // "exit 0", "exit 1", "ok", "unreachable", "running"...
	exit   *int
	out    output
	// digest identifies the output exactly when it was cut; "" means it is
	// whole and is its own key.
	digest string
}

func (o outcome) key() string {
	d := o.digest
	if d == "" {
		d = clean(o.out.head) + "\x00" + clean(o.out.tail)
	}
	return o.status + "\x00" + d
}

// output is what was kept of a host's output: all of it in head, or its
// head and tail with what lies between left out.
type output struct {
	head, tail   string
	omittedBytes int64
	// lines is the number of newlines in all of it, when bytes were
	// omitted.
	lines int64
}

// text is output that was never cut.
func text(s string) output { return output{head: s} }

// plus appends a line (an error, a note) to an output.
func (o output) plus(line string) output {
	if o.omittedBytes > 0 {
		o.tail = strings.TrimRight(o.tail, "\n") + "\n" + line
		return o
	}
	o.head = strings.TrimRight(o.head, "\n")
	if o.head != "" {
		o.head += "\n"
	}
	o.head += line
	return o
}

// group is hosts that ended alike.
type group struct {
	hosts  []string
	status string
	out    output
	ok     bool
}

// gather groups outcomes by status and output, in the order the first
// host of each group appears among hosts.
func gather(outs []outcome) []group {
	byKey := map[string]int{}
	var groups []group
	for _, o := range outs {
		k := o.key()
		i, ok := byKey[k]
		if !ok {
			i = len(groups)
			byKey[k] = i
			groups = append(groups, group{status: o.status, out: o.out, ok: o.ok})
		}
		groups[i].hosts = append(groups[i].hosts, o.host)
	}
	return groups
}

// render writes the model's text of a call: which target and hosts, a
// block per group, the summary line. note, when set, ends the text.
func render(target string, hosts []string, outs []outcome, note string) *Result {
	r := &Result{Target: target, Hosts: hosts}
	var b strings.Builder
	folded := devices.Fold(hosts)
	if len(hosts) == 1 && hosts[0] == target {
		fmt.Fprintf(&b, "target %s\n", target)
	} else {
		fmt.Fprintf(&b, "target %s: %s\n", target, folded)
	}
	groups := gather(outs)
	budget := max(minBlockLines, blockLines/max(1, len(groups)))
	for _, g := range groups {
		head := devices.Fold(g.hosts)
		if len(g.hosts) > 1 {
			head += fmt.Sprintf(" (%d hosts)", len(g.hosts))
		}
		fmt.Fprintf(&b, "%s · %s\n", head, g.status)
		b.WriteString(indent(compact(g.out, budget)))
	}
	okN := 0
	for _, o := range outs {
		if o.ok {
			okN++
		}
	}
	r.Summary = summary(outs)
	b.WriteString(r.Summary)
	if note != "" {
		b.WriteString("\n" + note)
	}
	r.Text = b.String()
	r.IsError = okN == 0 && len(outs) > 0 && !anyRunning(outs)
	for _, o := range outs {
		r.PerHost = append(r.PerHost, HostResult{Host: o.host, OK: o.ok, Status: o.status, ExitCode: o.exit,
			Output: compact(o.out, budget)})
	}
	return r
}

func anyRunning(outs []outcome) bool {
	for _, o := range outs {
		if o.status == statusRunning {
			return true
		}
	}
	return false
}

const statusRunning = "running"

// summary is the one-line account: "3/4 ok; db2 exit 1, web[4-5]
// unreachable".
func summary(outs []outcome) string {
	okN := 0
	byStatus := map[string][]string{}
	var order []string
	for _, o := range outs {
		if o.ok {
			okN++
			continue
		}
		if _, seen := byStatus[o.status]; !seen {
			order = append(order, o.status)
		}
		byStatus[o.status] = append(byStatus[o.status], o.host)
	}
	s := fmt.Sprintf("%d/%d ok", okN, len(outs))
	if len(order) == 0 {
		return s
	}
	sort.SliceStable(order, func(i, j int) bool {
		// Running hosts last: they are not failures.
		return order[i] != statusRunning && order[j] == statusRunning
	})
	parts := make([]string, len(order))
	for i, st := range order {
		parts[i] = devices.Fold(byStatus[st]) + " " + st
	}
	return s + "; " + strings.Join(parts, ", ")
}

// compact makes output fit for a model: terminal escapes removed, invalid
// UTF-8 replaced, long lines cut, and only the first and last lines kept
// of more than maxLines.
func compact(o output, maxLines int) string {
	head := splitLines(clean(o.head))
	var tail []string
	var omitted int64
	h, t := maxLines/3, maxLines-maxLines/3
	if o.omittedBytes > 0 {
		tail = splitLines(clean(o.tail))
		// The lines cut in two where bytes were left out go with them.
		if len(head) > 0 && !strings.HasSuffix(o.head, "\n") {
			head = head[:len(head)-1]
		}
		if len(tail) > 0 {
			tail = tail[1:]
		}
		total := o.lines
		if !strings.HasSuffix(o.tail, "\n") {
			total++
		}
		omitted = max(1, total-int64(len(head)+len(tail)))
		if len(head) > h {
			omitted += int64(len(head) - h)
			head = head[:h]
		}
		if len(tail) > t {
			omitted += int64(len(tail) - t)
			tail = tail[len(tail)-t:]
		}
	} else if len(head) > maxLines {
		omitted = int64(len(head) - maxLines)
		head, tail = head[:h], head[len(head)-t:]
	}
	if len(head)+len(tail) == 0 && omitted == 0 {
		return "(no output)\n"
	}
	var b strings.Builder
	for _, l := range head {
		b.WriteString(cutLine(l) + "\n")
	}
	if omitted > 0 {
		fmt.Fprintf(&b, "… %d lines omitted …\n", omitted)
	}
	for _, l := range tail {
		b.WriteString(cutLine(l) + "\n")
	}
	return b.String()
}

// clean removes terminal escapes and invalid UTF-8.
func clean(s string) string {
	s = ansi.Strip(s)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.ReplaceAll(s, "\r\n", "\n")
}

// splitLines splits at newlines; a last newline ends a line, it does not
// start an empty one.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func cutLine(l string) string {
	if len(l) <= maxLineBytes {
		return l
	}
	cut := maxLineBytes
	for cut > 0 && !utf8.RuneStart(l[cut]) {
		cut--
	}
	return l[:cut] + fmt.Sprintf("… (%d more bytes)", len(l)-cut)
}

// indent sets a block's lines off from the headers, so output can never
// pass for one.
func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l == "" {
			continue
		}
		b.WriteString("  ")
		b.WriteString(l)
	}
	return b.String()
}
