package commands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/rexclient"
)

// PushUsage and PullUsage are the synopses of `rex push` and `rex pull`.
const (
	PushUsage = "rex push LOCAL_DIR REMOTE_DIR TARGETS"
	PullUsage = "rex pull REMOTE_DIR LOCAL_DIR TARGET"
)

// PushSpec is a parsed `rex push`.
type PushSpec struct {
	LocalDir, RemoteDir, Targets string
	ConnectTimeout               time.Duration
}

// Bind declares the flags of `rex push`.
func (s *PushSpec) Bind(fs *pflag.FlagSet) {
	BindConnectTimeout(fs, &s.ConnectTimeout)
}

// Args reads the positionals of `rex push`.
func (s *PushSpec) Args(args []string) error {
	if len(args) != 3 {
		return Usagef("usage: %s", PushUsage)
	}
	s.LocalDir, s.RemoteDir, s.Targets = args[0], args[1], args[2]
	return nil
}

// ParsePush reads the words of `rex push` as the console gets them.
func ParsePush(args []string) (PushSpec, error) {
	var s PushSpec
	pos, err := ParseFlags("push", args, s.Bind)
	if err != nil {
		return s, err
	}
	return s, s.Args(pos)
}

// PullSpec is a parsed `rex pull`.
type PullSpec struct {
	RemoteDir, LocalDir, Target string
	ConnectTimeout              time.Duration
}

// Bind declares the flags of `rex pull`.
func (s *PullSpec) Bind(fs *pflag.FlagSet) {
	BindConnectTimeout(fs, &s.ConnectTimeout)
}

// Args reads the positionals of `rex pull`.
func (s *PullSpec) Args(args []string) error {
	if len(args) != 3 {
		return Usagef("usage: %s", PullUsage)
	}
	s.RemoteDir, s.LocalDir, s.Target = args[0], args[1], args[2]
	return nil
}

// ParsePull reads the words of `rex pull` as the console gets them.
func ParsePull(args []string) (PullSpec, error) {
	var s PullSpec
	pos, err := ParseFlags("pull", args, s.Bind)
	if err != nil {
		return s, err
	}
	return s, s.Args(pos)
}

// SyncPhase is where a push or a pull stands on one target.
type SyncPhase int

// The phases, in the order a sync goes through them. A push reads its
// tree here before it reaches the targets; a pull reads it on the target.
const (
	SyncReading    SyncPhase = iota // reading the tree
	SyncConnecting                  // reaching the target, or waiting for a turn
	SyncAsking                      // comparing trees: which objects does the other side lack?
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
}

func (o SyncOptions) report(target string) func(SyncProgress) {
	if o.Progress == nil {
		return nil
	}
	return func(p SyncProgress) { o.Progress(target, p) }
}

// PushStats is what one target's push cost.
type PushStats struct {
	cas.Stats
	Path string // where the tree landed on the target
	// WireOut and WireIn are the bytes the push put on the connection,
	// requests and answers included.
	WireOut, WireIn int64
}

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

// ingestLocal takes a local directory into the store and refuses to go on
// when any file could not be read, so nothing is ever dropped silently.
func ingestLocal(ctx context.Context, st *cas.Store, dir string) (cas.Digest, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return cas.Digest{}, fmt.Errorf("read %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return cas.Digest{}, fmt.Errorf("%s is not a directory", dir)
	}
	root, problems, err := st.Ingest(ctx, dir)
	if err != nil {
		return cas.Digest{}, fmt.Errorf("read %s: %w", dir, err)
	}
	if len(problems) > 0 {
		var list []string
		for i, p := range problems {
			if i == 5 {
				list = append(list, fmt.Sprintf("and %d more", len(problems)-5))
				break
			}
			list = append(list, p.Error())
		}
		return cas.Digest{}, fmt.Errorf("%d file(s) in %s cannot be synced (%s); fix or move them, nothing was sent",
			len(problems), dir, strings.Join(list, "; "))
	}
	return root, nil
}

// refKey names the last synced snapshot of a directory on a target.
func refKey(target, path string) cas.RefKey { return cas.RefKey{Target: target, Path: path} }

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

// Push is `rex push`: one local tree to a directory on many targets, only
// what each lacks crossing the wire.
func Push(ctx context.Context, app *App, o IO, spec PushSpec) error {
	if spec.ConnectTimeout > 0 {
		app.ConnectTimeout = spec.ConnectTimeout
	}
	targets, err := app.Resolve(spec.Targets)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	outcomes, err := PushTargets(ctx, app, spec.LocalDir, spec.RemoteDir, targets, SyncOptions{
		Pushed: func(po PushOutcome) {
			if po.Err != nil {
				return // reported with the others at the end
			}
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintln(o.Out, po.Line())
		},
	})
	if err != nil {
		return err
	}
	return reportEach(o, EachResults(outcomes))
}

// PushOutcome is how a push ended on one target.
type PushOutcome struct {
	Target      string
	Stats       PushStats
	Err         error
	Unreachable bool
	Duration    time.Duration
}

// Line is what `rex push` prints for a target the push reached:
// "h1: sent 3 file(s), 1 dir(s), 2.0 KiB → /srv/site (2 queries, 2.4 KiB out, 310 B in)".
func (po PushOutcome) Line() string {
	ps := po.Stats
	return fmt.Sprintf("%s: %s → %s (%d %s, %s out, %s in)", po.Target, describeStats(ps.Stats), ps.Path,
		ps.Queries, plural(ps.Queries, "query", "queries"), HumanBytes(ps.WireOut), HumanBytes(ps.WireIn))
}

// UpToDate reports whether the target already held the tree.
func (po PushOutcome) UpToDate() bool {
	return po.Err == nil && po.Stats.Blobs == 0 && po.Stats.Trees == 0
}

// EachResults turns push outcomes into the fan-out's per-target results.
func EachResults(outcomes []PushOutcome) []fanout.EachResult {
	out := make([]fanout.EachResult, len(outcomes))
	for i, po := range outcomes {
		out[i] = fanout.EachResult{Target: po.Target, Err: po.Err, Unreachable: po.Unreachable, Duration: po.Duration}
	}
	return out
}

// PushTargets is `rex push` after its arguments: it reads localDir into the
// object store once, then pushes it to remoteDir on every target in
// parallel through app's pool. The error is for what stops every target
// (an unreadable local tree); each target's own end is in its outcome, in
// the order of targets.
func PushTargets(ctx context.Context, app *App, localDir, remoteDir string, targets []fanout.Target, opts SyncOptions) ([]PushOutcome, error) {
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
	tree, err := ingestLocal(ctx, st, localDir)
	if err != nil {
		return nil, err
	}
	tell(SyncConnecting)
	outcomes := make([]PushOutcome, len(targets))
	index := make(map[string]int, len(targets))
	for i, t := range targets {
		index[t.Name] = i
	}
	results := fanout.Each(ctx, app.Pool, targets, fanout.Options{ConnectTimeout: app.ConnectTimeout},
		func(ctx context.Context, t fanout.Target, s *rexclient.Session) error {
			start := time.Now()
			ps, err := PushTreeWith(ctx, st, s, t.Name, tree, remoteDir, opts.report(t.Name))
			po := PushOutcome{Target: t.Name, Stats: ps, Err: err, Duration: time.Since(start)}
			outcomes[index[t.Name]] = po
			if opts.Pushed != nil {
				opts.Pushed(po)
			}
			return err
		})
	for i, r := range results {
		if r.Unreachable || r.Cancelled {
			// fn never ran: the outcome is the connection's.
			outcomes[i] = PushOutcome{Target: r.Target, Err: r.Err, Unreachable: r.Unreachable, Duration: r.Duration}
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

// PushTree sends tree to the target behind s and writes it at remoteDir,
// recording the snapshot a later pull merges against.
func PushTree(ctx context.Context, st *cas.Store, s *rexclient.Session, target string, tree cas.Digest, remoteDir string) (PushStats, error) {
	return PushTreeWith(ctx, st, s, target, tree, remoteDir, nil)
}

// PushTreeWith is PushTree reporting its progress to report (nil: none).
func PushTreeWith(ctx context.Context, st *cas.Store, s *rexclient.Session, target string, tree cas.Digest, remoteDir string, report func(SyncProgress)) (PushStats, error) {
	if report == nil {
		report = func(SyncProgress) {}
	}
	if !s.HasCAS() {
		return PushStats{}, errNoCAS(target)
	}
	remote := s.CAS()
	out0, in0 := s.Client().BytesOut(), s.Client().BytesIn()
	report(SyncProgress{Phase: SyncAsking, Progress: cas.Progress{Walking: true}})
	var last cas.Progress
	stats, err := cas.PushWith(ctx, st, remote, tree, cas.SyncOptions{Progress: func(p cas.Progress) {
		last = p
		phase := SyncMoving
		if p.Walking {
			phase = SyncAsking
		}
		report(SyncProgress{Phase: phase, Progress: p})
	}})
	if err != nil {
		return PushStats{}, fmt.Errorf("send: %w", err)
	}
	report(SyncProgress{Phase: SyncWriting, Progress: last})
	path, err := remote.Materialize(ctx, tree, remoteDir)
	if err != nil {
		return PushStats{}, fmt.Errorf("write %s: %w", remoteDir, err)
	}
	if err := recordSnapshot(ctx, st, refKey(target, path), tree, "push"); err != nil {
		return PushStats{}, err
	}
	return PushStats{Stats: stats, Path: path, WireOut: s.Client().BytesOut() - out0, WireIn: s.Client().BytesIn() - in0}, nil
}

func describeStats(s cas.Stats) string {
	if s.Blobs == 0 && s.Trees == 0 {
		return "up to date"
	}
	return fmt.Sprintf("sent %d file(s), %d dir(s), %s", s.Blobs, s.Trees, HumanBytes(s.Bytes))
}

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
// a target was unreachable, 1 when one failed.
func reportEach(o IO, results []fanout.EachResult) error {
	code := 0
	for _, r := range results {
		if r.Err == nil {
			continue
		}
		fmt.Fprintf(o.Err, "%s! %v\n", r.Target, r.Err)
		switch {
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

// Pull is `rex pull`: a directory on one target back into a local one,
// three-way merged with local changes against what was last synced.
func Pull(ctx context.Context, app *App, o IO, spec PullSpec) error {
	if spec.ConnectTimeout > 0 {
		app.ConnectTimeout = spec.ConnectTimeout
	}
	targets, err := app.Resolve(spec.Target)
	if err != nil {
		return err
	}
	if len(targets) != 1 {
		return Usagef("pull takes one target; %q names %d", spec.Target, len(targets))
	}
	res, r := PullFrom(ctx, app, targets[0], spec.RemoteDir, spec.LocalDir, SyncOptions{})
	if err := reportEach(o, []fanout.EachResult{r}); err != nil {
		return err
	}
	fmt.Fprintln(o.Out, res.Line())
	for _, l := range res.ConflictLines() {
		fmt.Fprintln(o.Out, l)
	}
	return res.ConflictError()
}

// PullFrom is `rex pull` after its arguments: remoteDir on t merged into
// localDir, through app's pool. The result says what the pull did; the
// EachResult how reaching the target went (Err set when the pull failed).
func PullFrom(ctx context.Context, app *App, t fanout.Target, remoteDir, localDir string, opts SyncOptions) (PullResult, fanout.EachResult) {
	var res PullResult
	st, err := app.openStore()
	if err != nil {
		return res, fanout.EachResult{Target: t.Name, Err: err}
	}
	if opts.Progress != nil {
		opts.Progress(t.Name, SyncProgress{Phase: SyncConnecting})
	}
	results := fanout.Each(ctx, app.Pool, []fanout.Target{t}, fanout.Options{ConnectTimeout: app.ConnectTimeout},
		func(ctx context.Context, t fanout.Target, s *rexclient.Session) error {
			var err error
			res, err = PullTreeWith(ctx, st, s, t.Name, remoteDir, localDir, opts.report(t.Name))
			return err
		})
	return res, results[0]
}

// PullResult says what a pull did.
type PullResult struct {
	Target     string
	RemotePath string
	LocalDir   string
	Outcome    string
	Conflicts  []PullConflict
}

// PullConflict is a path the merge could not settle; Note says where its
// remote side went (" (conflict markers in the file)").
type PullConflict struct {
	cas.Conflict
	Note string
}

// Line is what `rex pull` prints first: "h1:/srv/site → ./site: merged cleanly".
func (r PullResult) Line() string {
	return fmt.Sprintf("%s:%s → %s: %s", r.Target, r.RemotePath, r.LocalDir, r.Outcome)
}

// ConflictLines are what `rex pull` prints about the conflicts, one each.
func (r PullResult) ConflictLines() []string {
	var out []string
	for _, c := range r.Conflicts {
		out = append(out, fmt.Sprintf("conflict (%s): %s%s", c.Kind, c.Path, c.Note))
	}
	return out
}

// ConflictError is the error a pull with conflicts ends in (exit status
// 1), nil without conflicts.
func (r PullResult) ConflictError() error {
	if len(r.Conflicts) == 0 {
		return nil
	}
	return &ExitError{Code: 1, Err: fmt.Errorf("%d conflict(s) in %s: resolve them (markers or .theirs files), then push again", len(r.Conflicts), r.LocalDir)}
}

// PullTree fetches remoteDir from the target behind s and merges it into
// localDir.
func PullTree(ctx context.Context, st *cas.Store, s *rexclient.Session, target, remoteDir, localDir string) (PullResult, error) {
	return PullTreeWith(ctx, st, s, target, remoteDir, localDir, nil)
}

// PullTreeWith is PullTree reporting its progress to report (nil: none).
func PullTreeWith(ctx context.Context, st *cas.Store, s *rexclient.Session, target, remoteDir, localDir string, report func(SyncProgress)) (PullResult, error) {
	if report == nil {
		report = func(SyncProgress) {}
	}
	res := PullResult{Target: target, LocalDir: localDir}
	if !s.HasCAS() {
		return res, errNoCAS(target)
	}
	remote := s.CAS()
	report(SyncProgress{Phase: SyncReading})
	theirs, path, problems, err := remote.Ingest(ctx, remoteDir)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", remoteDir, err)
	}
	res.RemotePath = path
	if len(problems) > 0 {
		return res, fmt.Errorf("%d file(s) in %s cannot be synced (first: %s: %s); nothing was changed here",
			len(problems), path, problems[0].Path, problems[0].Error)
	}
	report(SyncProgress{Phase: SyncAsking, Progress: cas.Progress{Walking: true}})
	var last cas.Progress
	_, err = cas.FetchWith(ctx, st, remote, theirs, cas.SyncOptions{Progress: func(p cas.Progress) {
		last = p
		phase := SyncMoving
		if p.Walking && p.Blobs+p.Trees == 0 {
			phase = SyncAsking
		}
		report(SyncProgress{Phase: phase, Progress: p})
	}})
	if err != nil {
		return res, fmt.Errorf("fetch %s: %w", path, err)
	}
	report(SyncProgress{Phase: SyncMerging, Progress: last})
	key := refKey(target, path)
	base := cas.EmptyTree()
	ref, err := st.ReadRef(key)
	if err != nil {
		return res, fmt.Errorf("read the last sync of %s:%s: %w", target, path, err)
	}
	if !ref.Snapshot.IsZero() {
		snap, err := st.ReadSnapshot(ref.Snapshot)
		if err != nil {
			return res, fmt.Errorf("read the last sync of %s:%s: %w", target, path, err)
		}
		base = snap.Root
	}

	ours := cas.EmptyTree()
	if _, err := os.Lstat(localDir); err == nil {
		if ours, err = ingestLocal(ctx, st, localDir); err != nil {
			return res, err
		}
	} else if !os.IsNotExist(err) {
		return res, err
	}

	var result cas.Digest
	var merge cas.MergeResult
	switch {
	case theirs == ours:
		res.Outcome = "already the same"
	case theirs == base:
		res.Outcome = "no remote changes since the last sync; local changes kept"
	case ours == base:
		result, res.Outcome = theirs, "updated (no local changes)"
	default:
		merge, err = st.MergeTrees(ctx, base, ours, theirs, cas.MergeOptions{OursLabel: "local", TheirsLabel: target})
		if err != nil {
			return res, fmt.Errorf("merge: %w", err)
		}
		result = merge.Tree
		res.Outcome = "merged cleanly"
		if !merge.Clean() {
			res.Outcome = fmt.Sprintf("merged with %d conflict(s)", len(merge.Conflicts))
		}
	}
	if !result.IsZero() {
		report(SyncProgress{Phase: SyncWriting, Progress: last})
		abs, err := filepath.Abs(localDir)
		if err != nil {
			return res, err
		}
		if err := st.Materialize(ctx, result, abs); err != nil {
			return res, fmt.Errorf("write %s: %w", localDir, err)
		}
		for _, c := range merge.Conflicts {
			pc := PullConflict{Conflict: c}
			if !c.Markers && c.Theirs != nil {
				side, err := writeTheirs(ctx, st, abs, c)
				if err != nil {
					return res, err
				}
				pc.Note = " (theirs saved as " + side + ")"
			} else if c.Markers {
				pc.Note = " (conflict markers in the file)"
			}
			res.Conflicts = append(res.Conflicts, pc)
		}
	}
	if err := recordSnapshot(ctx, st, key, theirs, "pull"); err != nil {
		return res, err
	}
	return res, nil
}

// writeTheirs saves the remote side of a conflict the merged tree could not
// hold next to it as PATH.theirs, inside the local directory only.
func writeTheirs(ctx context.Context, st *cas.Store, dir string, c cas.Conflict) (string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	side := c.Path + ".theirs"
	rel := filepath.FromSlash(side)
	switch c.Theirs.Type {
	case cas.EntryDir:
		err = st.MaterializeIn(ctx, root, rel, c.Theirs.Digest)
	case cas.EntrySymlink:
		err = root.Symlink(c.Theirs.Target, rel)
	default:
		var data []byte
		if data, err = st.Read(c.Theirs.Digest); err == nil {
			mode := os.FileMode(0o644)
			if c.Theirs.Executable {
				mode = 0o755
			}
			err = writeRootFile(root, rel, data, mode)
		}
	}
	if err != nil {
		return "", fmt.Errorf("save the remote side of %s: %w", c.Path, err)
	}
	return side, nil
}

func writeRootFile(root *os.Root, name string, data []byte, mode os.FileMode) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
