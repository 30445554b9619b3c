package cas

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// UpdateOptions say how Update writes a tree into a directory.
//
// By default the update is in place and adds and replaces only: every file
// the tree names is written to a temporary file in its own directory and
// renamed over the old one (each file is replaced atomically), new
// directories are made, and nothing the tree does not name is removed. The
// destination directory itself keeps its inode, owner and mode, so a
// directory a service holds open, or ~/.ssh, stays what it was.
type UpdateOptions struct {
	// Atomic builds the whole tree in a staging directory beside the
	// destination and swaps the two at once (renameat2 RENAME_EXCHANGE on
	// Linux; elsewhere two renames, with a moment when the destination is
	// missing). The directory is replaced: whatever it held that the tree
	// lacks is gone. The destination cannot be a root itself.
	Atomic bool
	// Delete (in place) also removes what the tree does not name.
	Delete bool
	// DeleteUnder narrows Delete to the paths under these names of the
	// destination's first level (a push of several sources: inside each,
	// as rsync does); empty, Delete covers the whole destination.
	DeleteUnder []string
	// Prune (in place) removes exactly these paths, each only while it
	// still is what the map says (a pull applies the deletions of its
	// merge so, never a file changed meanwhile).
	Prune map[string]Entry
	// Base, when set (a pull), is what the destination held when the
	// caller read it, by path: a path the update would write over whose
	// current entry is not that (changed meanwhile, or added) stops the
	// update before anything is written, with a *ChangedError.
	Base map[string]Entry
	// DryRun plans and reports, and changes nothing.
	DryRun bool
	// Owner, when set, is given to every file and directory the update
	// writes and to those it keeps whose owner differs.
	Owner *Owner
	// MaxBytes bounds the file bytes the update may write. 0 means the
	// space the file system has free, less 5%.
	MaxBytes int64
	// List fills UpdateResult's lists of added and updated paths (the
	// deleted ones are always listed).
	List bool
	// Keep, when set, names files the update must leave alone (rexd's
	// audit log): an update that would write over one, change its mode or
	// owner, remove it or swap away the directory holding it is refused
	// with a *KeptError before anything is written.
	Keep func(fs.FileInfo) bool

	// beforeSwap and afterSwap, set by tests, run just before and just
	// after the swap of an atomic update.
	beforeSwap, afterSwap func()
}

// Owner is a numeric owner to give files; -1 leaves that part alone.
type Owner struct{ UID, GID int }

// UpdateResult says what an Update did (or, for a dry run, would do).
type UpdateResult struct {
	Path    string // the destination, as the store names it
	Created bool   // the destination did not exist
	// Added, Updated and Deleted count paths (files, links, directories).
	Added, Updated, Deleted int
	// The paths, slash-separated and relative to the destination:
	// AddedPaths and UpdatedPaths only with UpdateOptions.List.
	AddedPaths, UpdatedPaths, DeletedPaths []string
	Bytes                                  int64  // file bytes written (or to write)
	Warning                                string // something that went wrong after the tree was in place
}

// Unchanged reports whether the destination already held the tree.
func (r UpdateResult) Unchanged() bool {
	return !r.Created && r.Added == 0 && r.Updated == 0 && r.Deleted == 0
}

// SpaceError refuses an update that would write more than the destination
// has room for (or than the caller allows). Nothing was written.
type SpaceError struct {
	Path   string // the destination
	Needed int64  // bytes the update would write
	Free   int64  // bytes free (less the 5% margin), or the caller's limit
	Limit  bool   // Free is the caller's MaxBytes, not the disk's
}

func (e *SpaceError) Error() string {
	if e.Limit {
		return fmt.Sprintf("%s: writing it would take %s, more than the limit of %s; raise --max-bytes if that is meant", e.Path, humanSize(e.Needed), humanSize(e.Free))
	}
	return fmt.Sprintf("no space left in %s: %s needed, %s free; free some space or choose another place", e.Path, humanSize(e.Needed), humanSize(e.Free))
}

// Is lets errors.Is(err, syscall.ENOSPC) match an update refused for room.
func (e *SpaceError) Is(target error) bool { return target == syscall.ENOSPC && !e.Limit }

// humanSize writes a byte count in decimal units, as df does.
func humanSize(n int64) string {
	switch {
	case n >= 1e12:
		return fmt.Sprintf("%.1f TB", float64(n)/1e12)
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Errors of an Update's Receive that are the sender's mistakes.
var (
	ErrUpdateFinished = errors.New("the update is finished")
	ErrReceived       = errors.New("already received")
)

// DestinationError refuses a destination that is not a directory (a file,
// a symlink): the caller's choice of path. Nothing was written.
type DestinationError struct {
	Path string
	Why  string
}

func (e *DestinationError) Error() string { return "update " + e.Path + ": " + e.Why }

// TypeConflictError refuses an in-place update that would have to remove a
// directory the tree names as something else; Delete allows it.
type TypeConflictError struct {
	Paths []string
}

func (e *TypeConflictError) Error() string {
	list := e.Paths
	more := ""
	if len(list) > 5 {
		list, more = list[:5], fmt.Sprintf(" and %d more", len(e.Paths)-5)
	}
	return fmt.Sprintf("%s%s %s a directory on the destination but not in the source; pass --delete to replace %s, or --atomic",
		strings.Join(list, ", "), more, plural(len(e.Paths), "is", "are"), plural(len(e.Paths), "it", "them"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// curEntry is what the destination holds at a path. A zero Type is
// something a tree cannot hold (a special file, a name that is not UTF-8,
// an unreadable file).
type curEntry struct {
	e    Entry
	info fs.FileInfo
}

// fileWrite is a file whose content the update writes.
type fileWrite struct {
	rel        string // relative to the destination
	e          Entry
	from       string // a path of the current destination holding the content
	tmp        string // relative to the root: where the content was written
	replaceDir bool   // a directory stands where the file goes
	added      bool
}

// Update is a tree being written into a directory: planned (PrepareUpdate),
// given the blobs no source on this side has (Receive), then committed or
// aborted. It is safe for concurrent use.
type Update struct {
	s    *Store
	root *os.Root
	name string // the destination, relative to root ("." for root itself)
	opts UpdateOptions
	p    *plan
	res  UpdateResult

	exists bool   // the destination existed and is updated in place
	stage  string // relative to root: the tree being built beside (Atomic or new)
	cache  *statCache
	cur    map[string]curEntry

	writes   []*fileWrite
	byHash   map[string][]*fileWrite // writes by content hash
	links    []*fileWrite            // files hard-linked from the destination (staging)
	needed   []Digest                // blobs no source here has, in plan order
	needSet  map[Digest]bool         // needed, as a set
	newDirs  []plannedEntry          // in place: directories to make (parents first)
	setDirs  []plannedEntry          // existing directories whose mode or owner change
	setMeta  []plannedEntry          // files kept whose mode or owner change
	symlink  []plannedEntry          // links to (re)make
	dirWay   map[string]bool         // in place: a file or link to remove before a directory
	replaced map[string]bool         // directories a file or link replaces
	deletes  []string                // relative paths to remove, deepest first

	mu       sync.Mutex
	dirRoots map[string]*os.Root // directories written into, opened once
	received map[string]string   // content hash → temp holding it (relative to root)
	temps    map[string]bool     // every temp made and not yet renamed into place, for Abort
	finished bool
	creating sync.WaitGroup // creates under way: Abort waits for them before it removes temps
}

// Update writes tree into the directory name inside root, with every blob
// taken from this side (the store, the destination itself, or the other
// directories this store knows): PrepareUpdate, then Commit.
func (s *Store) Update(ctx context.Context, root *os.Root, name string, tree Digest, opts UpdateOptions) (UpdateResult, error) {
	u, err := s.PrepareUpdate(ctx, root, name, tree, opts)
	if err != nil {
		return UpdateResult{}, err
	}
	if opts.DryRun {
		return u.Result(), nil
	}
	if len(u.needed) > 0 {
		u.Abort()
		return UpdateResult{}, &MissingError{Digests: u.needed}
	}
	return u.Commit(ctx)
}

// PrepareUpdate plans writing tree into the directory name inside root:
// it checks the tree (see plan), reads what the destination holds through
// the stat cache, works out what to add, replace and delete, finds a
// source on this side for every blob it can (the destination's own files,
// the store, the other directories the store knows), and refuses an update
// that would write more bytes than allowed. Nothing is written before that.
// Blobs still missing are listed by Needed; send them through Receive. A
// dry run's plan is only to be read.
func (s *Store) PrepareUpdate(ctx context.Context, root *os.Root, name string, tree Digest, opts UpdateOptions) (*Update, error) {
	clean := filepath.Clean(name)
	if !filepath.IsLocal(clean) {
		return nil, fmt.Errorf("update %q: the destination must be a directory below the root; name one", name)
	}
	if clean == "." && opts.Atomic {
		return nil, fmt.Errorf("update %s: an atomic update replaces the directory, which cannot be an allowed root itself; name a directory inside it", root.Name())
	}
	if err := tree.Validate(); err != nil {
		return nil, fmt.Errorf("update %s: %w", clean, err)
	}
	u := &Update{s: s, root: root, name: clean, opts: opts, byHash: map[string][]*fileWrite{},
		received: map[string]string{}, cur: map[string]curEntry{}, dirWay: map[string]bool{}}
	u.res.Path = filepath.Join(root.Name(), clean)

	switch fi, err := root.Lstat(clean); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("update %s: %w", u.res.Path, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, &DestinationError{Path: u.res.Path, Why: "the destination is a symlink; name the directory it points to"}
	case !fi.IsDir():
		return nil, &DestinationError{Path: u.res.Path, Why: "the destination exists and is not a directory; remove it or choose another"}
	default:
		u.exists = true
	}
	u.res.Created = !u.exists

	limit, free, err := u.byteLimit()
	if err != nil {
		return nil, err
	}
	// A tree larger than the room for it is refused before its paths are
	// even listed, when nothing of it can already be there.
	early := int64(-1)
	if !u.exists {
		early = limit
	}
	p, err := s.plan(ctx, tree, early)
	if err != nil {
		var se *SpaceError
		if errors.As(err, &se) {
			se.Path, se.Free, se.Limit = u.res.Path, free, opts.MaxBytes > 0
		}
		return nil, err
	}
	u.p = p

	if u.exists {
		u.cache = s.openStatCache(u.res.Path)
		if err := u.scan(ctx); err != nil {
			return nil, err
		}
	}
	if err := u.diff(); err != nil {
		return nil, err
	}
	if u.res.Bytes > limit {
		return nil, &SpaceError{Path: u.res.Path, Needed: u.res.Bytes, Free: free, Limit: opts.MaxBytes > 0}
	}
	u.findSources(ctx)
	if opts.DryRun {
		return u, nil
	}
	u.sweepBeside()
	if !u.exists || opts.Atomic {
		if err := u.buildStage(ctx); err != nil {
			u.Abort()
			return nil, err
		}
	}
	return u, nil
}

// byteLimit is how many bytes the update may write, and the room it
// reports in errors.
func (u *Update) byteLimit() (limit, free int64, err error) {
	if u.opts.MaxBytes > 0 {
		return u.opts.MaxBytes, u.opts.MaxBytes, nil
	}
	dir := u.name
	if !u.exists {
		dir = filepath.Dir(u.name)
	}
	// The nearest directory that exists holds the file system written to.
	for {
		f, err := u.root.Open(dir + "/") // a directory only: a FIFO swapped in would block
		if err == nil {
			n, serr := freeSpace(f)
			f.Close()
			if serr != nil {
				return 0, 0, fmt.Errorf("update %s: find the free space: %w", u.res.Path, serr)
			}
			n -= n / 20
			return n, n, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || dir == "." {
			return 0, 0, fmt.Errorf("update %s: %w", u.res.Path, err)
		}
		dir = filepath.Dir(dir)
	}
}

// scan reads what the destination holds, hashing only the files the stat
// cache does not vouch for, and sweeping rex's leftovers of killed
// processes on the way.
func (u *Update) scan(ctx context.Context) error {
	r, err := u.root.OpenRoot(u.name + "/") // a directory only, as in byteLimit
	if err != nil {
		return fmt.Errorf("update %s: %w", u.res.Path, err)
	}
	defer r.Close()
	var problems []IngestProblem
	w, err := u.s.walkDir(ctx, r, u.cache, BlobsNone, !u.opts.DryRun, &problems)
	if err != nil {
		return fmt.Errorf("update %s: read what it holds: %w", u.res.Path, err)
	}
	if len(u.cur) == 0 {
		u.cur = make(map[string]curEntry, len(w.jobs)+len(w.jobs)/8)
	}
	var add func(n *ingestNode)
	add = func(n *ingestNode) {
		for _, e := range n.entries {
			u.cur[path.Join(n.rel, e.Name)] = curEntry{e: e}
		}
		for _, i := range n.files {
			j := w.jobs[i]
			c := curEntry{info: j.info, e: Entry{Name: j.name}}
			if j.err == nil {
				c.e = Entry{Name: j.name, Type: EntryFile, Digest: j.d}.WithPerm(j.perm)
			}
			u.cur[j.rel] = c
		}
		for _, o := range n.others {
			u.cur[path.Join(n.rel, o.name)] = curEntry{e: Entry{Name: o.name}, info: o.info}
		}
		for _, sub := range n.subdirs {
			u.cur[sub.rel] = curEntry{e: Entry{Name: path.Base(sub.rel), Type: EntryDir}.WithPerm(unixPerm(sub.info.Mode())), info: sub.info}
			add(sub)
		}
	}
	add(w.top)
	// What the scan hashed is a source of blobs for later updates too.
	u.s.locator().note(u.res.Path, w.jobs)
	return nil
}

// ownerDiffers reports whether the update must change the owner of what
// info describes.
func (u *Update) ownerDiffers(info fs.FileInfo) bool {
	o := u.opts.Owner
	if o == nil || info == nil {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return o.UID >= 0 && int(st.Uid) != o.UID || o.GID >= 0 && int(st.Gid) != o.GID
}

// diff compares the plan with what the destination holds.
func (u *Update) diff() error {
	res := &u.res
	wanted := make(map[string]bool, len(u.p.dirs)+len(u.p.files)+len(u.p.links))
	var conflicts []string
	replacingDir := func(rel string) bool {
		if u.opts.Atomic || u.deleteCovers(rel) || !u.exists || u.prunesAll(rel) {
			return true
		}
		conflicts = append(conflicts, rel)
		return false
	}
	note := func(rel string, added bool) {
		if added {
			res.Added++
			if u.opts.List {
				res.AddedPaths = append(res.AddedPaths, rel)
			}
		} else {
			res.Updated++
			if u.opts.List {
				res.UpdatedPaths = append(res.UpdatedPaths, rel)
			}
		}
	}
	for _, pe := range u.p.dirs {
		wanted[pe.rel] = true
		c, ok := u.cur[pe.rel]
		switch {
		case !ok:
			note(pe.rel, true)
			u.newDirs = append(u.newDirs, pe)
		case c.e.Type == EntryDir:
			if c.e.Perm() != pe.e.Perm() || u.ownerDiffers(c.info) {
				note(pe.rel, false)
				u.setDirs = append(u.setDirs, pe)
			}
		default: // a file, link or special file where a directory goes
			note(pe.rel, false)
			u.newDirs = append(u.newDirs, pe)
			u.dirWay[pe.rel] = true
		}
	}
	for _, pe := range u.p.files {
		wanted[pe.rel] = true
		c, ok := u.cur[pe.rel]
		w := &fileWrite{rel: pe.rel, e: pe.e, added: !ok}
		switch {
		case !ok:
		case c.e.Type == EntryFile && c.e.Digest == pe.e.Digest:
			metaDiffers := c.e.Perm() != pe.e.Perm() || u.ownerDiffers(c.info)
			if u.opts.Atomic || !u.exists {
				if metaDiffers {
					note(pe.rel, false) // copied with its new mode: an update all the same
				}
				w.from = pe.rel // linked or copied into the staging directory
				u.links = append(u.links, w)
				continue
			}
			if metaDiffers {
				note(pe.rel, false)
				if c.info == nil || soleLink(c.info) {
					u.setMeta = append(u.setMeta, pe)
					continue
				}
				// chmod or chown would reach the inode's other names,
				// which may lie outside the roots: a copy of its own, with
				// the new mode, is renamed over this name instead.
				w.from = pe.rel
				u.writes = append(u.writes, w)
				u.byHash[pe.e.Digest.Hash] = append(u.byHash[pe.e.Digest.Hash], w)
				res.Bytes += pe.e.Digest.Size
			}
			continue
		case c.e.Type == EntryDir:
			if !replacingDir(pe.rel) {
				continue
			}
			w.replaceDir = true
		}
		note(pe.rel, w.added)
		u.writes = append(u.writes, w)
		u.byHash[pe.e.Digest.Hash] = append(u.byHash[pe.e.Digest.Hash], w)
		res.Bytes += pe.e.Digest.Size
	}
	for _, pe := range u.p.links {
		wanted[pe.rel] = true
		c, ok := u.cur[pe.rel]
		switch {
		case !ok:
			note(pe.rel, true)
		case c.e.Type == EntrySymlink && c.e.Target == pe.e.Target:
			if u.opts.Atomic || !u.exists {
				u.symlink = append(u.symlink, pe) // made anew in the staging directory
			}
			continue
		case c.e.Type == EntryDir:
			if !replacingDir(pe.rel) {
				continue
			}
			u.dirWay[pe.rel] = true
			note(pe.rel, false)
		default:
			note(pe.rel, false)
		}
		u.symlink = append(u.symlink, pe)
	}
	if len(conflicts) > 0 {
		slices.Sort(conflicts)
		return &TypeConflictError{Paths: conflicts}
	}
	if err := u.checkBase(); err != nil {
		return err
	}

	// What the destination holds and the tree lacks, deepest first, so a
	// directory comes after what it holds.
	var extra []string
	children := map[string][]string{}
	for rel := range u.cur {
		if !wanted[rel] {
			extra = append(extra, rel)
		}
		children[path.Dir(rel)] = append(children[path.Dir(rel)], rel)
	}
	slices.SortFunc(extra, func(a, b string) int {
		if c := cmp.Compare(strings.Count(b, "/"), strings.Count(a, "/")); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	// Directories a file or link of the tree replaces go with all they hold.
	replaced := map[string]bool{}
	for _, w := range u.writes {
		if w.replaceDir {
			replaced[w.rel] = true
		}
	}
	for _, pe := range u.symlink {
		if u.dirWay[pe.rel] {
			replaced[pe.rel] = true
		}
	}
	u.replaced = replaced
	deleting := map[string]bool{}
	for _, rel := range extra {
		c := u.cur[rel]
		remove := u.opts.Atomic || u.deleteCovers(rel) || u.underReplaced(rel)
		if e, ok := u.opts.Prune[rel]; ok && !remove {
			if c.e.Type == EntryDir && e.Type == EntryDir {
				// An emptied directory goes when all it holds goes.
				remove = true
				for _, ch := range children[rel] {
					remove = remove && deleting[ch]
				}
			} else {
				remove = c.e.Type != "" && c.e.Type != EntryDir && c.e.Same(e)
			}
		}
		if remove {
			deleting[rel] = true
			u.deletes = append(u.deletes, rel)
		}
	}
	res.Deleted = len(u.deletes)
	res.DeletedPaths = slices.Sorted(slices.Values(u.deletes))
	return u.checkKeep()
}

// KeptError refuses an update that would change or remove a file
// UpdateOptions.Keep names. Nothing was written.
type KeptError struct {
	Path string // slash-separated, relative to the destination
}

func (e *KeptError) Error() string {
	return fmt.Sprintf("the update would change or remove %s, which must be left alone", e.Path)
}

// checkKeep refuses the update when it would touch a file opts.Keep names:
// write over it, change its mode or owner, replace it by a link or a
// directory, delete it, or (atomic) link it into the staging directory,
// where a new mode would reach the same inode.
func (u *Update) checkKeep() error {
	keep := u.opts.Keep
	if keep == nil {
		return nil
	}
	touched := func(rel string) error {
		if c, ok := u.cur[rel]; ok && c.info != nil && keep(c.info) {
			return &KeptError{Path: rel}
		}
		return nil
	}
	var rels []string
	for _, l := range [][]*fileWrite{u.writes, u.links} {
		for _, w := range l {
			rels = append(rels, w.rel)
		}
	}
	for _, l := range [][]plannedEntry{u.setMeta, u.symlink, u.newDirs} {
		for _, pe := range l {
			rels = append(rels, pe.rel)
		}
	}
	for _, rel := range append(rels, u.deletes...) {
		if err := touched(rel); err != nil {
			return err
		}
	}
	return nil
}

// ChangedError refuses an update over paths that changed since the
// caller read them (see UpdateOptions.Base). Nothing was written.
type ChangedError struct {
	Paths []string
}

func (e *ChangedError) Error() string {
	list := e.Paths
	more := ""
	if len(list) > 5 {
		list, more = list[:5], fmt.Sprintf(" and %d more", len(e.Paths)-5)
	}
	return fmt.Sprintf("%s%s changed while this ran, so nothing was written; run it again", strings.Join(list, ", "), more)
}

// checkBase refuses the update when a path it writes over is not what
// Base says the destination held.
func (u *Update) checkBase() error {
	if u.opts.Base == nil || !u.exists {
		return nil
	}
	var changed []string
	check := func(rel string) {
		c, had := u.cur[rel]
		b, want := u.opts.Base[rel]
		switch {
		case !had || !want:
			if had != want {
				changed = append(changed, rel)
			}
		case b.Type == EntryDir:
			if c.e.Type != EntryDir || c.e.Perm() != b.Perm() {
				changed = append(changed, rel)
			}
		case c.e.Type == "" || !c.e.Same(b):
			changed = append(changed, rel)
		}
	}
	for _, w := range u.writes {
		check(w.rel)
	}
	for _, pe := range slices.Concat(u.symlink, u.setMeta, u.setDirs, u.newDirs) {
		check(pe.rel)
	}
	if len(changed) == 0 {
		return nil
	}
	slices.Sort(changed)
	return &ChangedError{Paths: slices.Compact(changed)}
}

// prunesAll reports whether Prune removes the directory rel with all it
// holds, each still what Prune says: a pull applying a remote change of a
// directory into a file may then replace it.
func (u *Update) prunesAll(rel string) bool {
	if e, ok := u.opts.Prune[rel]; !ok || e.Type != EntryDir {
		return false
	}
	for p, c := range u.cur {
		if !strings.HasPrefix(p, rel+"/") {
			continue
		}
		e, ok := u.opts.Prune[p]
		switch {
		case !ok || c.e.Type != e.Type:
			return false
		case c.e.Type != EntryDir && !c.e.Same(e):
			return false
		}
	}
	return true
}

// deleteCovers reports whether Delete covers rel.
func (u *Update) deleteCovers(rel string) bool {
	if !u.opts.Delete {
		return false
	}
	if len(u.opts.DeleteUnder) == 0 {
		return true
	}
	top, _, _ := strings.Cut(rel, "/")
	return slices.Contains(u.opts.DeleteUnder, top)
}

// underReplaced reports whether rel lies in a directory a file or link of
// the tree replaces.
func (u *Update) underReplaced(rel string) bool {
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if u.replaced[d] {
			return true
		}
	}
	return false
}

// findSources gives every write a source on this side where there is one:
// a file of the destination with the same content, or the store (its own
// objects and the files it knows). The rest is Needed.
func (u *Update) findSources(ctx context.Context) {
	if len(u.writes) == 0 {
		u.needSet = map[Digest]bool{}
		return // nothing to write: no need to index what the destination holds
	}
	have := map[string]string{} // content hash → a current file holding it
	for rel, c := range u.cur {
		if c.e.Type == EntryFile {
			if _, ok := have[c.e.Digest.Hash]; !ok {
				have[c.e.Digest.Hash] = rel
			}
		}
	}
	seen := map[string]bool{}
	for _, w := range u.writes {
		h := w.e.Digest.Hash
		if seen[h] {
			continue
		}
		seen[h] = true
		if rel, ok := have[h]; ok {
			for _, o := range u.byHash[h] {
				o.from = rel
			}
			continue
		}
		if ok, _ := u.s.present(w.e.Digest); ok {
			continue
		}
		if f, _ := u.s.openLocated(w.e.Digest, true); f != nil {
			f.Close()
			continue
		}
		u.needed = append(u.needed, w.e.Digest)
	}
	u.needSet = make(map[Digest]bool, len(u.needed))
	for _, d := range u.needed {
		u.needSet[d] = true
	}
}

// Result is what the update does (or, for a dry run, would do).
func (u *Update) Result() UpdateResult { return u.res }

// Needed lists the blobs no source on this side has: send each once
// through Receive before Commit.
func (u *Update) Needed() []Digest { return slices.Clone(u.needed) }

// Missing lists the needed blobs not received yet.
func (u *Update) Missing() []Digest {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []Digest
	for _, d := range u.needed {
		if _, ok := u.received[d.Hash]; !ok {
			out = append(out, d)
		}
	}
	return out
}

// at is where the file rel of the tree is written, relative to the root.
func (u *Update) at(rel string) string {
	if u.stage != "" {
		return filepath.Join(u.stage, filepath.FromSlash(rel))
	}
	return filepath.Join(u.name, filepath.FromSlash(rel))
}

// tempFor is a fresh temporary file name for the tree's file rel, in the
// nearest directory of it that exists now (the same file system as where
// it goes), relative to the root.
func (u *Update) tempFor(rel string) string {
	if u.stage != "" {
		return u.at(rel)
	}
	dir := path.Dir(rel)
	for dir != "." {
		if c, ok := u.cur[dir]; ok && c.e.Type == EntryDir && !u.dirWay[dir] {
			break
		}
		dir = path.Dir(dir)
	}
	return filepath.Join(u.name, filepath.FromSlash(dir), u.s.tempName(tmpPrefix))
}

// sweepBeside removes the staging and old directories that killed
// processes left beside the destination.
func (u *Update) sweepBeside() {
	if u.name == "." {
		return
	}
	parent := filepath.Dir(u.name)
	f, err := u.root.Open(parent)
	if err != nil {
		return
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	for _, n := range names {
		if !strings.HasPrefix(n, stagePrefix) && !strings.HasPrefix(n, oldPrefix) {
			continue
		}
		if pid, host, ok := rexTemp(n); ok && u.s.leftover(pid, host) {
			u.root.RemoveAll(filepath.Join(parent, n))
		}
	}
}

// buildStage makes the staging directory beside the destination with the
// tree's directories, and links into it the files the destination holds
// unchanged.
func (u *Update) buildStage(ctx context.Context) error {
	parent := filepath.Dir(u.name)
	if err := u.root.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("update %s: create its parent: %w", u.res.Path, err)
	}
	u.stage = filepath.Join(parent, u.s.tempName(stagePrefix))
	perm := fs.FileMode(0o755)
	if u.exists {
		if fi, err := u.root.Lstat(u.name); err == nil {
			perm = fi.Mode().Perm() | fi.Mode()&(fs.ModeSetgid|fs.ModeSetuid|fs.ModeSticky)
		}
	}
	if err := u.root.Mkdir(u.stage, 0o700); err != nil {
		return fmt.Errorf("update %s: create the staging directory: %w", u.res.Path, err)
	}
	u.mu.Lock()
	u.addTemp(u.stage)
	u.mu.Unlock()
	if u.exists {
		if fi, err := u.root.Lstat(u.name); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				u.root.Lchown(u.stage, int(st.Uid), int(st.Gid)) // best effort: keep the owner
			}
		}
	}
	if err := u.root.Chmod(u.stage, perm); err != nil {
		return fmt.Errorf("update %s: %w", u.res.Path, err)
	}
	for _, pe := range u.p.dirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := u.makeDir(u.at(pe.rel), pe.e); err != nil {
			return fmt.Errorf("update %s: create directory %s: %w", u.res.Path, pe.rel, err)
		}
	}
	// Files the destination holds unchanged: a hard link when the file has
	// no other name (so the new tree never shares an inode with a file
	// elsewhere) and already has the right mode and owner; else a copy.
	var copies []*fileWrite
	for _, w := range u.links {
		src := filepath.Join(u.name, filepath.FromSlash(w.rel))
		c := u.cur[w.rel]
		if c.info != nil && soleLink(c.info) && c.e.Perm() == w.e.Perm() && !u.ownerDiffers(c.info) {
			if u.root.Link(src, u.at(w.rel)) == nil {
				continue
			}
		}
		copies = append(copies, w)
	}
	for _, w := range copies {
		u.writes = append(u.writes, w)
		u.byHash[w.e.Digest.Hash] = append(u.byHash[w.e.Digest.Hash], w)
		u.res.Bytes += w.e.Digest.Size
	}
	return nil
}

// makeDir creates a directory with the entry's mode (and the owner asked
// for), whatever the umask.
func (u *Update) makeDir(name string, e Entry) error {
	if err := u.root.Mkdir(name, 0o700); err != nil {
		return err
	}
	return u.setAttrs(name, e)
}

// setAttrs gives name the entry's mode and the owner asked for; the owner
// first, since chown clears setuid and setgid.
func (u *Update) setAttrs(name string, e Entry) error {
	if o := u.opts.Owner; o != nil {
		if err := u.root.Lchown(name, o.UID, o.GID); err != nil {
			return err
		}
	}
	return u.root.Chmod(name, goPerm(e.Perm()))
}

// keepOwner gives name, the new content of the file w.rel, the owner and
// group of the file it replaces, as Ansible's copy does: rexd run through
// sudo would otherwise turn a file of www-data into one of root's, which
// the service that rewrites it can no longer write. Only as root, only
// when no Owner is asked for, and only over a regular file.
func (u *Update) keepOwner(name string, w *fileWrite) error {
	if u.opts.Owner != nil || os.Geteuid() != 0 {
		return nil
	}
	c, ok := u.cur[w.rel]
	if !ok || c.info == nil || !c.info.Mode().IsRegular() {
		return nil
	}
	st, ok := c.info.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == os.Geteuid() && int(st.Gid) == os.Getegid() {
		return nil
	}
	if err := u.root.Lchown(name, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	// chown cleared setuid and setgid: the mode again.
	return u.root.Chmod(name, goPerm(w.e.Perm()))
}

// BlobWriter receives one needed blob in order. Write hashes as it goes;
// Commit checks the whole against the digest and hands the file to the
// update. It is not safe for concurrent use.
type BlobWriter struct {
	u    *Update
	d    Digest
	e    Entry  // the first entry holding it: its mode
	name string // relative to the root
	f    *os.File
	h    hash.Hash // nil: Put verified the bytes already
	n    int64
	done bool
}

// Receive starts receiving the needed blob d. The bytes go straight to
// where the tree wants them (a temporary file beside the first path that
// holds d): a blob is written once.
func (u *Update) Receive(d Digest) (*BlobWriter, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	ws := u.byHash[d.Hash]
	if len(ws) == 0 || !u.needSet[d] {
		return nil, fmt.Errorf("receive %s: %w: the update does not need it", d, ErrMismatch)
	}
	if u.opts.DryRun {
		return nil, errors.New("receive: a dry run writes nothing")
	}
	u.mu.Lock()
	if u.finished {
		u.mu.Unlock()
		return nil, fmt.Errorf("receive: %w", ErrUpdateFinished)
	}
	if _, ok := u.received[d.Hash]; ok {
		u.mu.Unlock()
		return nil, fmt.Errorf("receive %s: %w", d, ErrReceived)
	}
	name := u.tempFor(ws[0].rel)
	u.addTemp(name)
	u.mu.Unlock()
	f, err := u.create(name)
	if err != nil {
		return nil, fmt.Errorf("receive %s: %w", d, u.pathError(ws[0].rel, err))
	}
	return &BlobWriter{u: u, d: d, e: ws[0].e, name: name, f: f, h: sha256.New()}, nil
}

// create makes the new file name (relative to the root) through a handle
// on its directory, opened once per update: one lookup per file, not one
// per path component.
func (u *Update) create(name string) (*os.File, error) {
	dir, base := filepath.Split(name)
	u.mu.Lock()
	if u.finished {
		u.mu.Unlock()
		return nil, ErrUpdateFinished
	}
	u.creating.Add(1)
	defer u.creating.Done()
	r := u.dirRoots[dir]
	if r == nil {
		var err error
		if r, err = u.root.OpenRoot(filepath.Clean(dir)); err != nil {
			u.mu.Unlock()
			return nil, err
		}
		if u.dirRoots == nil {
			u.dirRoots = map[string]*os.Root{}
		}
		u.dirRoots[dir] = r
	}
	u.mu.Unlock()
	return r.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}

// finish gives a file just written its owner and mode (after the bytes:
// a write by another than root clears setuid) and closes it.
func (u *Update) finish(f *os.File, e Entry) error {
	var err error
	if o := u.opts.Owner; o != nil {
		err = f.Chown(o.UID, o.GID)
	}
	if err == nil {
		err = f.Chmod(goPerm(e.Perm()))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Offset is how many bytes have been received.
func (w *BlobWriter) Offset() int64 { return w.n }

// Write appends p; it refuses bytes beyond the digest's size.
func (w *BlobWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("receive %s: already finished", w.d)
	}
	if int64(len(p)) > w.d.Size-w.n {
		return 0, fmt.Errorf("receive %s: %w: %d bytes past its size of %d", w.d, ErrMismatch, w.n+int64(len(p))-w.d.Size, w.d.Size)
	}
	n, err := w.f.Write(p)
	if w.h != nil {
		w.h.Write(p[:n])
	}
	w.n += int64(n)
	if err != nil {
		return n, fmt.Errorf("receive %s: %w", w.d, err)
	}
	return n, nil
}

// Commit checks what was written against the digest and keeps it for the
// update; on a mismatch the file is removed.
func (w *BlobWriter) Commit() error {
	if w.done {
		return fmt.Errorf("receive %s: already finished", w.d)
	}
	w.done = true
	err := w.u.finish(w.f, w.e)
	switch {
	case err != nil:
	case w.n != w.d.Size:
		err = fmt.Errorf("%w: received %d of %d bytes", ErrMismatch, w.n, w.d.Size)
	case w.h != nil && hex.EncodeToString(w.h.Sum(nil)) != w.d.Hash:
		err = fmt.Errorf("%w: the bytes received hash to something else; send them again", ErrMismatch)
	}
	if err != nil {
		w.u.root.Remove(w.name)
		return fmt.Errorf("receive %s: %w", w.d, err)
	}
	w.u.mu.Lock()
	w.u.received[w.d.Hash] = w.name
	w.u.mu.Unlock()
	return nil
}

// Abort discards what was received of the blob.
func (w *BlobWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.f.Close()
	w.u.root.Remove(w.name)
}

// Put receives whole blobs, each verified before it is kept. The batches
// of one sender arrive several at a time (see SendBlobs), and are written
// side by side: no more threads creating files in one directory than that.
//
// Every object is hashed once, here, before any is written: a batch with
// one bad object, or one the update does not need, writes nothing, and the
// writers need not hash again. An object received already (a batch sent
// again, or twice in one) is the same bytes: it is taken as it is.
func (u *Update) Put(objs []Object) error {
	for _, o := range objs {
		if err := verifyObject(o); err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		if !u.needSet[o.Digest] {
			return fmt.Errorf("receive %s: %w: the update does not need it", o.Digest, ErrMismatch)
		}
	}
	for i := range objs {
		o := objs[i]
		w, err := u.Receive(o.Digest)
		if errors.Is(err, ErrReceived) {
			continue
		}
		if err != nil {
			return err
		}
		w.h = nil // verified above
		if _, err := w.Write(o.Data); err != nil {
			w.Abort()
			return err
		}
		if err := w.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// pathError names the destination path of rel in err.
func (u *Update) pathError(rel string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: path.Join(filepath.ToSlash(u.res.Path), rel), Err: pe.Err}
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return &fs.PathError{Op: le.Op, Path: path.Join(filepath.ToSlash(u.res.Path), rel), Err: le.Err}
	}
	return err
}

// provision writes the content of every write that has none yet: from the
// blob received, a file of the destination, or the store.
func (u *Update) provision(ctx context.Context) error {
	var todo []*fileWrite
	u.mu.Lock()
	claimed := map[string]bool{} // received temps that serve a write already
	for _, w := range u.writes {
		if w.tmp != "" {
			claimed[w.tmp] = true
		}
	}
	for _, w := range u.writes {
		if w.tmp != "" {
			continue
		}
		if t, ok := u.received[w.e.Digest.Hash]; ok && !claimed[t] {
			w.tmp, claimed[t] = t, true
			continue
		}
		todo = append(todo, w)
	}
	u.mu.Unlock()
	return parallel(len(todo), func(i int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		w := todo[i]
		name := u.tempFor(w.rel)
		u.mu.Lock()
		u.addTemp(name)
		src, fromTemp := u.received[w.e.Digest.Hash]
		u.mu.Unlock()
		if err := u.copyInto(name, w, src, fromTemp); err != nil {
			return fmt.Errorf("write %s: %w", path.Join(filepath.ToSlash(u.res.Path), w.rel), unwrapPath(err))
		}
		w.tmp = name
		return nil
	})
}

// copyInto writes w's content to the new file name: from a received temp,
// a file of the destination (trusted by its stat, as the scan did), or the
// store (verified as it is read).
func (u *Update) copyInto(name string, w *fileWrite, received string, fromTemp bool) (err error) {
	var src io.ReadCloser
	switch {
	case fromTemp:
		src, err = u.root.Open(received)
	case w.from != "":
		src, err = u.root.Open(filepath.Join(u.name, filepath.FromSlash(w.from)))
	default:
		src, err = u.s.Open(w.e.Digest)
	}
	if err != nil {
		return err
	}
	defer src.Close()
	f, err := u.create(name)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, src)
	if ferr := u.finish(f, w.e); err == nil {
		err = ferr
	}
	if err == nil && n != w.e.Digest.Size {
		err = fmt.Errorf("its source changed while being copied (%d bytes, not %d); push again", n, w.e.Digest.Size)
	}
	return err
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Commit writes the update: content no source gave must have been
// received. In place, directories are made, every file is renamed over its
// old self, links replaced, modes and owners set, and the deletions done;
// with a staging directory, it is completed and swapped in.
func (u *Update) Commit(ctx context.Context) (UpdateResult, error) {
	u.mu.Lock()
	if u.finished || u.opts.DryRun {
		u.mu.Unlock()
		return UpdateResult{}, errors.New("commit: the update is finished, or a dry run")
	}
	u.mu.Unlock()
	if m := u.Missing(); len(m) > 0 {
		u.Abort()
		return UpdateResult{}, &MissingError{Digests: m}
	}
	err := u.provision(ctx)
	if err == nil {
		if u.stage != "" {
			err = u.commitStage(ctx)
		} else {
			err = u.commitInPlace(ctx)
		}
	}
	u.Abort() // removes what is left of temporary files
	if err != nil {
		return UpdateResult{}, err
	}
	u.seedCache()
	return u.res, nil
}

// Abort removes the temporary files and the staging directory. It is safe
// to call more than once, and after Commit.
func (u *Update) Abort() {
	u.mu.Lock()
	temps := u.temps
	u.temps = nil
	u.finished = true
	roots := u.dirRoots
	u.dirRoots = nil
	u.mu.Unlock()
	u.creating.Wait() // a create that passed its check finishes: its file is in temps
	for _, r := range roots {
		r.Close()
	}
	for t := range temps {
		if _, err := u.root.Lstat(t); err == nil {
			u.root.RemoveAll(t)
		}
	}
}

func (u *Update) commitStage(ctx context.Context) error {
	// Files have their mode and owner since they were written; those
	// that replace one get its owner back (as root).
	for _, w := range u.writes {
		if err := u.keepOwner(u.at(w.rel), w); err != nil {
			return fmt.Errorf("update %s: %w", u.res.Path, u.pathError(w.rel, err))
		}
	}
	for _, pe := range u.symlink {
		if err := u.root.Symlink(pe.e.Target, u.at(pe.rel)); err != nil {
			return fmt.Errorf("update %s: create symlink %s: %w", u.res.Path, pe.rel, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if u.opts.beforeSwap != nil {
		u.opts.beforeSwap()
	}
	if !u.exists {
		if err := u.root.Rename(u.stage, u.name); err != nil {
			return fmt.Errorf("update %s: %w", u.res.Path, err)
		}
		u.forgetTemp(u.stage)
		return nil
	}
	parent, err := u.root.Open(filepath.Dir(u.name))
	if err != nil {
		return fmt.Errorf("update %s: %w", u.res.Path, err)
	}
	swapped, err := exchange(parent, filepath.Base(u.stage), filepath.Base(u.name))
	parent.Close()
	if err != nil {
		return fmt.Errorf("update %s: swap in the new tree: %w", u.res.Path, err)
	}
	old := u.stage // after the exchange it holds the old tree
	if swapped && u.opts.afterSwap != nil {
		u.opts.afterSwap()
	}
	if !swapped {
		// No atomic exchange here: two renames, with the destination
		// missing in between.
		old = filepath.Join(filepath.Dir(u.name), u.s.tempName(oldPrefix))
		if err := u.root.Rename(u.name, old); err != nil {
			return fmt.Errorf("update %s: move the old directory aside: %w", u.res.Path, err)
		}
		if err := u.root.Rename(u.stage, u.name); err != nil {
			if rerr := u.root.Rename(old, u.name); rerr != nil {
				return fmt.Errorf("update %s: %w; the previous contents are at %s", u.res.Path, err, filepath.Join(u.root.Name(), old))
			}
			return fmt.Errorf("update %s: %w", u.res.Path, err)
		}
	}
	u.forgetTemp(u.stage)
	// The new tree is in place: the update succeeded whatever happens to
	// the old one, which a later update sweeps if it stays.
	if err := u.root.RemoveAll(old); err != nil {
		u.res.Warning = fmt.Sprintf("the previous contents remain at %s (%v); a later push removes them", filepath.Join(u.root.Name(), old), err)
	}
	return nil
}

// addTemp notes a temporary file or directory for Abort; u.mu is held. A
// file written into the staging directory is not noted: it goes with the
// directory, as its final name once the stage is swapped in.
func (u *Update) addTemp(name string) {
	if u.stage != "" && name != u.stage {
		return
	}
	if u.temps == nil {
		u.temps = map[string]bool{}
	}
	u.temps[name] = true
}

// rename renames from to to, both relative to the root: through the
// handle on their directory when they share one that create opened, one
// renameat instead of a lookup of every component of both paths.
func (u *Update) rename(from, to string) error {
	dir, base := filepath.Split(to)
	if fdir, fbase := filepath.Split(from); fdir == dir {
		u.mu.Lock()
		r := u.dirRoots[dir]
		u.mu.Unlock()
		if r != nil {
			return r.Rename(fbase, base)
		}
	}
	return u.root.Rename(from, to)
}

// forgetTemp notes that t was renamed into place.
func (u *Update) forgetTemp(t string) {
	u.mu.Lock()
	delete(u.temps, t)
	u.mu.Unlock()
}

func (u *Update) commitInPlace(ctx context.Context) error {
	fail := func(rel string, err error) error {
		return fmt.Errorf("update %s: %w", u.res.Path, u.pathError(rel, err))
	}
	// Directories, parents first: what stands in the way goes first.
	for _, pe := range u.newDirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := u.at(pe.rel)
		if u.dirWay[pe.rel] {
			if err := u.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fail(pe.rel, err)
			}
		}
		if err := u.makeDir(name, pe.e); err != nil {
			if !errors.Is(err, fs.ErrExist) {
				return fail(pe.rel, err)
			}
			// Made meanwhile by someone else: give it the mode anyway.
			if err := u.setAttrs(name, pe.e); err != nil {
				return fail(pe.rel, err)
			}
		}
	}
	for _, w := range u.writes {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := u.at(w.rel)
		if w.replaceDir {
			if err := u.root.RemoveAll(name); err != nil {
				return fail(w.rel, err)
			}
		}
		if err := u.keepOwner(w.tmp, w); err != nil {
			return fail(w.rel, err)
		}
		if err := u.rename(w.tmp, name); err != nil {
			return fail(w.rel, err)
		}
		u.forgetTemp(w.tmp)
	}
	for _, pe := range u.symlink {
		name := u.at(pe.rel)
		if u.dirWay[pe.rel] {
			if err := u.root.RemoveAll(name); err != nil {
				return fail(pe.rel, err)
			}
		}
		tmp := filepath.Join(filepath.Dir(name), u.s.tempName(tmpPrefix))
		if err := u.root.Symlink(pe.e.Target, tmp); err != nil {
			return fail(pe.rel, err)
		}
		if err := u.root.Rename(tmp, name); err != nil {
			u.root.Remove(tmp)
			return fail(pe.rel, err)
		}
	}
	for _, pe := range append(slices.Clone(u.setMeta), u.setDirs...) {
		if err := u.setAttrs(u.at(pe.rel), pe.e); err != nil {
			return fail(pe.rel, err)
		}
	}
	for _, rel := range u.deletes {
		if u.underReplaced(rel) {
			continue // went with the directory a file or link replaced
		}
		if err := u.root.RemoveAll(u.at(rel)); err != nil {
			return fail(rel, err)
		}
	}
	return nil
}

// seedCache records the destination's files in its stat cache: those the
// scan saw unchanged, and those just written (once their times are out of
// the racy window), so the next update reads none of them.
func (u *Update) seedCache() {
	cache := u.cache
	if cache == nil || u.stage != "" {
		cache = u.s.openStatCache(u.res.Path)
		cache.mu.Lock()
		clear(cache.fresh) // sized for what was there: about what the new tree holds
		cache.changed = true
		cache.mu.Unlock()
	}
	cache.mu.Lock()
	for _, rel := range u.deletes {
		delete(cache.fresh, rel)
	}
	cache.mu.Unlock()
	d, err := u.root.OpenRoot(u.name)
	if err != nil {
		return
	}
	defer d.Close()
	record := func(rel string, dg Digest) {
		seen := u.s.now()
		if fi, err := d.Lstat(filepath.FromSlash(rel)); err == nil {
			cache.record(rel, fi, dg, seen)
			if k, ok := keyOf(fi); ok {
				u.s.locator().noteFile(u.res.Path, rel, dg, k)
			}
		}
	}
	for _, w := range u.writes {
		cache.mu.Lock()
		delete(cache.fresh, w.rel)
		cache.mu.Unlock()
		record(w.rel, w.e.Digest)
	}
	for _, w := range u.links {
		record(w.rel, w.e.Digest)
	}
	for _, pe := range u.setMeta {
		record(pe.rel, pe.e.Digest) // chmod moved its ctime
	}
	cache.save()
}

// soleLink reports whether a file has exactly one name.
func soleLink(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 1
}
