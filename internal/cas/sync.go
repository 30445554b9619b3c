package cas

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// Remote is the other side of a sync. The client implements it over rexd's
// cas.* methods; LocalRemote implements it over a Store in this process.
//
// Every method receives only valid digests and respects the batch caps
// (MaxHasDigests, MaxBatchEntries, MaxBatchBytes); objects larger than
// MaxInlineSize travel only through the stream methods.
type Remote interface {
	Sink
	// Has returns the digests the remote lacks.
	Has(ctx context.Context, digests []Digest) (missing []Digest, err error)
	// Get returns every requested object. A missing object is an error,
	// never a silent omission.
	Get(ctx context.Context, digests []Digest) ([]Object, error)
	// GetStream writes the bytes of d to w (Store.ReadChunk on the far
	// side); the caller verifies them.
	GetStream(ctx context.Context, d Digest, w io.Writer) error
}

// Sink receives objects: a store (Remote), or an update on the far side
// that writes blobs straight into its destination (see Update.Receive).
type Sink interface {
	// Put stores objects; the receiver verifies each against its digest
	// and stores all or none.
	Put(ctx context.Context, objects []Object) error
	// PutStream sends one object of d.Size bytes read from r; the receiver
	// verifies the whole before storing it (Upload).
	PutStream(ctx context.Context, d Digest, r io.Reader) error
}

// Stats counts one Push or Fetch, so callers (and tests) can see what
// crossed the wire.
type Stats struct {
	Queries        int   // Has calls made to the remote
	QueriedDigests int   // digests asked about in those calls
	Batches        int   // Put (Push) or Get (Fetch) calls
	Streams        int   // PutStream or GetStream calls
	Blobs          int   // blobs transferred
	Trees          int   // tree objects transferred
	Bytes          int64 // object bytes transferred (before any encoding)
}

// Progress is a Push or Fetch under way: what has crossed so far and, once
// the walk has found it, how much crosses in all.
type Progress struct {
	Stats // so far; Bytes includes the part of a stream already sent
	// Walking is set while the trees are still being compared, before
	// the totals are known.
	Walking bool
	// TotalObjects and TotalBytes are what the sync moves in all, set
	// once Walking ends.
	TotalObjects int
	TotalBytes   int64
}

// SyncOptions tune PushWith and FetchWith.
type SyncOptions struct {
	// Progress, when set, is called on the syncing goroutine after every
	// query and batch and every MiB or so of a stream, and once when the
	// walk has found the totals. It must not block for long: the sync
	// waits for it.
	Progress func(Progress)
	// Verified, when set, is shared by the sends of one push to many
	// targets: a blob read (and checked against its digest) for one
	// target is not hashed again for the next. The receiver checks
	// every blob anyway.
	Verified *VerifiedSet
	// MaxBytes bounds the blob bytes a fetch may store: more is refused
	// (a *SpaceError) before any blob is received. 0 means the free space
	// of the store's file system, less 5%.
	MaxBytes int64
	// MaxEntries bounds the entries of the trees a fetch receives: more
	// is refused as it walks, before the trees are stored or a blob is
	// received. 0 means MaxMaterializeEntries, what a tree may hold to be
	// written at all.
	MaxEntries int
	// TreesOnly makes a fetch get the tree objects alone, for a plan
	// (a dry run): no blob is received.
	TreesOnly bool
}

// VerifiedSet remembers the blobs whose bytes were checked against their
// digest in this process, and keeps the bytes of the last ones read (up to
// verifiedKeep): the targets of one push send the same blobs in the same
// order, so while they keep pace one read of a file serves them all. It is
// safe for concurrent use.
type VerifiedSet struct {
	// Share keeps bytes read for the other targets; a push to one
	// target has none.
	Share bool

	m sync.Map

	mu    sync.Mutex
	kept  map[Digest][]byte
	order []Digest // kept, oldest first
	bytes int64
}

// verifiedKeep is how many bytes of blobs a sharing VerifiedSet keeps: a few
// batches (MaxBatchBytes) for each of a few targets apart.
const verifiedKeep = 32 << 20

// read returns d's bytes from local, hashing them unless the set says
// they were checked already. The bytes returned are shared: not to be
// changed.
func (v *VerifiedSet) read(local *Store, d Digest) ([]byte, error) {
	if v == nil {
		return local.Read(d)
	}
	v.mu.Lock()
	data, ok := v.kept[d]
	v.mu.Unlock()
	if ok {
		return data, nil
	}
	if _, ok := v.m.Load(d); ok {
		if data, err := local.readUnchecked(d); err == nil {
			v.keep(d, data)
			return data, nil
		}
	}
	data, err := local.Read(d)
	if err == nil {
		v.m.Store(d, struct{}{})
		v.keep(d, data)
	}
	return data, err
}

// keep adds d's bytes to those kept, dropping the oldest past verifiedKeep.
func (v *VerifiedSet) keep(d Digest, data []byte) {
	if !v.Share || int64(len(data)) > verifiedKeep/4 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.kept[d]; ok {
		return
	}
	if v.kept == nil {
		v.kept = map[Digest][]byte{}
	}
	v.kept[d] = data
	v.order = append(v.order, d)
	v.bytes += int64(len(data))
	for v.bytes > verifiedKeep {
		old := v.order[0]
		v.order = v.order[1:]
		v.bytes -= int64(len(v.kept[old]))
		delete(v.kept, old)
	}
}

// progressStep is how many streamed bytes pass between two reports.
const progressStep = 1 << 20

// tracker counts a sync and reports its progress.
type tracker struct {
	Stats
	verified   *VerifiedSet
	fn         func(Progress)
	walking    bool
	total      int
	totalBytes int64
	streamed   int64 // bytes of the stream in flight
	reported   int64 // streamed at the last report
}

func newTracker(opts SyncOptions) *tracker {
	return &tracker{fn: opts.Progress, walking: true}
}

func (t *tracker) report() {
	if t.fn == nil {
		return
	}
	p := Progress{Stats: t.Stats, Walking: t.walking, TotalObjects: t.total, TotalBytes: t.totalBytes}
	p.Bytes += t.streamed
	t.reported = t.streamed
	t.fn(p)
}

// walked ends the walk: objects and bytes are what is left to move.
func (t *tracker) walked(ds []Digest) {
	t.walking = false
	t.total = t.Blobs + t.Trees + len(ds)
	t.totalBytes = t.Bytes
	for _, d := range ds {
		t.totalBytes += d.Size
	}
	t.report()
}

// streamDone forgets the stream in flight: its object is counted whole
// (or failed).
func (t *tracker) streamDone() { t.streamed, t.reported = 0, 0 }

// streaming notes n more bytes of the stream in flight.
func (t *tracker) streaming(n int) {
	t.streamed += int64(n)
	if t.streamed-t.reported >= progressStep {
		t.report()
	}
}

// progressReader and progressWriter count a stream's bytes for a tracker.
type progressReader struct {
	r io.Reader
	t *tracker
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.t.streaming(n)
	return n, err
}

type progressWriter struct {
	w io.Writer
	t *tracker
}

func (p progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.t.streaming(n)
	return n, err
}

// LocalRemote serves a Store in this process as a Remote: for the local
// target, and for tests.
type LocalRemote struct {
	Store *Store
}

var _ Remote = LocalRemote{}

// Has implements Remote.
func (l LocalRemote) Has(ctx context.Context, ds []Digest) ([]Digest, error) {
	return l.Store.Has(ctx, ds)
}

// Put implements Remote.
func (l LocalRemote) Put(ctx context.Context, objs []Object) error {
	return l.Store.PutBatch(ctx, objs)
}

// Get implements Remote.
func (l LocalRemote) Get(ctx context.Context, ds []Digest) ([]Object, error) {
	return l.Store.Get(ctx, ds)
}

// PutStream implements Remote.
func (l LocalRemote) PutStream(ctx context.Context, d Digest, r io.Reader) error {
	return l.Store.PutStream(ctx, d, r)
}

// GetStream implements Remote, chunk by chunk as a daemon would serve it.
func (l LocalRemote) GetStream(ctx context.Context, d Digest, w io.Writer) error {
	for off := int64(0); ; {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk, err := l.Store.ReadChunk(d, off, MaxChunkSize)
		if err != nil {
			return err
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		off += int64(len(chunk))
		if off >= d.Size {
			return nil
		}
		if len(chunk) == 0 {
			return fmt.Errorf("stream %s: no progress at offset %d", d, off)
		}
	}
}

// Push makes remote hold the tree root and everything under it, sending
// only what it lacks. It walks trees top-down and asks Has only about the
// children of trees the remote lacks, so an unchanged tree costs one digest
// query and an unchanged subtree is never opened. It then sends the missing
// blobs, then the missing trees children-first, so the remote never holds a
// tree whose children it lacks.
func Push(ctx context.Context, local *Store, remote Remote, root Digest) (Stats, error) {
	return PushWith(ctx, local, remote, root, SyncOptions{})
}

// PushWith is Push reporting its progress through opts.
func PushWith(ctx context.Context, local *Store, remote Remote, root Digest, opts SyncOptions) (Stats, error) {
	return push(ctx, local, remote, root, opts, false)
}

// PushTrees is Push of the tree objects alone: the blobs stay here. The
// far side of an update then finds on its own side the blobs it can (its
// destination's files, other directories) and is sent the rest with
// SendBlobs, written once, straight where they belong.
func PushTrees(ctx context.Context, local *Store, remote Remote, root Digest, opts SyncOptions) (Stats, error) {
	return push(ctx, local, remote, root, opts, true)
}

func push(ctx context.Context, local *Store, remote Remote, root Digest, opts SyncOptions, treesOnly bool) (Stats, error) {
	st := newTracker(opts)
	if err := root.Validate(); err != nil {
		return st.Stats, fmt.Errorf("push: %w", err)
	}
	// Fail early and locally if the tree is not ours to push.
	if _, err := local.ReadTree(root); err != nil {
		return st.Stats, fmt.Errorf("push: %w", err)
	}
	missing, err := queryHas(ctx, remote, []Digest{root}, st)
	if err != nil {
		return st.Stats, fmt.Errorf("push: %w", err)
	}
	if len(missing) == 0 {
		st.walked(nil)
		return st.Stats, nil
	}

	trees := map[Digest]Tree{} // trees the remote lacks
	seen := map[ref]bool{{root, true}: true}
	var blobs []Digest
	frontier := []Digest{root}
	for len(frontier) > 0 {
		var children []ref
		for _, d := range frontier {
			t, err := local.ReadTree(d)
			if err != nil {
				return st.Stats, fmt.Errorf("push: %w", err)
			}
			trees[d] = t
			children = appendChildren(children, t, seen)
		}
		if treesOnly {
			children = slices.DeleteFunc(children, func(c ref) bool { return !c.dir })
		}
		lacking, err := queryHas(ctx, remote, digestsOf(children), st)
		if err != nil {
			return st.Stats, fmt.Errorf("push: %w", err)
		}
		frontier = frontier[:0]
		for _, c := range pick(children, lacking) {
			if c.dir {
				frontier = append(frontier, c.d)
			} else {
				blobs = append(blobs, c.d)
			}
		}
	}
	// A blob whose bytes happen to be a tree we send anyway goes once.
	blobs = slices.DeleteFunc(blobs, func(d Digest) bool { _, ok := trees[d]; return ok })
	order := childrenFirst(root, trees)
	st.walked(append(slices.Clip(blobs), order...))

	if err := sendObjects(ctx, local, remote, blobs, st, false); err != nil {
		return st.Stats, fmt.Errorf("push: %w", err)
	}
	if err := sendObjects(ctx, local, remote, order, st, true); err != nil {
		return st.Stats, fmt.Errorf("push: %w", err)
	}
	return st.Stats, nil
}

// Repair is Push without trusting the remote's trees: it asks about every
// object under root, so an object the remote lost below a tree it still
// holds (a corrupt object it moved aside, say) is sent again. Use it when
// the remote reports a missing object under a tree Push considered
// complete; it costs one query per MaxHasDigests objects.
func Repair(ctx context.Context, local *Store, remote Remote, root Digest) (Stats, error) {
	st := newTracker(SyncOptions{})
	if err := root.Validate(); err != nil {
		return st.Stats, fmt.Errorf("repair: %w", err)
	}
	trees := map[Digest]Tree{}
	seen := map[ref]bool{{root, true}: true}
	all := []ref{{root, true}}
	for frontier := []Digest{root}; len(frontier) > 0; {
		var next []Digest
		for _, d := range frontier {
			t, err := local.ReadTree(d)
			if err != nil {
				return st.Stats, fmt.Errorf("repair: %w", err)
			}
			trees[d] = t
			n := len(all)
			all = appendChildren(all, t, seen)
			for _, c := range all[n:] {
				if c.dir {
					next = append(next, c.d)
				}
			}
		}
		frontier = next
	}
	lacking, err := queryHas(ctx, remote, digestsOf(all), st)
	if err != nil {
		return st.Stats, fmt.Errorf("repair: %w", err)
	}
	missingTree := map[Digest]bool{}
	var blobs []Digest
	for _, c := range pick(all, lacking) {
		if c.dir {
			missingTree[c.d] = true
		} else if _, isTree := trees[c.d]; !isTree {
			blobs = append(blobs, c.d)
		}
	}
	if err := sendObjects(ctx, local, remote, blobs, st, false); err != nil {
		return st.Stats, fmt.Errorf("repair: %w", err)
	}
	order := slices.DeleteFunc(childrenFirst(root, trees), func(d Digest) bool { return !missingTree[d] })
	if err := sendObjects(ctx, local, remote, order, st, true); err != nil {
		return st.Stats, fmt.Errorf("repair: %w", err)
	}
	return st.Stats, nil
}

// ref is a child reference: a digest and whether it names a tree. The same
// digest may be a blob in one place and a tree in another (a file holding a
// tree's exact bytes); it is then walked as a tree too.
type ref struct {
	d   Digest
	dir bool
}

// appendChildren adds t's unseen file and directory references.
func appendChildren(children []ref, t Tree, seen map[ref]bool) []ref {
	for _, e := range t.Entries {
		if e.Type == EntrySymlink {
			continue
		}
		c := ref{e.Digest, e.Type == EntryDir}
		if !seen[c] {
			seen[c] = true
			children = append(children, c)
		}
	}
	return children
}

func digestsOf(rs []ref) []Digest {
	ds := make([]Digest, len(rs))
	for i, r := range rs {
		ds[i] = r.d
	}
	return ds
}

// pick returns the references whose digest is in ds.
func pick(rs []ref, ds []Digest) []ref {
	want := make(map[Digest]bool, len(ds))
	for _, d := range ds {
		want[d] = true
	}
	var out []ref
	for _, r := range rs {
		if want[r.d] {
			out = append(out, r)
		}
	}
	return out
}

// queryHas asks about digests in batches of MaxHasDigests.
func queryHas(ctx context.Context, remote Remote, ds []Digest, st *tracker) ([]Digest, error) {
	var missing []Digest
	for len(ds) > 0 {
		n := min(len(ds), MaxHasDigests)
		m, err := remote.Has(ctx, ds[:n])
		if err != nil {
			return nil, err
		}
		st.Queries++
		st.QueriedDigests += n
		st.report()
		missing = append(missing, m...)
		ds = ds[n:]
	}
	return missing, nil
}

// childrenFirst orders the trees in set so that every tree comes after the
// trees it contains (post-order from root).
func childrenFirst(root Digest, set map[Digest]Tree) []Digest {
	var order []Digest
	done := map[Digest]bool{}
	var visit func(Digest)
	visit = func(d Digest) {
		if done[d] {
			return
		}
		done[d] = true
		for _, e := range set[d].Entries {
			if _, ok := set[e.Digest]; ok && e.Type == EntryDir {
				visit(e.Digest)
			}
		}
		order = append(order, d)
	}
	visit(root)
	return order
}

// treeLayers groups the trees in set by height within the set (0: no
// subdirectory in the set), for Store.commitLayers.
func treeLayers(root Digest, set map[Digest]Tree, data map[Digest][]byte) [][]Object {
	height := map[Digest]int{}
	var layers [][]Object
	for _, d := range childrenFirst(root, set) {
		h := 0
		for _, e := range set[d].Entries {
			if ch, ok := height[e.Digest]; ok && e.Type == EntryDir {
				h = max(h, ch+1)
			}
		}
		height[d] = h
		for len(layers) <= h {
			layers = append(layers, nil)
		}
		layers[h] = append(layers[h], Object{Digest: d, Data: data[d]})
	}
	return layers
}

// blobWindow is how many batches of blobs SendBlobs keeps in flight: the
// next is read and encoded here while the receiver writes the last.
const blobWindow = 3

// SendBlobs sends the blobs ds from local to sink: small ones in batches
// within the caps, up to blobWindow batches in flight (blobs have no order
// to keep), large ones streamed. It returns once the sink has every one.
func SendBlobs(ctx context.Context, local *Store, sink Sink, ds []Digest, opts SyncOptions) (Stats, error) {
	st := newTracker(opts)
	st.walked(ds)
	st.verified = opts.Verified
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex // guards st and first
		first error
		wg    sync.WaitGroup
		slots = make(chan struct{}, blobWindow)
	)
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return first
	}
	var batch []Object
	var size int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		b := batch
		batch, size = nil, 0
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		wg.Go(func() {
			defer func() { <-slots }()
			err := sink.Put(ctx, b)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
					cancel()
				}
				return
			}
			st.Batches++
			for _, o := range b {
				st.count(o.Digest, false)
			}
			st.report()
		})
		return nil
	}
	err := func() error {
		for _, d := range ds {
			if err := failed(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if d.Size > MaxInlineSize {
				r, err := local.Open(d)
				if err != nil {
					return sourceError(d, err)
				}
				err = sink.PutStream(ctx, d, lockedReader{progressReader{r, st}, &mu})
				r.Close()
				mu.Lock()
				st.streamDone()
				if err == nil {
					st.Streams++
					st.count(d, false)
					st.report()
				}
				mu.Unlock()
				if err != nil {
					return fmt.Errorf("stream %s: %w", d, err)
				}
				continue
			}
			if len(batch) == MaxBatchEntries || size+d.Size > MaxBatchBytes {
				if err := flush(); err != nil {
					return err
				}
			}
			data, err := st.verified.read(local, d)
			if err != nil {
				return sourceError(d, err)
			}
			batch = append(batch, Object{Digest: d, Data: data})
			size += d.Size
		}
		return flush()
	}()
	wg.Wait()
	if f := failed(); f != nil {
		err = f
	}
	mu.Lock()
	defer mu.Unlock()
	return st.Stats, err
}

// sourceError says that a blob could not be read here: most often a
// source file that changed since it was read.
func sourceError(d Digest, err error) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("a source file changed while it was being sent (its content %s is gone); send again", d)
	}
	return err
}

// lockedReader reads under mu: the tracker it reports to is shared with
// the batches in flight.
type lockedReader struct {
	r  io.Reader
	mu *sync.Mutex
}

func (l lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Read(p)
}

// sendObjects sends objects in order: small ones in batches within the
// caps, large ones streamed.
func sendObjects(ctx context.Context, local *Store, remote Sink, ds []Digest, st *tracker, trees bool) error {
	var batch []Object
	var size int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := remote.Put(ctx, batch); err != nil {
			return err
		}
		st.Batches++
		for _, o := range batch {
			st.count(o.Digest, trees)
		}
		st.report()
		batch, size = nil, 0
		return nil
	}
	for _, d := range ds {
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.Size > MaxInlineSize {
			// Keep the order: everything before this object lands first.
			if err := flush(); err != nil {
				return err
			}
			r, err := local.Open(d)
			if err != nil {
				return err
			}
			err = remote.PutStream(ctx, d, progressReader{r, st})
			r.Close()
			st.streamDone()
			if err != nil {
				return fmt.Errorf("stream %s: %w", d, err)
			}
			st.Streams++
			st.count(d, trees)
			st.report()
			continue
		}
		if len(batch) == MaxBatchEntries || size+d.Size > MaxBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		data, err := local.Read(d)
		if err != nil {
			return err
		}
		batch = append(batch, Object{Digest: d, Data: data})
		size += d.Size
	}
	return flush()
}

func (st *Stats) count(d Digest, tree bool) {
	if tree {
		st.Trees++
	} else {
		st.Blobs++
	}
	st.Bytes += d.Size
}

// Fetch makes local hold the tree root and everything under it, getting
// from remote only what local lacks, and storing trees children-first. Every
// received object is verified before it is stored. Stats.Queries stays 0:
// the Has questions are asked of the local store.
func Fetch(ctx context.Context, local *Store, remote Remote, root Digest) (Stats, error) {
	return FetchWith(ctx, local, remote, root, SyncOptions{})
}

// FetchWith is Fetch reporting its progress through opts.
func FetchWith(ctx context.Context, local *Store, remote Remote, root Digest, opts SyncOptions) (Stats, error) {
	st := newTracker(opts)
	if err := root.Validate(); err != nil {
		return st.Stats, fmt.Errorf("fetch: %w", err)
	}
	if ok, err := local.present(root); err != nil || ok {
		if err == nil {
			st.walked(nil)
		}
		return st.Stats, err
	}
	// A remote's trees are held here until the walk ends. Each distinct
	// tree is at least once in what its root would write, so entries
	// beyond what a materialization may hold (or levels beyond its
	// depth) are refused as they arrive, a batch at a time: a hostile
	// target's many small trees never pile up in memory.
	maxEntries := cmp.Or(opts.MaxEntries, MaxMaterializeEntries)
	entries := 0
	tooLarge := func() error {
		return fmt.Errorf("fetch: %w: the tree has more than %d entries or %d levels, more than rex writes; nothing was stored",
			ErrInvalidTree, maxEntries, MaxTreeDepth)
	}
	trees := map[Digest]Tree{}
	treeData := map[Digest][]byte{}
	seen := map[ref]bool{{root, true}: true}
	var blobs []Digest
	frontier := []Digest{root}
	for level := 0; len(frontier) > 0; level++ {
		if level > MaxTreeDepth {
			return st.Stats, tooLarge()
		}
		var children []ref
		for part := range slices.Chunk(frontier, MaxBatchEntries) {
			objs, err := receiveObjects(ctx, remote, part, st, true, nil)
			if err != nil {
				return st.Stats, fmt.Errorf("fetch: %w", err)
			}
			for _, o := range objs {
				t, err := DecodeTree(o.Data)
				if err != nil {
					return st.Stats, fmt.Errorf("fetch: tree %s: %w", o.Digest, err)
				}
				if entries += len(t.Entries); entries > maxEntries {
					return st.Stats, tooLarge()
				}
				trees[o.Digest], treeData[o.Digest] = t, o.Data
				children = appendChildren(children, t, seen)
			}
		}
		frontier = frontier[:0]
		for len(children) > 0 {
			n := min(len(children), MaxHasDigests)
			lacking, err := local.Has(ctx, digestsOf(children[:n]))
			if err != nil {
				return st.Stats, fmt.Errorf("fetch: %w", err)
			}
			for _, c := range pick(children[:n], lacking) {
				if _, ok := trees[c.d]; ok && c.dir {
					continue // already fetched at this level
				}
				if c.dir {
					frontier = append(frontier, c.d)
				} else {
					blobs = append(blobs, c.d)
				}
			}
			children = children[n:]
		}
	}
	blobs = slices.DeleteFunc(blobs, func(d Digest) bool { _, ok := trees[d]; return ok })
	if opts.TreesOnly {
		blobs = nil
	}
	var need int64
	for _, d := range blobs {
		need += d.Size
	}
	if err := local.roomFor(need, opts.MaxBytes); err != nil {
		return st.Stats, fmt.Errorf("fetch: %w", err)
	}
	st.walked(blobs)
	if _, err := receiveObjects(ctx, remote, blobs, st, false, local); err != nil {
		return st.Stats, fmt.Errorf("fetch: %w", err)
	}
	// Stored children-first, layer by layer; each was verified on receipt.
	if err := local.commitLayers(treeLayers(root, trees, treeData)); err != nil {
		return st.Stats, fmt.Errorf("fetch: %w", err)
	}
	return st.Stats, nil
}

// FetchBlobs gets the blobs ds (small ones: at most MaxInlineSize each,
// as a text merge reads) from remote into local, verified. A dry run uses
// it to get what its merge reads, into a Scratch view.
func FetchBlobs(ctx context.Context, local *Store, remote Remote, ds []Digest) (Stats, error) {
	st := newTracker(SyncOptions{})
	for _, d := range ds {
		if err := d.Validate(); err != nil {
			return st.Stats, fmt.Errorf("fetch: %w", err)
		}
		if d.Size > MaxInlineSize {
			return st.Stats, fmt.Errorf("fetch: blob %s is larger than %d bytes; fetch it whole with FetchWith", d, MaxInlineSize)
		}
	}
	st.walked(ds)
	if _, err := receiveObjects(ctx, remote, ds, st, false, local); err != nil {
		return st.Stats, fmt.Errorf("fetch: %w", err)
	}
	return st.Stats, nil
}

// receiveObjects gets ds from remote within the caps. With a store (into
// not nil) it stores each batch there, verified, and returns nothing;
// without, it verifies and returns the objects.
func receiveObjects(ctx context.Context, remote Remote, ds []Digest, st *tracker, trees bool, into *Store) ([]Object, error) {
	var out []Object
	handle := func(objs []Object) error {
		for _, o := range objs {
			if err := verifyObject(o); err != nil {
				return fmt.Errorf("received %s: %w", o.Digest, err)
			}
			st.count(o.Digest, trees)
		}
		defer st.report()
		if into != nil {
			return into.PutBatch(ctx, objs)
		}
		out = append(out, objs...)
		return nil
	}
	var batch []Digest
	var size int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		objs, err := remote.Get(ctx, batch)
		if err != nil {
			return err
		}
		st.Batches++
		if err := checkComplete(batch, objs); err != nil {
			return err
		}
		batch, size = nil, 0
		return handle(objs)
	}
	for _, d := range ds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if d.Size > MaxInlineSize {
			if err := flush(); err != nil {
				return nil, err
			}
			obj, err := receiveStream(ctx, remote, d, st, into)
			st.streamDone()
			if err != nil {
				return nil, err
			}
			st.count(d, trees)
			st.report()
			if obj != nil {
				out = append(out, *obj)
			}
			continue
		}
		if len(batch) == MaxBatchEntries || size+d.Size > MaxBatchBytes {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		batch = append(batch, d)
		size += d.Size
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkComplete holds a remote to the Get contract: exactly the objects
// asked for.
func checkComplete(asked []Digest, got []Object) error {
	want := make(map[Digest]bool, len(asked))
	for _, d := range asked {
		want[d] = true
	}
	for _, o := range got {
		if !want[o.Digest] {
			return fmt.Errorf("remote returned %s, which was not asked for", o.Digest)
		}
		delete(want, o.Digest)
	}
	if len(want) > 0 {
		var missing []Digest
		for _, d := range asked {
			if want[d] {
				missing = append(missing, d)
			}
		}
		return &MissingError{Digests: missing}
	}
	return nil
}

// receiveStream gets one large object: into the store through a verifying
// Upload, or into memory (verified) when there is no store.
func receiveStream(ctx context.Context, remote Remote, d Digest, st *tracker, into *Store) (*Object, error) {
	st.Streams++
	if into == nil {
		w := &cappedBuffer{limit: d.Size}
		if err := remote.GetStream(ctx, d, progressWriter{w, st}); err != nil {
			return nil, fmt.Errorf("stream %s: %w", d, err)
		}
		o := Object{Digest: d, Data: w.buf}
		if err := verifyObject(o); err != nil {
			return nil, fmt.Errorf("stream %s: %w", d, err)
		}
		return &o, nil
	}
	u, err := into.NewUpload(d)
	if err != nil {
		return nil, err
	}
	if err := remote.GetStream(ctx, d, progressWriter{u, st}); err != nil {
		u.Abort()
		return nil, fmt.Errorf("stream %s: %w", d, err)
	}
	if err := u.Commit(); err != nil {
		return nil, err
	}
	return nil, nil
}

// cappedBuffer collects at most limit bytes.
type cappedBuffer struct {
	buf   []byte
	limit int64
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if int64(len(c.buf))+int64(len(p)) > c.limit {
		return 0, errors.New("remote sent more bytes than the object's size")
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}
