package commands

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// PushUsage and PullUsage are the synopses of `rex push` and `rex pull`.
const (
	PushUsage = "rex push SRC... DEST TARGETS [--delete] [--atomic] [--dry-run] [--sudo] [--chmod SPEC] [--chown USER[:GROUP]] [--max-bytes N] [--force] [--json]"
	PullUsage = "rex pull REMOTE LOCAL TARGETS [--dry-run] [--sudo] [--max-bytes N] [--json]"
)

// PushOptions are the flags of `rex push` (and /push).
type PushOptions struct {
	// Delete also removes, on each target, what the source lacks.
	Delete bool
	// Atomic builds the tree beside the destination and swaps it in
	// whole: the directory is replaced.
	Atomic bool
	// DryRun prints what would be added, updated and deleted, and changes
	// nothing.
	DryRun bool
	// Chmod is an rsync-style mode change applied to what is sent.
	Chmod string
	// Chown ("user", "user:group", ":group") is given to what is written.
	Chown string
	// MaxBytes bounds the bytes a target may write (0: its free space
	// less 5%).
	MaxBytes int64
	// Force pushes even when a pull left unresolved conflicts.
	Force bool
	// List asks each target for the paths it adds and updates, not only
	// the counts (--json does).
	List bool

	// verified is shared by the reading of the sources and the targets of
	// one push: a blob is hashed once here (when the source is read, or
	// when the stat cache spared that, when it is first sent), whatever
	// the number of targets it goes to.
	verified *cas.VerifiedSet
	// deleteUnder narrows Delete to these names in DEST: the sources of a
	// push of several.
	deleteUnder []string
}

// PushSpec is a parsed `rex push`.
type PushSpec struct {
	Sources        []string
	Dest           string
	Targets        string
	Sudo           bool
	JSON           bool
	ConnectTimeout time.Duration
	// Where is -w and -x, which Args folds into Targets.
	Where TargetFlags
	PushOptions
}

// Bind declares the flags of `rex push` (and /push).
func (s *PushSpec) Bind(fs *pflag.FlagSet) {
	fs.BoolVar(&s.Delete, "delete", false, "also remove, on each target, what the source lacks (every path removed is listed)")
	fs.BoolVar(&s.Atomic, "atomic", false, "build the tree beside DEST and swap it in whole: DEST is replaced, with no moment it is missing")
	fs.BoolVarP(&s.DryRun, "dry-run", "n", false, "print what would be added, updated and deleted on each target; change nothing")
	BindSudo(fs, &s.Sudo)
	fs.StringVar(&s.Chmod, "chmod", "", "set modes of what is sent, as rsync's --chmod (D755,F644 or u+x,go-w)")
	fs.StringVar(&s.Chown, "chown", "", "give what is written to USER[:GROUP] (needs --sudo)")
	fs.Var(sizeValue{&s.MaxBytes}, "max-bytes", "refuse to write more than N bytes on a target (500M, 2G; default: its free space less 5%)")
	fs.BoolVar(&s.Force, "force", false, "push even when a pull left unresolved conflicts in the source")
	BindJSON(fs, &s.JSON)
	BindConnectTimeout(fs, &s.ConnectTimeout)
	s.Where.Bind(fs)
}

// Args reads the positionals of `rex push` and checks the flags together.
func (s *PushSpec) Args(args []string) error { return s.ArgsDefault(args, "") }

// ArgsDefault is Args for a front end with a current target (the
// console): SRC DEST alone go to current.
func (s *PushSpec) ArgsDefault(args []string, current string) error {
	args = s.Where.pathWords(args, current)
	if len(args) < 3 {
		return Usagef("usage: %s", PushUsage)
	}
	s.Sources, s.Dest, s.Targets = args[:len(args)-2], args[len(args)-2], s.Where.Spec(args[len(args)-1])
	if s.Atomic && s.Delete {
		return Usagef("push: --atomic replaces the directory, which deletes what the source lacks already; drop --delete")
	}
	if s.Chmod != "" {
		if _, err := ParseChmod(s.Chmod); err != nil {
			return err
		}
	}
	if s.Chown != "" {
		if err := validOwner(s.Chown); err != nil {
			return Usagef("push: --chown %s: %v", s.Chown, err)
		}
		if !s.Sudo {
			return Usagef("push: --chown gives files to another owner, which only root can do; add --sudo")
		}
	}
	s.List = s.JSON
	return nil
}

// PullOptions are the flags of `rex pull` (and /pull).
type PullOptions struct {
	DryRun   bool
	MaxBytes int64
}

// PullSpec is a parsed `rex pull`.
type PullSpec struct {
	RemoteDir, LocalDir, Targets string
	Sudo                         bool
	JSON                         bool
	ConnectTimeout               time.Duration
	// Where is -w and -x, which Args folds into Targets.
	Where TargetFlags
	PullOptions
}

// Bind declares the flags of `rex pull` (and /pull).
func (s *PullSpec) Bind(fs *pflag.FlagSet) {
	fs.BoolVarP(&s.DryRun, "dry-run", "n", false, "print what the merge would write here; change nothing")
	BindSudo(fs, &s.Sudo)
	fs.Var(sizeValue{&s.MaxBytes}, "max-bytes", "refuse to write more than N bytes here (500M, 2G; default: the free space less 5%)")
	BindJSON(fs, &s.JSON)
	BindConnectTimeout(fs, &s.ConnectTimeout)
	s.Where.Bind(fs)
}

// Args reads the positionals of `rex pull`.
func (s *PullSpec) Args(args []string) error { return s.ArgsDefault(args, "") }

// ArgsDefault is Args for a front end with a current target (the
// console): REMOTE LOCAL alone come from current.
func (s *PullSpec) ArgsDefault(args []string, current string) error {
	args = s.Where.pathWords(args, current)
	if len(args) != 3 {
		return Usagef("usage: %s", PullUsage)
	}
	s.RemoteDir, s.LocalDir, s.Targets = args[0], args[1], s.Where.Spec(args[2])
	return nil
}

// sizeValue is a byte-count flag (see ParseSize).
type sizeValue struct{ n *int64 }

func (v sizeValue) String() string {
	if v.n == nil || *v.n == 0 {
		return "0"
	}
	return strconv.FormatInt(*v.n, 10)
}

func (v sizeValue) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}

func (sizeValue) Type() string { return "size" }

// ParseSize reads a byte count: a number with an optional k, M, G or T
// (powers of 1024; "KiB" and "MB" spellings too).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			mult, t = 1<<20, t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		case 'T':
			mult, t = 1<<40, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q is not a size; write e.g. 500M or 2G", s)
	}
	return int64(v * float64(mult)), nil
}

// ParsePush reads the words of `rex push` as the console gets them.
func ParsePush(args []string) (PushSpec, error) { return ParsePushDefault(args, "") }

// ParsePushDefault is ParsePush for a front end with a current target
// (the console): with two paths and no TARGETS, TARGETS is targets.
func ParsePushDefault(args []string, targets string) (PushSpec, error) {
	var s PushSpec
	pos, err := ParseFlags("push", args, s.Bind)
	if err != nil {
		return s, err
	}
	return s, s.ArgsDefault(pos, targets)
}

func validOwner(v string) error {
	user, group, _ := strings.Cut(v, ":")
	if user == "" && group == "" {
		return errors.New("name a user, user:group or :group")
	}
	for _, p := range []string{user, group} {
		if strings.ContainsAny(p, " \t\n/:") || strings.HasPrefix(p, "-") {
			return fmt.Errorf("%q is not a user or group name", p)
		}
	}
	return nil
}

// ParsePull reads the words of `rex pull` as the console gets them.
func ParsePull(args []string) (PullSpec, error) { return ParsePullDefault(args, "") }

// ParsePullDefault is ParsePull for a front end with a current target:
// with no TARGETS, TARGETS is targets.
func ParsePullDefault(args []string, targets string) (PullSpec, error) {
	var s PullSpec
	pos, err := ParseFlags("pull", args, s.Bind)
	if err != nil {
		return s, err
	}
	return s, s.ArgsDefault(pos, targets)
}

// SyncPhase is where a push or a pull stands on one target.
type SyncPhase int

// The phases, in the order a sync goes through them. A push reads its
// tree here before it reaches the targets; a pull reads it on the target.
const (
	SyncReading    SyncPhase = iota // reading the tree
	SyncConnecting                  // reaching the target, or waiting for a turn
	SyncAsking                      // comparing trees: what does the other side lack?
	SyncMoving                      // objects crossing the wire; Progress says how many
	SyncMerging                     // pull: merging with the local changes
	SyncWriting                     // writing the tree: on the target (push) or here (pull)
)

// SyncProgress is a push's or a pull's state on one target: its phase and,
// from SyncAsking on, what has crossed the wire and what will.
type SyncProgress struct {
	Phase SyncPhase
	cas.Progress
}

// SyncOptions let a front end watch pushes and pulls; every field may be
// nil. They are called from the goroutines doing the work, so they must
// be safe for concurrent use and quick.
type SyncOptions struct {
	// Progress sees each target's progress.
	Progress func(target string, p SyncProgress)
	// Pushed sees each target's push end, as it ends.
	Pushed func(PushOutcome)
	// Pulled sees each target's pull end, as it ends.
	Pulled func(PullResult, fanout.EachResult)
}

func (o SyncOptions) report(target string) func(SyncProgress) {
	if o.Progress == nil {
		return func(SyncProgress) {}
	}
	return func(p SyncProgress) { o.Progress(target, p) }
}

// PushStats is what one target's push cost.
type PushStats struct {
	cas.Stats
	// WireOut and WireIn are the bytes the push put on the connection,
	// requests and answers included.
	WireOut, WireIn int64
}

// PushResult is what a push did on one target (or, dry, would do).
type PushResult = protocol.CASMaterializeResult

// openStore opens the operator's object store.
func (app *App) openStore() (*cas.Store, error) {
	if app.CASDir == "" {
		return nil, errors.New("no local object store configured")
	}
	st, err := cas.Open(app.CASDir)
	if err != nil {
		return nil, fmt.Errorf("open the local object store %s: %w", app.CASDir, err)
	}
	return st, nil
}

// problemsError refuses a tree some of whose files could not be read, so
// nothing is ever dropped silently; nothing says what was left alone
// (what a push did not send, or a pull did not write).
func problemsError(dir string, problems []cas.IngestProblem, nothing string) error {
	var list []string
	for i, p := range problems {
		if i == 5 {
			list = append(list, fmt.Sprintf("and %d more", len(problems)-5))
			break
		}
		list = append(list, p.Error())
	}
	return fmt.Errorf("%d file(s) in %s cannot be synced (%s); fix or move them, %s",
		len(problems), dir, strings.Join(list, "; "), nothing)
}

// Why a sync stopped before it changed anything, as problemsError ends.
const (
	nothingSent    = "nothing was sent"
	nothingWritten = "nothing was written here"
)

// ingestLocal takes a local directory into the store (opts.Blobs is
// always BlobsText); nothing is how its refusal ends (nothingSent,
// nothingWritten).
func ingestLocal(ctx context.Context, st *cas.Store, dir string, opts cas.IngestOptions, nothing string) (cas.Digest, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return cas.Digest{}, fmt.Errorf("read %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return cas.Digest{}, fmt.Errorf("%s is not a directory", dir)
	}
	// Only what a later merge may need is copied into the store (text);
	// a push reads the rest from the files themselves.
	opts.Blobs = cas.BlobsText
	root, problems, err := st.IngestWith(ctx, dir, opts)
	if err != nil {
		return cas.Digest{}, fmt.Errorf("read %s: %w", dir, err)
	}
	if len(problems) > 0 {
		return cas.Digest{}, problemsError(dir, problems, nothing)
	}
	return root, nil
}

// refKey names the last synced snapshot of a directory on a target and
// the local directory it was synced with: a pull into another local
// directory has a base of its own.
func refKey(target, remote, local string) cas.RefKey {
	return cas.RefKey{Target: target, Path: remote, Local: local}
}

// recordSnapshot stores a snapshot of tree as the new state of key, with
// the previous one as its parent. Concurrent writers retry on conflict.
func recordSnapshot(ctx context.Context, st *cas.Store, key cas.RefKey, tree cas.Digest, msg string) error {
	for attempt := 0; attempt < 5; attempt++ {
		ref, err := st.ReadRef(key)
		if err != nil {
			return fmt.Errorf("read the sync record of %s:%s: %w", key.Target, key.Path, err)
		}
		var parents []cas.Digest
		if !ref.Snapshot.IsZero() {
			// A sync that found both sides as last recorded (an unchanged
			// push) has nothing to record: the base stays, and no object
			// and ref are written per target and push.
			if last, err := st.ReadSnapshot(ref.Snapshot); err == nil && last.Root == tree {
				return nil
			}
			parents = append(parents, ref.Snapshot)
		}
		snap, err := st.PutSnapshot(cas.NewSnapshot(tree, msg, parents...))
		if err != nil {
			return err
		}
		if _, err := st.UpdateRef(ctx, key, ref.Revision, snap); err == nil {
			return nil
		} else if !errors.Is(err, cas.ErrRefConflict) {
			return err
		}
	}
	return fmt.Errorf("record the sync of %s:%s: too many concurrent updates", key.Target, key.Path)
}

// Push is `rex push`: local files and directories to a directory on many
// targets, only what each lacks crossing the wire.
func Push(ctx context.Context, app *App, o IO, spec PushSpec) error {
	if spec.ConnectTimeout > 0 {
		app.ConnectTimeout = spec.ConnectTimeout
	}
	targets, err := app.Resolve(spec.Targets)
	if err != nil {
		return err
	}
	if spec.Sudo {
		targets = WithSudo(targets)
	}
	var mu sync.Mutex
	var enc *json.Encoder
	if spec.JSON {
		enc = json.NewEncoder(o.Out)
	}
	outcomes, err := PushTargets(ctx, app, PushRequest{Sources: spec.Sources, Dest: spec.Dest, Options: spec.PushOptions}, targets, SyncOptions{
		Pushed: func(po PushOutcome) {
			mu.Lock()
			defer mu.Unlock()
			if enc != nil {
				enc.Encode(po.JSON())
				return
			}
			if po.Err != nil {
				return // reported with the others at the end
			}
			for _, l := range po.Lines() {
				fmt.Fprintln(o.Out, l)
			}
		},
	})
	if err != nil {
		return err
	}
	if enc != nil {
		return eachStatus(EachResults(outcomes))
	}
	return reportEach(o, EachResults(outcomes))
}

// PushRequest is what to push where: local files and directories
// (relative to the process's working directory or absolute) and the
// destination on the targets.
type PushRequest struct {
	Sources []string
	Dest    string
	Options PushOptions
}

// PushOutcome is how a push ended on one target.
type PushOutcome struct {
	Target      string
	Stats       PushStats
	Result      PushResult
	DryRun      bool
	Err         error
	Unreachable bool
	// Cancelled: ctrl+c (the caller's ctx) stopped the push there; Err
	// reads "cancelled", as rex run says it.
	Cancelled bool
	Duration  time.Duration
}

// What says what a push did in a few words: "created with 12 entries",
// "added 2, updated 1, deleted 3", "up to date"; a dry run's "would add 2,
// …".
func (po PushOutcome) What() string {
	r := po.Result
	if po.DryRun {
		return dryWhat(r)
	}
	var parts []string
	if r.Created {
		parts = append(parts, "created")
	}
	for _, p := range []struct {
		n    int
		word string
	}{{r.Added, "added"}, {r.Updated, "updated"}, {r.Deleted, "deleted"}} {
		if p.n > 0 && !(r.Created && p.word == "added") {
			parts = append(parts, fmt.Sprintf("%s %d", p.word, p.n))
		}
	}
	if r.Created && r.Added > 0 {
		parts[0] = fmt.Sprintf("created with %d %s", r.Added, plural(r.Added, "entry", "entries"))
	}
	if len(parts) == 0 {
		return "up to date"
	}
	return strings.Join(parts, ", ")
}

func dryWhat(r PushResult) string {
	var parts []string
	if r.Created {
		parts = append(parts, "create it")
	}
	for _, p := range []struct {
		n    int
		verb string
	}{{r.Added, "add"}, {r.Updated, "update"}, {r.Deleted, "delete"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", p.verb, p.n))
		}
	}
	if len(parts) == 0 {
		return "up to date (dry run)"
	}
	return "would " + strings.Join(parts, ", ") + " (dry run: nothing changed)"
}

// Lines are what `rex push` prints for a target the push reached: first
// "h1: /srv/site: added 2, updated 1 · sent 3 files, 2.0 KiB (2 queries,
// 2.4 KiB out, 310 B in)", then one line per path deleted ("h1: - a/b"),
// and for a dry run per path added ("+") and updated ("~").
func (po PushOutcome) Lines() []string {
	ps := po.Stats
	sent := "nothing sent"
	if ps.Blobs > 0 || ps.Trees > 0 {
		sent = fmt.Sprintf("sent %d %s, %d %s, %s", ps.Blobs, plural(ps.Blobs, "file", "files"), ps.Trees, plural(ps.Trees, "dir", "dirs"), HumanBytes(ps.Bytes))
	}
	lines := []string{fmt.Sprintf("%s: %s: %s · %s (%d %s, %s out, %s in)", po.Target, po.Result.Path, po.What(), sent,
		ps.Queries, plural(ps.Queries, "query", "queries"), HumanBytes(ps.WireOut), HumanBytes(ps.WireIn))}
	if po.Result.Warning != "" {
		lines = append(lines, fmt.Sprintf("%s! %s", po.Target, po.Result.Warning))
	}
	if po.DryRun {
		for _, p := range po.Result.AddedPaths {
			lines = append(lines, po.Target+": + "+p)
		}
		for _, p := range po.Result.UpdatedPaths {
			lines = append(lines, po.Target+": ~ "+p)
		}
	}
	for _, p := range po.Result.DeletedPaths {
		lines = append(lines, po.Target+": - "+p)
	}
	return lines
}

// Line is the first of Lines.
func (po PushOutcome) Line() string { return po.Lines()[0] }

// UpToDate reports whether the target already held the tree.
func (po PushOutcome) UpToDate() bool {
	return po.Err == nil && po.Result.Unchanged && !po.Result.Created
}

// PushJSON is the shape of a `rex push --json` line, one per target.
type PushJSON struct {
	Target      string   `json:"target"`
	Path        string   `json:"path,omitempty"`
	DryRun      bool     `json:"dry_run,omitempty"`
	Created     bool     `json:"created,omitempty"`
	Unchanged   bool     `json:"unchanged,omitempty"`
	Added       []string `json:"added"`
	Updated     []string `json:"updated"`
	Deleted     []string `json:"deleted"`
	BytesSent   int64    `json:"bytes_sent"`
	FilesSent   int      `json:"files_sent"`
	Warning     string   `json:"warning,omitempty"`
	Error       string   `json:"error,omitempty"`
	Unreachable bool     `json:"unreachable,omitempty"`
	Cancelled   bool     `json:"cancelled,omitempty"`
	DurationMS  int64    `json:"duration_ms"`
}

// JSON is the outcome as `rex push --json` prints it.
func (po PushOutcome) JSON() PushJSON {
	j := PushJSON{Target: po.Target, Path: po.Result.Path, DryRun: po.DryRun, Created: po.Result.Created,
		Unchanged: po.Err == nil && po.Result.Unchanged, Added: nonNil(po.Result.AddedPaths), Updated: nonNil(po.Result.UpdatedPaths),
		Deleted: nonNil(po.Result.DeletedPaths), BytesSent: po.Stats.Bytes, FilesSent: po.Stats.Blobs,
		Warning: po.Result.Warning, Unreachable: po.Unreachable, Cancelled: po.Cancelled, DurationMS: po.Duration.Milliseconds()}
	if po.Err != nil {
		j.Error = po.Err.Error()
	}
	return j
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// EachResults turns push outcomes into the fan-out's per-target results.
func EachResults(outcomes []PushOutcome) []fanout.EachResult {
	out := make([]fanout.EachResult, len(outcomes))
	for i, po := range outcomes {
		out[i] = fanout.EachResult{Target: po.Target, Err: po.Err, Unreachable: po.Unreachable, Cancelled: po.Cancelled, Duration: po.Duration}
	}
	return out
}

// source is what a push sends: a tree, and how it maps onto DEST.
type source struct {
	tree cas.Digest
	// file is set for a single file: DEST is its new path, unless DEST
	// ends in "/" or is a directory on the target, when it goes into it.
	file *cas.Entry
	// local is the directory whose contents are the tree, when the push is
	// of one directory: its sync record (a pull's base) and its conflicts
	// are kept under that path.
	local string
	// names are the sources' names in DEST, when there are several:
	// --delete deletes inside them only, as rsync does.
	names []string
}

// readSources takes the sources of a push into the store. One directory:
// its contents become DEST's. One file: it becomes DEST (or goes into
// it). Several: each goes into DEST under its own name.
func readSources(ctx context.Context, st *cas.Store, sources []string, opts PushOptions) (source, error) {
	var src source
	if len(sources) == 0 {
		return src, Usagef("push: name what to send")
	}
	if len(sources) == 1 {
		fi, err := os.Stat(sources[0])
		if err != nil {
			return src, fmt.Errorf("read %s: %w", sources[0], err)
		}
		if fi.IsDir() {
			abs, err := filepath.Abs(sources[0])
			if err != nil {
				return src, err
			}
			if !opts.Force {
				if err := checkConflicts(st, abs); err != nil {
					return src, err
				}
				if err := checkSourceConflicts(st, sources); err != nil {
					return src, err // a pull into a directory inside or above it
				}
			}
			src.local = abs
			if src.tree, err = ingestLocal(ctx, st, sources[0], cas.IngestOptions{KeepLeftovers: opts.DryRun, Verified: opts.verified}, nothingSent); err != nil {
				return src, err
			}
			return src, applyChmod(ctx, st, &src, opts.Chmod)
		}
		// One file is written on its own, atomically; these flags would
		// act on the whole directory it lands in.
		for _, f := range []struct {
			on   bool
			name string
		}{{opts.Delete, "--delete"}, {opts.Atomic, "--atomic"}} {
			if f.on {
				return src, Usagef("push: %s would apply to the whole directory %s lands in, not to the file; drop it (the file is replaced atomically anyway)", f.name, sources[0])
			}
		}
	}
	if opts.Atomic && len(sources) > 1 {
		return src, Usagef("push: --atomic replaces DEST whole, so with several sources whatever else it holds would go; push one directory that holds what DEST should be")
	}
	if !opts.Force {
		if err := checkSourceConflicts(st, sources); err != nil {
			return src, err
		}
	}
	var entries []cas.Entry
	seen := map[string]string{}
	for _, p := range sources {
		name := filepath.Base(filepath.Clean(p))
		if other, dup := seen[name]; dup {
			return src, Usagef("push: %s and %s would both land as %s in %s; push them separately", other, p, name, "DEST")
		}
		seen[name] = p
		if err := cas.ValidateName(name); err != nil {
			return src, fmt.Errorf("push %s: %w", p, err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			return src, fmt.Errorf("read %s: %w", p, err)
		}
		switch {
		case fi.IsDir():
			d, err := ingestLocal(ctx, st, p, cas.IngestOptions{KeepLeftovers: opts.DryRun, Verified: opts.verified}, nothingSent)
			if err != nil {
				return src, err
			}
			entries = append(entries, cas.Entry{Name: name, Type: cas.EntryDir, Digest: d}.WithPerm(unixPerm(fi.Mode())))
		case fi.Mode().IsRegular():
			d, err := addFile(st, p)
			if err != nil {
				return src, err
			}
			entries = append(entries, cas.Entry{Name: name, Type: cas.EntryFile, Digest: d}.WithPerm(unixPerm(fi.Mode())))
		default:
			return src, fmt.Errorf("push %s: not a file or directory", p)
		}
	}
	slices.SortFunc(entries, func(a, b cas.Entry) int { return strings.Compare(a.Name, b.Name) })
	if len(sources) > 1 {
		for _, e := range entries {
			src.names = append(src.names, e.Name)
		}
	}
	var err error
	if src.tree, err = st.PutTree(cas.Tree{Entries: entries}); err != nil {
		return src, err
	}
	if err := applyChmod(ctx, st, &src, opts.Chmod); err != nil {
		return src, err
	}
	if len(sources) == 1 {
		t, err := st.ReadTree(src.tree)
		if err != nil {
			return src, err
		}
		e := t.Entries[0]
		src.file = &e
	}
	return src, nil
}

// addFile takes one file in, as ingestLocal does a directory's.
func addFile(st *cas.Store, p string) (cas.Digest, error) {
	d, err := st.IngestFile(p, cas.BlobsText)
	if err != nil {
		return cas.Digest{}, fmt.Errorf("read %s: %w", p, err)
	}
	return d, nil
}

// unixPerm is a Go file mode's permission bits in Unix's octal layout.
func unixPerm(m fs.FileMode) fs.FileMode {
	p := m.Perm()
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}

// applyChmod rewrites the modes of what is sent.
func applyChmod(ctx context.Context, st *cas.Store, src *source, spec string) error {
	if spec == "" {
		return nil
	}
	fn, err := ParseChmod(spec)
	if err != nil {
		return err
	}
	src.tree, err = st.MapEntries(ctx, src.tree, func(_ string, e cas.Entry) cas.Entry {
		return e.WithPerm(fn(e.Type == cas.EntryDir, e.Perm()))
	})
	return err
}

// PushTargets is `rex push` after its arguments: it reads the sources into
// the object store once, then pushes them to every target in parallel
// through app's pool. The error is for what stops every target (an
// unreadable source, unresolved conflicts); each target's own end is in
// its outcome, in the order of targets.
func PushTargets(ctx context.Context, app *App, req PushRequest, targets []fanout.Target, opts SyncOptions) ([]PushOutcome, error) {
	st, err := app.openStore()
	if err != nil {
		return nil, err
	}
	tell := func(phase SyncPhase) {
		if opts.Progress != nil {
			for _, t := range targets {
				opts.Progress(t.Name, SyncProgress{Phase: phase})
			}
		}
	}
	tell(SyncReading)
	// The sources are read while the targets are reached: neither waits
	// for the other. A source that cannot be read stops them all.
	parent := ctx
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	// Set before the reader starts: it reads req while the targets dial.
	req.Options.verified = &cas.VerifiedSet{Share: len(targets) > 1}
	var src source
	var srcErr error
	read := make(chan struct{})
	var phaseMu sync.Mutex
	started := map[string]bool{} // targets reached once the sources were read
	go func() {
		defer close(read)
		if src, srcErr = readSources(ctx, st, req.Sources, req.Options); srcErr != nil {
			stop()
			return
		}
		phaseMu.Lock()
		defer phaseMu.Unlock()
		for _, t := range targets {
			if !started[t.Name] && opts.Progress != nil {
				opts.Progress(t.Name, SyncProgress{Phase: SyncConnecting})
			}
		}
	}()
	outcomes := make([]PushOutcome, len(targets))
	index := make(map[string]int, len(targets))
	for i, t := range targets {
		index[t.Name] = i
	}
	results := fanout.Each(ctx, app.Pool, targets, fanout.Options{ConnectTimeout: app.ConnectTimeout, Bulk: true},
		func(ctx context.Context, t fanout.Target, s *rexclient.Session) error {
			select {
			case <-read:
			case <-ctx.Done():
				return ctx.Err()
			}
			if srcErr != nil {
				return srcErr
			}
			phaseMu.Lock()
			started[t.Name] = true
			phaseMu.Unlock()
			start := time.Now()
			po := PushOutcome{Target: t.Name, DryRun: req.Options.DryRun}
			po.Stats, po.Result, po.Err = pushSource(ctx, st, s, t.Name, src, req.Dest, req.Options, opts.report(t.Name))
			po.Err = syncCancelled(parent, po.Err)
			po.Cancelled = isCancelled(po.Err)
			po.Unreachable = !po.Cancelled && connectionLost(po.Err)
			po.Duration = time.Since(start)
			outcomes[index[t.Name]] = po
			if opts.Pushed != nil {
				opts.Pushed(po)
			}
			return po.Err
		})
	<-read
	if srcErr != nil {
		return nil, srcErr
	}
	for i, r := range results {
		if r.Unreachable || r.Cancelled {
			// fn never ran: the outcome is the connection's.
			outcomes[i] = PushOutcome{Target: r.Target, Err: r.Err, Unreachable: r.Unreachable, Cancelled: r.Cancelled, Duration: r.Duration, DryRun: req.Options.DryRun}
			if r.Cancelled {
				outcomes[i].Err = cancelledError{r.Err}
			}
			if opts.Pushed != nil {
				opts.Pushed(outcomes[i])
			}
		}
	}
	return outcomes, nil
}

func errNoCAS(target string) error {
	return fmt.Errorf("the rexd on %s is too old to sync files (no cas capability); run `rex device clean %s` so the next connection installs the current one", target, target)
}

// pushSource sends src to dest on the target behind s.
func pushSource(ctx context.Context, st *cas.Store, s *rexclient.Session, target string, src source, dest string, opts PushOptions, report func(SyncProgress)) (PushStats, PushResult, error) {
	tree := src.tree
	if src.file != nil && !strings.HasSuffix(dest, "/") {
		// DEST names the file, unless it is a directory there.
		var fi protocol.FSStatResult
		err := s.Client().Call(ctx, protocol.MethodFSStat, protocol.FSStatParams{SessionID: s.ID, Path: dest}, &fi)
		switch {
		case err == nil && fi.Type == "dir":
		case err == nil || protocol.ErrorCode(err) == protocol.CodeInvalidParams:
			// Not there (or a file): write DEST itself, in its directory.
			e := *src.file
			e.Name = path.Base(dest)
			if err := cas.ValidateName(e.Name); err != nil {
				return PushStats{}, PushResult{}, fmt.Errorf("push to %s: %w", dest, err)
			}
			t, err := st.PutTree(cas.Tree{Entries: []cas.Entry{e}})
			if err != nil {
				return PushStats{}, PushResult{}, err
			}
			tree, dest = t, path.Dir(dest)
		default:
			return PushStats{}, PushResult{}, fmt.Errorf("look at %s: %w", dest, err)
		}
	}
	opts.deleteUnder = src.names
	ps, res, err := PushTreeWith(ctx, st, s, target, tree, dest, opts, report)
	if err != nil || opts.DryRun || src.local == "" {
		return ps, res, err
	}
	if err := recordSnapshot(ctx, st, refKey(target, res.Path, src.local), tree, "push"); err != nil {
		return ps, res, err
	}
	return ps, res, nil
}

// PushTree sends tree to the target behind s and writes it into remoteDir
// (adding and replacing; see PushOptions for the rest).
func PushTree(ctx context.Context, st *cas.Store, s *rexclient.Session, target string, tree cas.Digest, remoteDir string, opts PushOptions) (PushStats, PushResult, error) {
	return PushTreeWith(ctx, st, s, target, tree, remoteDir, opts, nil)
}

// PushTreeWith is PushTree reporting its progress to report (nil: none).
// The tree objects go first (only those the target lacks); the target
// then plans the update, finding every blob it can on its own side (its
// destination's files, the other directories it holds), and asks for the
// rest, which is written straight where it belongs.
func PushTreeWith(ctx context.Context, st *cas.Store, s *rexclient.Session, target string, tree cas.Digest, remoteDir string, opts PushOptions, report func(SyncProgress)) (PushStats, PushResult, error) {
	if report == nil {
		report = func(SyncProgress) {}
	}
	if !s.HasCAS() {
		return PushStats{}, PushResult{}, errNoCAS(target)
	}
	remote := s.CAS()
	out0, in0 := s.Client().BytesOut(), s.Client().BytesIn()
	stats := func(cs cas.Stats) PushStats {
		return PushStats{Stats: cs, WireOut: s.Client().BytesOut() - out0, WireIn: s.Client().BytesIn() - in0}
	}
	report(SyncProgress{Phase: SyncAsking, Progress: cas.Progress{Walking: true}})
	var last cas.Progress
	// A dry run sends the trees the target lacks with cas.materialize,
	// which plans with them and stores none; only a tree set larger than
	// one call may carry goes to the target's store as a push's would.
	var sink cas.Remote = remote
	dry := &dryTrees{Remote: remote}
	if opts.DryRun {
		sink = dry
	}
	total, err := cas.PushTrees(ctx, st, sink, tree, cas.SyncOptions{Progress: func(p cas.Progress) {
		last = p
		report(SyncProgress{Phase: SyncAsking, Progress: p})
	}})
	if err != nil {
		return stats(total), PushResult{}, sendError(remoteDir, err)
	}
	params := protocol.CASMaterializeParams{
		Atomic: opts.Atomic, Delete: opts.Delete, DeleteUnder: opts.deleteUnder, DryRun: opts.DryRun, Owner: opts.Chown, MaxBytes: opts.MaxBytes, List: opts.List || opts.DryRun,
	}
	if params.Trees, err = dry.objects(ctx); err != nil {
		return stats(total), PushResult{}, sendError(remoteDir, err)
	}
	res, err := remote.Materialize(ctx, tree, remoteDir, params)
	if err != nil {
		return stats(total), res, writeError(target, remoteDir, err)
	}
	if res.Txn == "" {
		report(SyncProgress{Phase: SyncWriting, Progress: last})
		return stats(total), res, nil
	}
	// The target needs blobs: send them, then commit.
	sent, err := sendNeeded(ctx, st, remote, res, &last, opts.verified, report)
	total.Batches += sent.Batches
	total.Streams += sent.Streams
	total.Blobs += sent.Blobs
	total.Bytes += sent.Bytes
	if err != nil {
		abortCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		remote.Abort(abortCtx, res.Txn)
		cancel()
		if placeError(err) {
			// The blobs of an update are written where they go: this is
			// the destination's failure, not the sending's.
			return stats(total), PushResult{Path: res.Path}, writeError(target, res.Path, err)
		}
		return stats(total), PushResult{Path: res.Path}, sendError(res.Path, err)
	}
	report(SyncProgress{Phase: SyncWriting, Progress: last})
	done, err := remote.Commit(ctx, res.Txn)
	if err != nil {
		return stats(total), PushResult{Path: res.Path}, writeError(target, res.Path, err)
	}
	return stats(total), done, nil
}

// dryTrees is the target as a push --dry-run sends it trees: it answers
// what the target lacks and keeps what would be sent.
type dryTrees struct {
	cas.Remote
	objs  []cas.Object
	bytes int64
}

func (d *dryTrees) Put(ctx context.Context, objs []cas.Object) error {
	for _, o := range objs {
		d.objs = append(d.objs, o)
		d.bytes += int64(len(o.Data))
	}
	return nil
}

func (d *dryTrees) PutStream(ctx context.Context, dg cas.Digest, r io.Reader) error {
	data, err := io.ReadAll(io.LimitReader(r, dg.Size+1))
	if err != nil {
		return err
	}
	return d.Put(ctx, []cas.Object{{Digest: dg, Data: data}})
}

// objects returns the trees kept, for cas.materialize's trees, when one
// call may carry them; more are sent to the store (children first, as
// they were kept), and nothing is returned.
func (d *dryTrees) objects(ctx context.Context) ([]protocol.CASObject, error) {
	if len(d.objs) == 0 {
		return nil, nil
	}
	// The caps of one cas.put: its base64 (5.4 MiB at most) fits a line.
	if len(d.objs) <= cas.MaxBatchEntries && d.bytes <= cas.MaxBatchBytes {
		out := make([]protocol.CASObject, len(d.objs))
		for i, o := range d.objs {
			out[i] = protocol.CASObject{Digest: o.Digest.String(), Data: cas.EncodeBase64(o.Data)}
		}
		return out, nil
	}
	var batch []cas.Object
	var size int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := d.Remote.Put(ctx, batch)
		batch, size = nil, 0
		return err
	}
	for _, o := range d.objs {
		if len(o.Data) > cas.MaxInlineSize {
			if err := flush(); err != nil { // its children land first
				return nil, err
			}
			if err := d.Remote.PutStream(ctx, o.Digest, bytes.NewReader(o.Data)); err != nil {
				return nil, err
			}
			continue
		}
		if len(batch) == cas.MaxBatchEntries || size+int64(len(o.Data)) > cas.MaxBatchBytes {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		batch = append(batch, o)
		size += int64(len(o.Data))
	}
	return nil, flush()
}

// writeError says why a target did not write: a full disk in the words
// operators know ("no space left on h1 in /srv/site: 18 MB needed, 3 MB
// free"), anything else as rexd said it.
func writeError(target, dest string, err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.CodeNoSpace {
		if msg, ok := strings.CutPrefix(pe.Message, "no space left in "); ok {
			return errors.New("no space left on " + target + " in " + msg)
		}
		// Space ran out while writing (the check before found enough):
		// rexd's sentence, below, names the file system.
	}
	if errors.Is(err, rexclient.ErrClosed) {
		return lostError{"write " + dest, "push", err}
	}
	if errors.As(err, &pe) && pe.Code == protocol.CodeResourceLimit && strings.Contains(pe.Message, "--max-bytes") {
		return rexdSentence{pe}
	}
	if errors.As(err, &pe) {
		return fmt.Errorf("write %s: %w", dest, rexdSentence{pe})
	}
	return fmt.Errorf("write %s: %w", dest, err)
}

// sendError is a push's failure while sending to dest: a lost connection
// in one sentence, else what the sending said.
func sendError(dest string, err error) error {
	if errors.Is(err, rexclient.ErrClosed) {
		return lostError{"send to " + dest, "push", err}
	}
	return fmt.Errorf("send: %w", err)
}

// fetchError is a pull's failure to read (op) remote: rexd's sentence
// without its code and method, or a lost connection in one sentence.
func fetchError(op, remote string, err error) error {
	var pe *protocol.Error
	switch {
	case errors.Is(err, rexclient.ErrClosed):
		return lostError{op + " " + remote, "pull", err}
	case errors.As(err, &pe):
		return fmt.Errorf("%s %s: %w", op, remote, rexdSentence{pe})
	}
	return fmt.Errorf("%s %s: %w", op, remote, err)
}

// lostError is a sync whose connection to the target's rexd ended (rexd
// or sshd stopped, the network went) said as an operator reads it, instead
// of the stream it was in ("stream a53c…/20971520: connection to rexd
// closed"); the cause stays wrapped, so the pool drops the connection.
type lostError struct {
	doing, again string
	err          error
}

func (e lostError) Error() string {
	return e.doing + ": the connection was lost (rexd or ssh ended there); " + e.again + " again"
}

func (e lostError) Unwrap() error { return e.err }

// placeError reports whether err is rexd's word that a place on the
// target cannot be written: no permission, no space, a file-system error.
func placeError(err error) bool {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case protocol.CodeUnauthorized, protocol.CodeFileSystem, protocol.CodeNoSpace:
		return true
	}
	return false
}

// rexdSentence is an error rexd worded for people, as an operator reads
// it: its sentence, without the error's code and the method's name,
// which are for programs (they stay in the wrapped error).
type rexdSentence struct{ pe *protocol.Error }

func (e rexdSentence) Error() string {
	msg := e.pe.Message
	// "cas.put_chunk: …", or "cas.ingest /srv/site: …" (the caller says
	// the path).
	if method, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(method, "cas.") {
		return rest
	}
	return msg
}

func (e rexdSentence) Unwrap() error { return e.pe }

// sendNeeded sends the blobs an update asked for, page after page.
func sendNeeded(ctx context.Context, st *cas.Store, remote *rexclient.CASRemote, res PushResult, last *cas.Progress, verified *cas.VerifiedSet, report func(SyncProgress)) (cas.Stats, error) {
	var sent cas.Stats
	need, err := rexclient.ParseDigests(res.Needed)
	if err != nil {
		return sent, err
	}
	base := *last
	base.TotalObjects = last.Trees + res.NeededTotal
	base.TotalBytes = last.Bytes
	for _, d := range need {
		base.TotalBytes += d.Size
	}
	sink := remote.ForTxn(res.Txn)
	for len(need) > 0 {
		done := sent
		s, err := cas.SendBlobs(ctx, st, sink, need, cas.SyncOptions{Verified: verified, Progress: func(p cas.Progress) {
			q := base
			q.Walking = false
			q.Blobs = done.Blobs + p.Blobs
			q.Bytes = base.Bytes + done.Bytes + p.Bytes
			*last = q
			report(SyncProgress{Phase: SyncMoving, Progress: q})
		}})
		sent.Batches += s.Batches
		sent.Streams += s.Streams
		sent.Blobs += s.Blobs
		sent.Bytes += s.Bytes
		if err != nil {
			return sent, changedWhileSent(err)
		}
		if res.NeededTotal <= cas.MaxHasDigests {
			break
		}
		if need, _, err = remote.Needed(ctx, res.Txn); err != nil {
			return sent, err
		}
		for _, d := range need {
			base.TotalBytes += d.Size
		}
	}
	return sent, nil
}

// changedWhileSent says what a target's refusal of a blob that does not
// match its digest means here: the source file changed while it was being
// read for sending (a blob hashed when the source was read is sent without
// hashing it again; the target checks every one).
func changedWhileSent(err error) error {
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidParams {
		return err
	}
	var data struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(pe.Data, &data) != nil || data.Reason != "digest_mismatch" {
		return err
	}
	return fmt.Errorf("a source file changed while it was being sent, and the target refused what no longer matches what was read; push again (%w)", err)
}

// syncCancelled says a push or pull that ctrl+c (ctx) stopped the way rex
// run says it, "cancelled", instead of the wire error it ended with
// ("send: stream 90de…/20971520: context canceled"); the cause stays
// wrapped. An error of its own, ended before the cancel, is kept.
func syncCancelled(ctx context.Context, err error) error {
	if err == nil || isCancelled(err) || ctx.Err() == nil || !errors.Is(err, context.Canceled) {
		return err
	}
	return cancelledError{err}
}

// cancelledError is a sync that ctrl+c stopped.
type cancelledError struct{ err error }

// connectionLost reports whether err is the target's connection ending
// under a sync: it counts as unreachable (exit 255), as a command's lost
// connection does in rex run.
func connectionLost(err error) bool {
	return errors.Is(err, rexclient.ErrClosed) || errors.Is(err, rexclient.ErrDropped)
}

func isCancelled(err error) bool {
	var ce cancelledError
	return errors.As(err, &ce)
}

func (cancelledError) Error() string   { return "cancelled" }
func (e cancelledError) Unwrap() error { return e.err }

// HumanBytes writes a byte count the way rex reports sizes.
func HumanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// reportEach prints failures and maps results to the exit status: 255 when
// a target was unreachable, 1 when one failed. Of several targets, a
// failure ends with the summary rex run prints, so the count is not left
// to the reader of many lines.
func reportEach(o IO, results []fanout.EachResult) error {
	var sum fanout.Summary
	for _, r := range results {
		sum.Duration = max(sum.Duration, r.Duration)
		switch {
		case r.Err == nil:
			sum.OK++
			continue
		case r.Cancelled:
			sum.Cancelled++
		case r.Unreachable:
			sum.Unreachable++
		default:
			sum.Failed++
		}
		fmt.Fprintf(o.Err, "%s! %v\n", r.Target, r.Err)
	}
	if len(results) > 1 && sum.OK < len(results) {
		fmt.Fprintln(o.Err, SummaryLine(&sum))
	}
	return eachStatus(results)
}

func eachStatus(results []fanout.EachResult) error {
	code := 0
	for _, r := range results {
		switch {
		case r.Err == nil:
		case r.Unreachable:
			code = 255
		case code == 0:
			code = 1
		}
	}
	if code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// Conflicts a pull leaves are remembered per local directory until they
// are resolved: a push from that directory refuses to send conflict
// markers or the .theirs copies (see checkConflicts).

type conflictRecord struct {
	Dir     string   `json:"dir"`
	Markers []string `json:"markers"` // files that held conflict markers
	Theirs  []string `json:"theirs"`  // the .theirs copies written
}

func conflictFile(st *cas.Store, dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(st.Root(), "conflicts", hex.EncodeToString(sum[:12])+".json")
}

func saveConflicts(st *cas.Store, rec conflictRecord) error {
	p := conflictFile(st, rec.Dir)
	if len(rec.Markers) == 0 && len(rec.Theirs) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	tmp := p + ".tmp-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// loadConflicts reads the record of dir (none when there is none, or it is
// damaged).
func loadConflicts(st *cas.Store, dir string) conflictRecord {
	var rec conflictRecord
	b, err := os.ReadFile(conflictFile(st, dir))
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.Dir != dir {
		return conflictRecord{Dir: dir}
	}
	return rec
}

// with adds the paths of old that r lacks.
func (r conflictRecord) with(old conflictRecord) conflictRecord {
	union := func(a, b []string) []string {
		seen := make(map[string]bool, len(a))
		for _, p := range a {
			seen[p] = true
		}
		for _, p := range b {
			if !seen[p] {
				a = append(a, p)
			}
		}
		return a
	}
	r.Markers, r.Theirs = union(r.Markers, old.Markers), union(r.Theirs, old.Theirs)
	return r
}

// hasMarkers reports whether a file still holds a conflict: a line that
// starts "<<<<<<< " and one that starts ">>>>>>> ".
func hasMarkers(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	open := false
	for sc.Scan() {
		l := sc.Bytes()
		if bytes.HasPrefix(l, []byte("<<<<<<< ")) || bytes.Equal(l, []byte("<<<<<<<")) {
			open = true
		} else if open && (bytes.HasPrefix(l, []byte(">>>>>>> ")) || bytes.Equal(l, []byte(">>>>>>>"))) {
			return true
		}
	}
	return false
}

// openConflict is a conflict a pull left that is still there.
type openConflict struct {
	rel, full string // relative to the record's directory; absolute
	note      string
}

// unresolved lists rec's conflicts still open (markers still in the file,
// the .theirs copy still present) whose absolute path in accepts: markers
// first, each kind in the record's order.
func (rec conflictRecord) unresolved(in func(full string) bool) []openConflict {
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
	var open []openConflict
	for _, kind := range []struct {
		paths  []string
		note   string
		isOpen func(string) bool
	}{{rec.Markers, "conflict markers", hasMarkers}, {rec.Theirs, "the remote side, kept by a pull", exists}} {
		for _, p := range kind.paths {
			full := filepath.Join(rec.Dir, filepath.FromSlash(p))
			if in(full) && kind.isOpen(full) {
				open = append(open, openConflict{rel: p, full: full, note: kind.note})
			}
		}
	}
	return open
}

// checkConflicts refuses a push from dir while a pull's conflicts there are
// unresolved: files with markers, .theirs copies still present. Once all
// are resolved the record goes.
func checkConflicts(st *cas.Store, dir string) error {
	b, err := os.ReadFile(conflictFile(st, dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var rec conflictRecord
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.Dir != dir {
		return nil // a damaged record protects nothing; the files are checked by the merge
	}
	var open []string
	for _, c := range rec.unresolved(func(string) bool { return true }) {
		open = append(open, c.rel+" ("+c.note+")")
	}
	if len(open) == 0 {
		saveConflicts(st, conflictRecord{Dir: dir})
		return nil
	}
	return fmt.Errorf("refusing to push %s: a pull left %d unresolved %s: %s; resolve them (edit out the markers, remove the .theirs files) or pass --force",
		dir, len(open), plural(len(open), "conflict", "conflicts"), strings.Join(open, ", "))
}

// checkSourceConflicts refuses a push of sources while a pull's unresolved
// conflicts lie in them, whatever the source: the pulled directory, a file
// or directory inside it, or one that holds it.
func checkSourceConflicts(st *cas.Store, sources []string) error {
	var abs []string
	for _, p := range sources {
		a, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		abs = append(abs, a)
	}
	inSources := func(p string) bool {
		return slices.ContainsFunc(abs, func(s string) bool {
			return p == s || strings.HasPrefix(p, strings.TrimSuffix(s, "/")+"/")
		})
	}
	names, _ := filepath.Glob(filepath.Join(st.Root(), "conflicts", "*.json"))
	var open []string
	for _, n := range names {
		var rec conflictRecord
		b, err := os.ReadFile(n)
		if err != nil || json.Unmarshal(b, &rec) != nil || rec.Dir == "" {
			continue
		}
		for _, c := range rec.unresolved(inSources) {
			open = append(open, c.full+" ("+c.note+")")
		}
	}
	if len(open) == 0 {
		return nil
	}
	slices.Sort(open)
	return fmt.Errorf("refusing to push: a pull left %d unresolved %s in what is pushed: %s; resolve them (edit out the markers, remove the .theirs files) or pass --force",
		len(open), plural(len(open), "conflict", "conflicts"), strings.Join(open, ", "))
}

// Pull is `rex pull`: a directory on one or more targets back into a
// local one, three-way merged with local changes against what was last
// synced; with several targets, each into LOCAL/<target>.
func Pull(ctx context.Context, app *App, o IO, spec PullSpec) error {
	if spec.ConnectTimeout > 0 {
		app.ConnectTimeout = spec.ConnectTimeout
	}
	targets, err := app.Resolve(spec.Targets)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return Usagef("pull: %s names no targets", spec.Targets)
	}
	if spec.Sudo {
		targets = WithSudo(targets)
	}
	var mu sync.Mutex
	var enc *json.Encoder
	if spec.JSON {
		enc = json.NewEncoder(o.Out)
	}
	results := PullFrom(ctx, app, targets, PullRequest{Remote: spec.RemoteDir, Local: spec.LocalDir, Options: spec.PullOptions}, SyncOptions{
		Pulled: func(res PullResult, r fanout.EachResult) {
			mu.Lock()
			defer mu.Unlock()
			if enc != nil {
				enc.Encode(res.JSON(r))
				return
			}
			if r.Err != nil {
				return
			}
			for _, l := range res.Lines() {
				fmt.Fprintln(o.Out, l)
			}
		},
	})
	each := make([]fanout.EachResult, len(results))
	conflicts := 0
	for i, r := range results {
		each[i] = r.Each
		conflicts += len(r.Result.Conflicts)
	}
	if enc != nil {
		if err := eachStatus(each); err != nil {
			return err
		}
	} else if err := reportEach(o, each); err != nil {
		return err
	}
	if conflicts > 0 {
		return &ExitError{Code: 1, Err: fmt.Errorf("%d %s: resolve them (markers or .theirs files), then push again", conflicts, plural(conflicts, "conflict", "conflicts"))}
	}
	return nil
}

// PullRequest is what to pull where: REMOTE on each target into LOCAL
// (LOCAL/<target> when there are several targets).
type PullRequest struct {
	Remote, Local string
	Options       PullOptions
}

// PullOutcome is one target's pull: what it did, and how reaching the
// target went (Each.Err set when the pull failed).
type PullOutcome struct {
	Result PullResult
	Each   fanout.EachResult
}

// LocalFor is where a pull from target writes: local itself for one
// target, local/<target> for several.
func LocalFor(local, target string, many bool) string {
	if !many {
		return local
	}
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == 0 {
			return '_'
		}
		return r
	}, target)
	return filepath.Join(local, name)
}

// PullFrom is `rex pull` after its arguments: req.Remote on every target
// merged into the local directory, through app's pool, several targets at
// once. Outcomes come in the order of targets.
func PullFrom(ctx context.Context, app *App, targets []fanout.Target, req PullRequest, opts SyncOptions) []PullOutcome {
	out := make([]PullOutcome, len(targets))
	st, err := app.openStore()
	if err != nil {
		for i, t := range targets {
			out[i] = PullOutcome{Each: fanout.EachResult{Target: t.Name, Err: err}}
		}
		return out
	}
	index := map[string]int{}
	for i, t := range targets {
		index[t.Name] = i
		if opts.Progress != nil {
			opts.Progress(t.Name, SyncProgress{Phase: SyncConnecting})
		}
	}
	many := len(targets) > 1
	results := fanout.Each(ctx, app.Pool, targets, fanout.Options{ConnectTimeout: app.ConnectTimeout, Bulk: true},
		func(ctx context.Context, t fanout.Target, s *rexclient.Session) error {
			local := LocalFor(req.Local, t.Name, many)
			res, err := PullTreeWith(ctx, st, s, t.Name, req.Remote, local, req.Options, opts.report(t.Name))
			out[index[t.Name]].Result = res
			return err
		})
	for i, r := range results {
		if !r.Unreachable {
			r.Err = syncCancelled(ctx, r.Err)
			r.Cancelled = r.Cancelled || isCancelled(r.Err)
			r.Unreachable = !r.Cancelled && connectionLost(r.Err)
		}
		out[i].Each = r
		if out[i].Result.Target == "" {
			out[i].Result.Target = r.Target
		}
		if opts.Pulled != nil {
			opts.Pulled(out[i].Result, r)
		}
	}
	return out
}

// PullResult says what a pull did on one target.
type PullResult struct {
	Target     string
	RemotePath string
	LocalDir   string
	DryRun     bool
	// The local paths written, relative to LocalDir: Created and Updated
	// took the remote's version, Merged combined both sides, Deleted
	// followed a remote deletion.
	Created, Updated, Merged, Deleted []string
	Conflicts                         []PullConflict
}

// PullConflict is a path the merge could not settle; Note says where its
// remote side went (" (conflict markers in the file)").
type PullConflict struct {
	cas.Conflict
	Note string
}

// What says what a pull did in a few words.
func (r PullResult) What() string {
	var parts []string
	for _, p := range []struct {
		list []string
		word string
	}{{r.Created, "created"}, {r.Updated, "updated"}, {r.Merged, "merged"}, {r.Deleted, "deleted"}} {
		if len(p.list) > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", p.word, len(p.list)))
		}
	}
	if len(r.Conflicts) > 0 {
		parts = append(parts, plural(len(r.Conflicts), "1 conflict", fmt.Sprintf("%d conflicts", len(r.Conflicts))))
	}
	s := strings.Join(parts, ", ")
	if s == "" {
		s = "up to date"
	}
	if r.DryRun && s != "up to date" {
		s = "would have " + s + " (dry run: nothing changed)"
	}
	return s
}

// Line is what `rex pull` prints first for a target:
// "h1:/srv/site → ./site: created 2, merged 1, 1 conflict".
func (r PullResult) Line() string {
	return fmt.Sprintf("%s:%s → %s: %s", r.Target, r.RemotePath, r.LocalDir, r.What())
}

// Lines are Line, then one line per path the pull wrote ("+" created,
// "~" updated, "M" merged, "-" deleted), then the conflicts.
func (r PullResult) Lines() []string {
	lines := []string{r.Line()}
	for _, p := range []struct {
		list []string
		mark string
	}{{r.Created, "+"}, {r.Updated, "~"}, {r.Merged, "M"}, {r.Deleted, "-"}} {
		for _, x := range p.list {
			lines = append(lines, fmt.Sprintf("%s: %s %s", r.Target, p.mark, x))
		}
	}
	return append(lines, r.ConflictLines()...)
}

// ConflictLines are what `rex pull` prints about the conflicts, one each.
func (r PullResult) ConflictLines() []string {
	var out []string
	for _, c := range r.Conflicts {
		out = append(out, fmt.Sprintf("%s: conflict (%s): %s%s", r.Target, c.Kind, c.Path, c.Note))
	}
	return out
}

// ConflictError is the error a pull with conflicts ends in (exit status
// 1), nil without conflicts.
func (r PullResult) ConflictError() error {
	if len(r.Conflicts) == 0 {
		return nil
	}
	return &ExitError{Code: 1, Err: fmt.Errorf("%d %s in %s: resolve them (markers or .theirs files), then push again",
		len(r.Conflicts), plural(len(r.Conflicts), "conflict", "conflicts"), r.LocalDir)}
}

// PullJSON is the shape of a `rex pull --json` line, one per target.
type PullJSON struct {
	Target      string         `json:"target"`
	Remote      string         `json:"remote,omitempty"`
	Local       string         `json:"local"`
	DryRun      bool           `json:"dry_run,omitempty"`
	Created     []string       `json:"created"`
	Updated     []string       `json:"updated"`
	Merged      []string       `json:"merged"`
	Deleted     []string       `json:"deleted"`
	Conflicts   []ConflictJSON `json:"conflicts"`
	Error       string         `json:"error,omitempty"`
	Unreachable bool           `json:"unreachable,omitempty"`
	Cancelled   bool           `json:"cancelled,omitempty"`
}

// ConflictJSON is one conflict in PullJSON.
type ConflictJSON struct {
	Path    string `json:"path"`
	Kind    string `json:"kind"`
	Markers bool   `json:"markers,omitempty"`
	Theirs  string `json:"theirs,omitempty"`
}

// JSON is the result as `rex pull --json` prints it.
func (r PullResult) JSON(e fanout.EachResult) PullJSON {
	j := PullJSON{Target: r.Target, Remote: r.RemotePath, Local: r.LocalDir, DryRun: r.DryRun,
		Created: nonNil(r.Created), Updated: nonNil(r.Updated), Merged: nonNil(r.Merged), Deleted: nonNil(r.Deleted),
		Conflicts: []ConflictJSON{}, Unreachable: e.Unreachable, Cancelled: e.Cancelled}
	for _, c := range r.Conflicts {
		cj := ConflictJSON{Path: c.Path, Kind: string(c.Kind), Markers: c.Markers}
		if !c.Markers && c.Theirs != nil {
			cj.Theirs = c.Path + ".theirs"
		}
		j.Conflicts = append(j.Conflicts, cj)
	}
	if e.Err != nil {
		j.Error = e.Err.Error()
	}
	return j
}

// PullTree fetches remoteDir from the target behind s and merges it into
// localDir.
func PullTree(ctx context.Context, st *cas.Store, s *rexclient.Session, target, remoteDir, localDir string) (PullResult, error) {
	return PullTreeWith(ctx, st, s, target, remoteDir, localDir, PullOptions{}, nil)
}

// PullTreeWith is PullTree with options, reporting its progress to report
// (nil: none).
func PullTreeWith(ctx context.Context, st *cas.Store, s *rexclient.Session, target, remoteDir, localDir string, opts PullOptions, report func(SyncProgress)) (PullResult, error) {
	if report == nil {
		report = func(SyncProgress) {}
	}
	res := PullResult{Target: target, LocalDir: localDir, DryRun: opts.DryRun}
	if !s.HasCAS() {
		return res, errNoCAS(target)
	}
	abs, err := filepath.Abs(localDir)
	if err != nil {
		return res, err
	}
	remote := s.CAS()
	report(SyncProgress{Phase: SyncReading})
	theirs, rpath, problems, err := remote.Ingest(ctx, remoteDir)
	if err != nil {
		return res, fetchError("read", remoteDir, err)
	}
	res.RemotePath = rpath
	if len(problems) > 0 {
		return res, fmt.Errorf("%d file(s) in %s cannot be synced (first: %s: %s); nothing was changed here",
			len(problems), rpath, problems[0].Path, problems[0].Error)
	}
	// A dry run keeps what comes from the target, and the merge it makes,
	// in memory (a scratch view of the store): it fetches the trees, then
	// only the text blobs its merge reads, so that it says exactly which
	// files would conflict; the store is left as it was. LOCAL is read
	// into the store itself, as any sync reads it: its stat cache trusts
	// what the store holds.
	local := st
	if opts.DryRun {
		st = st.Scratch()
	}
	report(SyncProgress{Phase: SyncAsking, Progress: cas.Progress{Walking: true}})
	var last cas.Progress
	_, err = cas.FetchWith(ctx, st, remote, theirs, cas.SyncOptions{MaxBytes: opts.MaxBytes, TreesOnly: opts.DryRun, Progress: func(p cas.Progress) {
		last = p
		phase := SyncMoving
		if p.Walking && p.Blobs+p.Trees == 0 {
			phase = SyncAsking
		}
		report(SyncProgress{Phase: phase, Progress: p})
	}})
	if se := (*cas.SpaceError)(nil); errors.As(err, &se) {
		if se.Limit {
			se.Path = localDir
		}
		return res, fmt.Errorf("pull %s: %w", rpath, se)
	}
	if err != nil {
		return res, fetchError("fetch", rpath, err)
	}
	report(SyncProgress{Phase: SyncMerging, Progress: last})
	key := refKey(target, rpath, abs)
	base := cas.EmptyTree()
	ref, err := st.ReadRef(key)
	if err != nil {
		return res, fmt.Errorf("read the last sync of %s:%s: %w", target, rpath, err)
	}
	if !ref.Snapshot.IsZero() {
		snap, err := st.ReadSnapshot(ref.Snapshot)
		if err != nil {
			return res, fmt.Errorf("read the last sync of %s:%s: %w", target, rpath, err)
		}
		base = snap.Root
	}

	ours := cas.EmptyTree()
	switch fi, err := os.Lstat(abs); {
	case err == nil && fi.IsDir():
		// A dry run leaves even a killed pull's temporary files here.
		if ours, err = ingestLocal(ctx, local, abs, cas.IngestOptions{KeepLeftovers: opts.DryRun}, nothingWritten); err != nil {
			return res, err
		}
	case err == nil:
		return res, fmt.Errorf("%s exists and is not a directory; pull into a directory", localDir)
	case !errors.Is(err, fs.ErrNotExist):
		return res, err
	default:
		// LOCAL is gone (removed whole, or never here): a fresh copy, as
		// rsync would make, not a local deletion of everything the last
		// sync brought.
		base = cas.EmptyTree()
	}

	result := theirs
	var merge cas.MergeResult
	switch {
	case theirs == ours, theirs == base:
		result = ours
	case ours == base:
	default:
		if opts.DryRun {
			need, err := st.TheirsToMerge(ctx, base, ours, theirs)
			if err != nil {
				return res, err
			}
			if _, err := cas.FetchBlobs(ctx, st, remote, need); err != nil {
				return res, fetchError("fetch", rpath, err)
			}
		}
		merge, err = st.MergeTrees(ctx, base, ours, theirs, cas.MergeOptions{OursLabel: "local", TheirsLabel: target})
		if err != nil {
			return res, fmt.Errorf("merge: %w", err)
		}
		result = merge.Tree
	}
	// A conflict whose remote side cannot be saved stops the pull before
	// it writes anything (markers of other conflicts included).
	if !opts.DryRun {
		for _, c := range merge.Conflicts {
			side := c.Path + ".theirs"
			if _, err := os.Lstat(filepath.Join(abs, filepath.FromSlash(side))); err == nil && !c.Markers && c.Theirs != nil {
				return res, fmt.Errorf("save the remote side of %s: %s exists already, and nothing was changed here; move it away and pull again", c.Path, side)
			}
		}
	}
	// Written (or, dry, planned) first: a tree that does not fit is
	// refused before anything, its paths never listed.
	if result != ours || !dirExists(abs) {
		report(SyncProgress{Phase: SyncWriting, Progress: last})
		if err := applyLocal(ctx, st, abs, ours, result, opts); err != nil {
			return res, fmt.Errorf("write %s: %w", localDir, err)
		}
	}
	if err := res.describe(ctx, st, base, ours, result, merge); err != nil {
		return res, err
	}
	if opts.DryRun {
		for _, c := range merge.Conflicts {
			res.Conflicts = append(res.Conflicts, PullConflict{Conflict: c})
		}
		return res, nil
	}
	rec := conflictRecord{Dir: abs}
	var theirsErr error // the merge is written: its markers are remembered even so
	for _, c := range merge.Conflicts {
		pc := PullConflict{Conflict: c}
		if !c.Markers && c.Theirs != nil {
			side, err := writeTheirs(ctx, st, abs, c)
			if err != nil {
				theirsErr = cmp.Or(theirsErr, err)
				continue
			}
			pc.Note = " (theirs saved as " + side + ")"
			rec.Theirs = append(rec.Theirs, side)
		} else if c.Markers {
			pc.Note = " (conflict markers in the file)"
			rec.Markers = append(rec.Markers, c.Path)
		}
		res.Conflicts = append(res.Conflicts, pc)
	}
	// What earlier pulls left stays remembered until it is resolved (a
	// push checks and forgets what is).
	rec = rec.with(loadConflicts(st, abs))
	if err := saveConflicts(st, rec); err != nil {
		return res, fmt.Errorf("remember the conflicts of %s: %w", localDir, err)
	}
	if theirsErr != nil {
		return res, theirsErr
	}
	if err := recordSnapshot(ctx, st, key, theirs, "pull"); err != nil {
		return res, err
	}
	return res, nil
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// describe fills the lists of what the pull writes locally: each path that
// differs between ours and the result, by what happened to it.
func (r *PullResult) describe(ctx context.Context, st *cas.Store, base, ours, result cas.Digest, merge cas.MergeResult) error {
	if ours == result {
		return nil
	}
	flat := func(d cas.Digest) (map[string]cas.Entry, error) { return st.Flatten(ctx, d) }
	b, err := flat(base)
	if err != nil {
		return err
	}
	o, err := flat(ours)
	if err != nil {
		return err
	}
	n, err := flat(result)
	if err != nil {
		return err
	}
	conflicted := map[string]bool{}
	for _, c := range merge.Conflicts {
		conflicted[c.Path] = true
	}
	for p, e := range n {
		old, had := o[p]
		switch {
		case conflicted[p]:
		case !had:
			if e.Type != cas.EntryDir {
				r.Created = append(r.Created, p)
			}
		case old.Same(e) || e.Type == cas.EntryDir && old.Type == cas.EntryDir:
		case !sameEntry(b, o, p):
			r.Merged = append(r.Merged, p) // changed here too: both sides are in it
		default:
			r.Updated = append(r.Updated, p)
		}
	}
	for p, e := range o {
		if _, ok := n[p]; !ok && e.Type != cas.EntryDir {
			r.Deleted = append(r.Deleted, p)
		}
	}
	for _, l := range [][]string{r.Created, r.Updated, r.Merged, r.Deleted} {
		slices.Sort(l)
	}
	return nil
}

func sameEntry(a, b map[string]cas.Entry, p string) bool {
	x, okx := a[p]
	y, oky := b[p]
	return okx == oky && (!okx || x.Same(y))
}

// applyLocal writes the result of a pull into dir in place: every file of
// the result is added or replaced (each atomically), and what the merge
// deleted goes, each only while it is still what was read.
func applyLocal(ctx context.Context, st *cas.Store, dir string, ours, result cas.Digest, opts PullOptions) error {
	prune, err := st.Removed(ctx, ours, result)
	if err != nil {
		return err
	}
	parent, name := filepath.Dir(dir), filepath.Base(dir)
	if !opts.DryRun {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return err
		}
	} else if !dirExists(parent) {
		return nil // nothing there yet: everything would be created
	}
	root, err := os.OpenRoot(parent)
	if err != nil {
		return err
	}
	defer root.Close()
	// What the merge read here is what may be written over: a file saved
	// meanwhile is never overwritten.
	base, err := st.Flatten(ctx, ours)
	if err != nil {
		return err
	}
	_, err = st.Update(ctx, root, name, result, cas.UpdateOptions{Prune: prune, Base: base, DryRun: opts.DryRun, MaxBytes: opts.MaxBytes})
	return err
}

// writeTheirs saves the remote side of a conflict the merged tree could not
// hold next to it as PATH.theirs, inside the local directory only. A
// symlink is checked as a tree's would be: it may not lead out of the
// directory.
func writeTheirs(ctx context.Context, st *cas.Store, dir string, c cas.Conflict) (string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	side := c.Path + ".theirs"
	rel := filepath.FromSlash(side)
	if _, err := root.Lstat(rel); err == nil {
		return "", fmt.Errorf("save the remote side of %s: %s exists already; move it away and pull again", c.Path, side)
	}
	switch c.Theirs.Type {
	case cas.EntryDir:
		err = st.MaterializeIn(ctx, root, rel, c.Theirs.Digest)
	case cas.EntrySymlink:
		if err = cas.ValidateSymlinkAt(c.Theirs.Target, strings.Count(side, "/")); err == nil {
			err = root.Symlink(c.Theirs.Target, rel)
		}
	default:
		var data []byte
		if data, err = st.Read(c.Theirs.Digest); err == nil {
			err = writeRootFile(root, rel, data, goMode(c.Theirs.Perm()))
		}
	}
	if err != nil {
		return "", fmt.Errorf("save the remote side of %s: %w", c.Path, err)
	}
	return side, nil
}

// goMode is the inverse of unixPerm.
func goMode(p fs.FileMode) fs.FileMode {
	m := p.Perm()
	if p&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if p&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if p&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

func writeRootFile(root *os.Root, name string, data []byte, mode os.FileMode) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
