// Package registry holds what a Store needs to keep one open copy of a
// session per process: the table of the sessions it has open (Table) and
// the session lock (Lock), the lock file every writer of a session takes
// before opening it, so that two writers (two Stores, in this process or
// another) never write one session at once. The package knows nothing of
// the store's types: a Table holds the caller's session values (S) and
// keeps the caller's values for sessions closed while open (K), and the
// error a held lock is reported with is the caller's.
//
// # The table
//
// A Table maps a session id to one Entry: the caller's value, the number
// of calls using it, and whether its open has ended. Its methods may be
// called concurrently. Its mutex is held only while its maps and counts
// change, never while a session opens or closes: Config.CloseIdle and
// Hold's closeValue run without it. Config.New and the functions given to
// Keep and Forget run with it held and must not call the table. A caller
// may call the table while it holds a session's own mutex: the lock order
// is the session's mutex, then the table's.
//
// When Acquire returns an entry without error, the caller is counted as
// using it until it calls Release, and the entry was registered for the
// id (it may have been forgotten since). Either the caller registered it
// (open true) and must open it and then call Opened, or the open of the
// call that registered it had ended when Acquire returned (open false):
// the value then says whether it succeeded. No session of the id was
// being closed when it was registered: Acquire waits for such a close to
// end (or for ctx), so that the next open of a session never overlaps the
// close of the last.
//
// Eviction closes only idle sessions: when more sessions than Config.Max
// are registered, the table closes the ones no call uses, least recently
// used first (Config.CloseIdle), as Acquire registers a session and as
// Release ends the last use of one. A session in use is never closed by
// the table, so more than Max may be registered while calls use them.
// While a session is being closed its id is marked closing: Acquire,
// CloseOne and Hold of it wait until CloseIdle returns. CloseOne closes a
// registered session the same way once its last call ends, waiting for it
// by polling every few milliseconds while ctx allows.
//
// Hold takes a session away from every call: once no call uses it
// (polling as CloseOne does) it closes it if registered and returns with
// the id marked closing, so that every Acquire, CloseOne and Hold of the
// id waits until the release function is called. A Hold that returns
// ctx's error holds nothing.
//
// What the caller keeps for a session (Keep, and Forget's keep) stays
// until Take returns it or a release of Hold that deleted the session
// forgets it; closing and forgetting sessions leave it alone. Forget
// removes an entry at once (a session its call left closed): the calls
// using it keep it until they release it, it never becomes idle, and the
// next Acquire registers a new entry.
//
// The table is in memory only: a crash leaves nothing of it, and what it
// kept is lost with the process.
//
// # The lock
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
