// Package commit is the group commit of one open session: the pipeline
// that makes the records appended to the session durable, sharing one
// write and one sync among the records queued since the last sync began.
// It knows the records only as values of its type parameter R and the
// bytes of the session's chunk writer (internal/chunkwriter); what a
// record is, how the bytes are made durable (a sync of the chunk, or a
// journal) and what publishing a record means are the Log's, which the
// caller (the root package's open session) passes in.
//
// Protocol of one append, with the session's mutex (the sync.Locker
// passed to New) held: the caller queues its lines in the chunk writer
// (chunkwriter.Writer.Enqueue), adds its records (Add) and joins the open
// commit group (Join); then Commit waits until the group is durable and
// returns with the mutex released. The first caller to join a group
// leads it: once the sync before it has ended, and perhaps after letting
// more appends join (see Gathering), it takes the chunk writer's queue,
// releases the mutex, has the Log write and sync it (Log.Write), takes
// the mutex back, publishes the group's records (Log.Publish) and wakes
// the group's other callers, which wait without taking the mutex again,
// and the next group's leader. Appends that come during a sync join the
// next group, so N concurrent appenders share a few writes and syncs
// instead of N.
//
// # Gathering
//
// When the last sync covered more than one record, its callers are likely
// to append again at once: a new leader first yields the mutex, for
// GatherWait at most, until as many records as that sync covered have
// joined besides its own, and stops early once half of them have come and
// the next lags behind by GatherLag. A lone writer never waits.
//
// # Pending groups
//
// A Log may return from Write before the data is durable, with a
// pending to wait for (an object store's Create in flight): the leader
// then lets the next group's leader write at once and waits for its
// pending without the mutex. Groups are published in the order they were
// written: a group whose pending returned waits for the groups before
// it. A pending that fails is a failed sync for its group and every
// group written or waiting after it (their records' state is unknown;
// the session stops). A write that fails while groups before it are
// pending first lets them end (they may be acknowledged), then drops its
// records and those after them, as any failed write. Settle waits for
// every pending group.
//
// # What a return promises
//
//   - Commit returning nil: every record of the caller's group was
//     written by a Log.Write that returned no error, after the records
//     were queued, and published (Log.Publish) before Commit returned:
//     the records are as durable as Log.Write makes them (with the root
//     package's Log, on stable storage: synced in the chunk, or in the
//     journal). No record is published before the write that carries it
//     has returned, and the records are published in the order they were
//     added.
//   - Commit returning an error from a failed write (Log.Write's
//     writeErr, which does not wrap durable.ErrUnsynced): nothing of the
//     records in flight reached the chunk (the Log left its data ending
//     where the write began). Every record in flight is dropped, not only
//     the group's, since the later ones name dropped parents; the Log is
//     told which (Log.Dropped); the chunk writer's end of data goes back
//     to where the write began (CutBack), and every waiting group fails
//     with the error. The session goes on writing.
//   - Commit returning an error from a failed sync (Log.Write's syncErr,
//     or a writeErr wrapping durable.ErrUnsynced): the records' state on
//     disk is unknown, each of them may be there whole or be absent. They
//     are dropped from memory, none is acknowledged, every waiting group
//     fails with the error wrapped with durable.ErrUnsynced, and Log.Stop
//     is told, so that the session refuses writes from then on.
//   - Settle returning nil: no record is in flight; those that were are
//     written, durable and published, and when their bytes went through a
//     journal the chunk itself was synced too (a chunk settled is durable
//     by itself, ready to be sealed or closed). Settle keeps the mutex
//     held while it writes, and releases it only to wait for a leader's
//     sync that was running.
//   - Add, Join, Inflight, Syncing: nothing; they change or read memory.
//
// # What a crash leaves
//
// The pipeline writes nothing itself: a crash leaves what the Log's write
// and sync leave. In the chunk, the acknowledged records whole, then
// perhaps any part of the bytes of the group being written.
//
// # Concurrency
//
// Every method is called with the session's mutex held (Commit returns
// with it released). Log.Write is called by a leader without the mutex,
// one at a time (no second write starts before the first returns), or by
// Settle with it held; the Log's other methods are called with it held.
package commit
