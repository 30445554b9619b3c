package commands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/rexclient"
)

// PushUsage and PullUsage are the synopses of `rex push` and `rex pull`.
const (
	PushUsage = "rex push LOCAL_DIR REMOTE_DIR TARGETS"
	PullUsage = "rex pull REMOTE_DIR LOCAL_DIR TARGET"
)

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
func Push(ctx context.Context, app *App, o IO, args []string) error {
	if len(args) != 3 {
		return Usagef("usage: %s", PushUsage)
	}
	localDir, remoteDir, spec := args[0], args[1], args[2]
	st, err := app.openStore()
	if err != nil {
		return err
	}
	tree, err := ingestLocal(ctx, st, localDir)
	if err != nil {
		return err
	}
	targets, err := app.Resolve(spec)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	results := fanout.Each(ctx, app.Pool, targets, fanout.Options{ConnectTimeout: app.ConnectTimeout},
		func(ctx context.Context, t fanout.Target, s *rexclient.Session) error {
			ps, err := PushTree(ctx, st, s, t.Name, tree, remoteDir)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "%s: %s → %s (%d %s, %s out, %s in)\n", t.Name, describeStats(ps.Stats), ps.Path,
				ps.Queries, plural(ps.Queries, "query", "queries"), humanBytes(ps.WireOut), humanBytes(ps.WireIn))
			return nil
		})
	return reportEach(o, results)
}

func errNoCAS(target string) error {
	return fmt.Errorf("the rexd on %s is too old to sync files (no cas capability); run `rex device clean %s` so the next connection installs the current one", target, target)
}

// PushTree sends tree to the target behind s and writes it at remoteDir,
// recording the snapshot a later pull merges against.
func PushTree(ctx context.Context, st *cas.Store, s *rexclient.Session, target string, tree cas.Digest, remoteDir string) (PushStats, error) {
	if !s.HasCAS() {
		return PushStats{}, errNoCAS(target)
	}
	remote := s.CAS()
	out0, in0 := s.Client().BytesOut(), s.Client().BytesIn()
	stats, err := cas.Push(ctx, st, remote, tree)
	if err != nil {
		return PushStats{}, fmt.Errorf("send: %w", err)
	}
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
	return fmt.Sprintf("sent %d file(s), %d dir(s), %s", s.Blobs, s.Trees, humanBytes(s.Bytes))
}

func humanBytes(n int64) string {
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
func Pull(ctx context.Context, app *App, o IO, args []string) error {
	if len(args) != 3 {
		return Usagef("usage: %s", PullUsage)
	}
	remoteDir, localDir, spec := args[0], args[1], args[2]
	st, err := app.openStore()
	if err != nil {
		return err
	}
	targets, err := app.Resolve(spec)
	if err != nil {
		return err
	}
	if len(targets) != 1 {
		return Usagef("pull takes one target; %q names %d", spec, len(targets))
	}
	var res PullResult
	results := fanout.Each(ctx, app.Pool, targets, fanout.Options{ConnectTimeout: app.ConnectTimeout},
		func(ctx context.Context, t fanout.Target, s *rexclient.Session) error {
			var err error
			res, err = PullTree(ctx, st, s, t.Name, remoteDir, localDir)
			return err
		})
	if err := reportEach(o, results); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "%s:%s → %s: %s\n", targets[0].Name, res.RemotePath, localDir, res.Outcome)
	if len(res.Conflicts) > 0 {
		for _, c := range res.Conflicts {
			fmt.Fprintf(o.Out, "conflict (%s): %s%s\n", c.Kind, c.Path, c.note)
		}
		return &ExitError{Code: 1, Err: fmt.Errorf("%d conflict(s) in %s: resolve them (markers or .theirs files), then push again", len(res.Conflicts), localDir)}
	}
	return nil
}

// PullResult says what a pull did.
type PullResult struct {
	RemotePath string
	Outcome    string
	Conflicts  []pullConflict
}

type pullConflict struct {
	cas.Conflict
	note string
}

// PullTree fetches remoteDir from the target behind s and merges it into
// localDir.
func PullTree(ctx context.Context, st *cas.Store, s *rexclient.Session, target, remoteDir, localDir string) (PullResult, error) {
	var res PullResult
	if !s.HasCAS() {
		return res, errNoCAS(target)
	}
	remote := s.CAS()
	theirs, path, problems, err := remote.Ingest(ctx, remoteDir)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", remoteDir, err)
	}
	res.RemotePath = path
	if len(problems) > 0 {
		return res, fmt.Errorf("%d file(s) in %s cannot be synced (first: %s: %s); nothing was changed here",
			len(problems), path, problems[0].Path, problems[0].Error)
	}
	if _, err := cas.Fetch(ctx, st, remote, theirs); err != nil {
		return res, fmt.Errorf("fetch %s: %w", path, err)
	}
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
		abs, err := filepath.Abs(localDir)
		if err != nil {
			return res, err
		}
		if err := st.Materialize(ctx, result, abs); err != nil {
			return res, fmt.Errorf("write %s: %w", localDir, err)
		}
		for _, c := range merge.Conflicts {
			pc := pullConflict{Conflict: c}
			if !c.Markers && c.Theirs != nil {
				side, err := writeTheirs(ctx, st, abs, c)
				if err != nil {
					return res, err
				}
				pc.note = " (theirs saved as " + side + ")"
			} else if c.Markers {
				pc.note = " (conflict markers in the file)"
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
