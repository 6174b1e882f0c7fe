// Package catalogue is a derived copy of every session's metadata at the
// store root, so that a listing reads one file instead of every
// session.json, and a listing of the newest sessions (Backwards) reads
// only the newest part of it. session.json stays the one source of
// truth: the catalogue is rebuilt from the session.json files when it is
// missing, damaged or stale, and a reader that cannot trust it (for one
// session or for all) reads session.json instead. The store above reads
// session.json for it (Config.ReadMeta) and turns its metadata into the
// package's Meta and back; the package knows nothing of the store's
// types.
//
// # Files
//
//   - catalogue.jsonl (Name), the snapshot: a header line (its generation
//     and the sessions directory's stamp when it was written), then one
//     line per session sorted by id: the metadata and the stamp
//     (modification time and size, Stamp) session.json had when the line
//     was written, or, for a session.json that could not be read, the id
//     and stamp alone.
//   - catalogue.log (LogName), the log: a header line (the snapshot's
//     generation), then records appended since the snapshot was written:
//     pending (a session.json of this id is about to change) and commit
//     (it changed: the new metadata and stamp). Every record also carries
//     the sessions directory's stamp after the writer's change.
//   - catalogue.lock (LockName), the lock file writers take
//     (vfs.FS.Lock) around each append and rewrite; readers take no lock.
//
// Every line is a CRC-32C framed JSON object (internal/jsonl) with its
// members in a fixed order (AppendRecord), so that decoding is positional
// (DecodeRecord) and a line has one encoding; a string that needs escapes
// falls back to encoding/json.
//
// # The protocol
//
// A writer, holding the session's lock, changes session.json so:
//
//  1. WillWrite: under catalogue.lock, append a pending record for the
//     id (a Create first makes the session directory, under the lock, so
//     the record's directory stamp includes it), then sync the log, under
//     the lock or after releasing it. When WillWrite returns nil, the
//     record is durable.
//  2. once WillWrite returned, replace session.json durably
//     (durable.ReplaceFile);
//  3. Wrote: under catalogue.lock, append a commit record with the new
//     metadata and session.json's new stamp, without a sync. When Wrote
//     returns nil the record is written, not durable.
//
// A Catalogue batches the appends of its goroutines: one lock, one write
// and one sync serve every append of a batch, each record still written
// after its own step ran.
//
// A pending record another writer reads before its sync returned may be
// lost to a crash, and with it nothing: its session.json is not written
// yet. A rewrite keeps such a record, synced, and a later sync of the log
// covers it too.
//
// A reader folds the log over the snapshot (Load, State): a commit
// replaces the id's entry and closes every pending record of the id
// before it; an id with a pending record and no later commit is read from
// session.json, which a crash at any point leaves whole, old or new (or
// missing: a Create that did not finish is not a session). The commit
// carries the metadata, not the pending record, so that a commit is true
// by itself: the pending record of a Create that lost a race never wrote
// session.json and is closed by the winner's commit, or stays open and
// costs its readers one read. A lost commit (unsynced) costs the same.
// Bytes after the last whole line, or bad lines with no good line after
// them, are an unsynced tail and are ignored: ignoring a commit only
// sends readers to session.json, and a pending record whose sync did not
// return guarded no write. A bad line followed by good ones is damage.
// A damaged byte can pass for such a tail (one that joins the last two
// lines hides a synced pending record with its commit), so a log with an
// ignored tail is not taken for current (Current) until a writer
// rewrites it: the listings then check each session.json's stamp.
// For the same reason a later append may sync the log again after a
// failed sync (which the store never does for its own data): what such a
// sync may have lost is at most unsynced commits and the failed pending
// record, whose write never started.
//
// A Delete follows step 1 alone: under catalogue.lock it moves the
// session directory aside (WillWrite's change), then appends a synced
// pending record, stamped with the sessions directory as it is after the
// move, and no commit follows. Readers of that id go to session.json,
// find none, and leave the session out (as for a Create that did not
// finish); Backwards keeps its fast path, since the stamp is current. A
// rewrite drops the pending records and entries of ids whose directory is
// gone. A crash between the move and the record leaves the directory
// stamp behind: Backwards cannot answer (the store lists every session
// instead), and the next writer rewrites.
//
// A writer rewrites the catalogue (the snapshot, then a new log of the
// open pending records, each by durable.ReplaceFile, a new generation)
// when the log passes MaxLog records (fold: the log's commits folded into
// the snapshot; Compact does it at once), when it is missing or damaged,
// or when the sessions directory's stamp is not the one the catalogue
// last recorded (rebuild: the snapshot made again from the session.json
// files). A log of another generation than the snapshot (a crash between
// the two renames) is damage: readers take the catalogue for unusable
// until the next writer rewrites it.
//
// # What is detected
//
// Every writer follows the protocol, so while the sessions directory's
// stamp is the last one recorded and the log ends with a whole good line
// (Current, one stat; Backwards checks it too) the catalogue names every
// session and each entry without an open
// pending record is what its session.json holds: the store's listings
// then read nothing else. What they do not see on that path: a
// session.json changed in place by hand, outside the protocol (the
// directory's stamp changes only when an entry is added, removed or
// renamed in it; touch(1) on the directory makes the change seen), a
// directory added or removed by hand within the tick of the catalogue's
// last change, or a session.json dropped by hand into an existing
// directory that had none. When the stamp differs, the store's List
// lists the directory and trusts an entry only while session.json's
// stamp is the recorded one (Entry.Fresh), reading the file on a
// mismatch; not detected then: a session.json edited by hand to the same
// size within one tick of the file system's clock (or one whose
// modification time is set back). The snapshot and the
// log are covered by their CRCs; a damaged one is rebuilt by a writer and
// read around by a read-only store (State returns nil), which writes
// nothing and reads the session.json files.
//
// Several Stores, in one process or several, may share the files: each
// takes catalogue.lock for every append and rewrite, and a writer checks
// that the log still ends as its last batch left it before appending
// (else it reads the log again), so that no writer's records are written
// over.
package catalogue
