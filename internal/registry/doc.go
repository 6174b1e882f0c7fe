// Package registry holds what a Store needs to keep one open copy of a
// session per process. Today it holds the session lock (Lock): the lock
// file every writer of a session takes before opening it, so that two
// writers (two Stores, in this process or another) never write one
// session at once. The package knows nothing of the store's types: the
// error a held lock is reported with is the caller's.
//
// # Contract
//
// Lock returns either the lock, held until the returned io.Closer is
// closed, or an error and no lock. A lock held by another holder is
// reported at once as an *fs.PathError (Op "lock", the path) wrapping the
// caller's error, unless the caller asked to wait: then Lock polls until
// the lock is free or its context ends, and on the context's end wraps
// both the caller's error and the context's. Lock creates the lock file
// when missing and never removes it; a crash releases the lock (the file
// system's lock dies with the process) and leaves the file.
//
// Lock may be called concurrently, for one path or for many.
package registry
