package cas

import "sync"

// treeCache keeps trees decoded by recent updates. A re-push of the same
// tree, or of one that differs in a few directories, would otherwise read
// and decode every tree again on every push; a tree's digest fixes its
// content, so a kept tree never goes stale. Callers must not modify the
// Entries of a tree they get.
type treeCache struct {
	mu    sync.Mutex
	trees map[Digest]Tree
	held  int // entries held in all
}

// maxCachedTreeEntries bounds what a long-lived rexd keeps: a few trees of
// ordinary size. When a tree would not fit, the cache starts over.
const maxCachedTreeEntries = 1 << 17

func (c *treeCache) get(d Digest) (Tree, bool) {
	if c == nil {
		return Tree{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.trees[d]
	return t, ok
}

func (c *treeCache) put(d Digest, t Tree) {
	if c == nil || len(t.Entries) > maxCachedTreeEntries {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.trees[d]; ok {
		return
	}
	if c.trees == nil || c.held+len(t.Entries) > maxCachedTreeEntries {
		c.trees, c.held = map[Digest]Tree{}, 0
	}
	c.trees[d] = t
	c.held += len(t.Entries)
}
