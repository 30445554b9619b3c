// Package cas is rex's content-addressed store and everything built on it:
// trees of files, snapshots and refs, the transport-agnostic sync algorithm
// (has / put / get), the materializer that writes a tree to disk, and the
// three-way merge of trees (with a git-compatible diff3 for text files).
//
// # Objects and digests
//
// Every object is addressed by a [Digest]: its SHA-256 as 64 lowercase hex
// characters and its size in bytes. Any other spelling of a hash (uppercase,
// short, "../x") is refused by every operation before it touches the disk.
// Blobs are raw bytes. Structured objects (trees, snapshots) are encoded in
// the one canonical JSON form described at [MarshalCanonical]; their digest is
// the digest of those exact bytes, and decoders refuse any other spelling.
//
// # On-disk layout
//
//	ROOT/objects/ab/cdef…   object ab cdef… (62 hex characters after the shard)
//	ROOT/tmp/               temporary files, renamed into objects/ when complete
//	ROOT/quarantine/        objects found corrupt on read, moved aside
//	ROOT/refs/<key>.ref     one ref (see [Store.UpdateRef]); <key>.lock its lock
//
// Writes go to a uniquely named temporary file in ROOT/tmp, are fsynced and
// renamed into place, and the shard directory is fsynced. Two processes
// putting the same object at once both succeed: the object's bytes are fixed
// by its name, so whichever rename lands last replaces identical content.
// Reads verify size and hash; a corrupt object is moved to ROOT/quarantine so
// that [Store.Has] reports it missing and the next sync repairs it.
//
// # Invariant
//
// A tree is stored only after every object it references (directly or
// through subtrees) is stored. [Store.Ingest], [Fetch], [Push] and
// [Store.MergeTrees] all write bottom-up, which lets [Push] skip a whole
// subtree when the receiver already has its tree object. A corrupt object
// moved to quarantine breaks the invariant for the trees above it; [Repair]
// restores it by checking every object instead of trusting present trees.
//
// The package imports nothing of the console, the daemon or SSH; the daemon's
// RPC handlers call [Store.Has], [Store.PutBatch], [Store.Get], [Upload],
// [Store.ReadChunk] and [Store.MaterializeIn], and the client implements
// [Remote] over those RPCs.
package cas
