package sessionstore

import (
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/journal"
	"github.com/sessionstore/sessionstore/internal/seam"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// Defaults used for zero Options fields.
const (
	DefaultChunkSize     = 8 << 20  // 8 MiB
	DefaultMaxRecordSize = 64 << 20 // 64 MiB
	DefaultBlobThreshold = 1 << 20  // 1 MiB
	// DefaultStringThreshold is the default Options.StringThreshold.
	DefaultStringThreshold = 128 << 10 // 128 KiB
	// DefaultJournalSize is the default Options.JournalSize.
	DefaultJournalSize = journal.DefaultSize

	// DefaultMaxOpenSessions is the default Options.MaxOpenSessions.
	DefaultMaxOpenSessions = 256
	// DefaultReadCacheBytes is the default Options.ReadCacheBytes.
	DefaultReadCacheBytes = 8 << 20 // 8 MiB

	CompressionZstd = "zstd"
	CompressionNone = "none"
	DefaultFileMode = fs.FileMode(0o600)
	DefaultDirMode  = fs.FileMode(0o700)

	// DefaultTrashFor is the default Options.TrashFor: a deleted session
	// stays in the trash, whole, for a week.
	DefaultTrashFor = 7 * 24 * time.Hour
	// NoTrash, as Options.TrashFor, removes deleted sessions at once.
	NoTrash = time.Duration(-1)
	// DefaultKeepRecent is the default PrunePolicy.KeepRecent.
	DefaultKeepRecent = time.Hour

	// DefaultLeaseTime is the default Options.LeaseTime.
	DefaultLeaseTime = 30 * time.Second
	// DefaultRemoteTimeout is the default Options.RemoteTimeout.
	DefaultRemoteTimeout = 30 * time.Second
	// DefaultFollowInterval is the default Options.FollowInterval.
	DefaultFollowInterval = 100 * time.Millisecond
	// DefaultDeltaSyncInterval is the default Options.DeltaSyncInterval.
	DefaultDeltaSyncInterval = 20 * time.Millisecond
	// DefaultTailInterval is the default Options.TailInterval.
	DefaultTailInterval = 5 * time.Millisecond
	// DefaultDeltaSyncBytes is the default Options.DeltaSyncBytes.
	DefaultDeltaSyncBytes = 256 << 10
	// DefaultRemoteWindow is the default Options.RemoteWindow.
	DefaultRemoteWindow = seam.Window
	// maxRemoteWindow bounds Options.RemoteWindow.
	maxRemoteWindow = seam.MaxWindow

	// maxRecordSizeLimit bounds MaxRecordSize so that a record's length
	// always fits the index's 32-bit fields with room for its framing:
	// the line format's limit.
	maxRecordSizeLimit = eventline.MaxRecordSize
)

// Durability is when an Append to a session on object storage
// (Options.Remote) returns.
type Durability int

const (
	// DurableRemote: an Append returns nil once its events are durable
	// in the local chunk (its fdatasync) and in the object store (the
	// Create of their log object, and of every one before it,
	// succeeded). Losing the machine for good loses nothing
	// acknowledged.
	DurableRemote Durability = iota
	// DurableLocal: an Append returns nil once its events are durable
	// in the local chunk. The Create of their log object was issued
	// before it returned and ends within Options.RemoteTimeout: stored,
	// or failing the session (the next call's ErrRemote or ErrFenced).
	// At most Options.RemoteWindow commit groups are acknowledged and
	// not yet stored: an Append waits while that many are, and a new
	// chunk and a sealing wait until none is, so those groups all lie
	// in the session's newest chunk.
	//
	// The loss window: events acknowledged and not yet stored are lost
	// if the machine's disk is lost before they are, or if another Store
	// takes the session over before they are (this one wrote and renewed
	// nothing for LeaseTime: it crashed, or was cut off, and did not come
	// back). Otherwise nothing acknowledged is lost: the next open of
	// the session in the same directory (this Store's after a failed
	// Create, or a Store opened there after a crash) stores them first,
	// as log objects of its own lease, before it writes anything else
	// (remote.go, "Acknowledged after the local sync"). Other Stores (an
	// open elsewhere, a follower) see events once they are stored.
	DurableLocal
)

// String returns the level's name: DurableRemote, DurableLocal, or
// Durability(n) for another value.
func (d Durability) String() string {
	switch d {
	case DurableRemote:
		return "DurableRemote"
	case DurableLocal:
		return "DurableLocal"
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}

// Options configure a Store. The zero value (or a nil *Options) selects the
// defaults. Open copies the options; changing them afterwards has no effect.
type Options struct {
	// ChunkSize is the size at which the active chunk file is sealed and a
	// new one started. A record larger than ChunkSize gets a chunk of its
	// own. Default DefaultChunkSize.
	ChunkSize int64
	// MaxRecordSize is the largest record, in bytes of compact JSON, that
	// Append accepts. Default DefaultMaxRecordSize; at most 1 GiB.
	MaxRecordSize int
	// BlobThreshold is the size, in bytes of compact JSON, above which a
	// record is stored as a content-addressed, compressed blob instead of
	// inline in its chunk line (see blob.go). Zero selects
	// DefaultBlobThreshold; a negative value stores every record inline.
	//
	// An inline record is durable in the append's one write and sync, and
	// is compressed with its neighbours when its chunk is sealed; a blob
	// costs its own file and two more sync rounds (file and directory,
	// then the line that names it), is compressed alone, and is stored
	// once however many events name it. The 1 MiB default keeps tool
	// results of tens and hundreds of KiB (file reads, test logs) on the
	// append's one sync round, and sends the rare larger one to a blob.
	BlobThreshold int
	// StringThreshold is the length, in bytes of a JSON string's form
	// between its quotes, from which a string of a record is stored
	// apart, once, as a blob of its own that the record's blob refers to
	// (see blob.go, "String blobs"): the same screenshot, or the same
	// file's content, in many records costs one copy, and Load still
	// returns every record byte for byte. A record holding such a string
	// is stored as a blob whatever its size. Zero selects
	// DefaultStringThreshold; a negative value stores no string apart;
	// a value below 64 is 64. Sessions of format 2 (made by earlier
	// builds, see Upgrade) store no string apart.
	//
	// The 128 KiB default catches screenshots (base64 images of 200 KB
	// and more) and keeps the tool results of tens of KiB, which rarely
	// repeat, inline on the append's one sync round: a string stored
	// apart costs the record a blob and itself a file, synced beside it.
	StringThreshold int
	// Compression selects how sealed chunks are stored: CompressionZstd
	// (the default for "") compresses each chunk when it fills up, keeping
	// random access (see internal/zchunk); CompressionNone leaves them as
	// plain JSONL. Reading handles both, but a root keeps the mode it was
	// created with: Open refuses the other one with ErrCompressionMismatch
	// until ConvertCompression converts the root.
	Compression string
	// FileMode and DirMode are the permissions of new files and
	// directories. Defaults DefaultFileMode and DefaultDirMode.
	FileMode fs.FileMode
	DirMode  fs.FileMode
	// Logger receives repairs made by reconciliation and other notable
	// events. Nil means silent.
	Logger *slog.Logger
	// Prices is what each model's tokens cost, per million tokens, by the
	// model's name as messages record it (Message.Model, else the
	// session's Meta.Model): Store.Usage reports the cost of the models it
	// names, and lists the others as unpriced (UsageTotals). Open copies
	// the map. Nil: no cost.
	Prices map[string]Price

	// MaxOpenSessions bounds the sessions a Store keeps open (each holds up
	// to three file descriptors: its lock, and once it appends, its active
	// chunk and index; none in a read-only store). When a
	// session is needed and the bound is reached, the least recently used
	// idle session is closed first, exactly as Close would (HEAD
	// checkpointed, lock released); it reopens on next use. Sessions in use
	// by a call are never closed, so the bound can be exceeded while more
	// calls than that run at once. Default DefaultMaxOpenSessions.
	MaxOpenSessions int
	// ReadCacheBytes bounds the memory a Store keeps of sealed chunks'
	// blocks decompressed for reads of single records (a search hit, an
	// event read by id), so that reading them again costs a read of the
	// compressed bytes instead of their decompression. A kept block is
	// used only while the file holds the very bytes it came from: the
	// cache never changes what a read returns, nor the damage it reports.
	// Loads of whole runs of events decompress straight into their
	// buffers and keep nothing. On Linux the Store also keeps up to 64
	// sealed chunk files open between such reads, so that a read costs
	// two status calls instead of opening the file and reading its frame
	// table; a kept file is used only while its path's
	// status (device, inode, size, times) is the one it was opened with
	// and had been for two seconds, closed by the next such read once
	// unused for 30 seconds (or when 64 others are more recent), by
	// Delete and by Close. Default DefaultReadCacheBytes; negative: none
	// kept, no file kept open.
	ReadCacheBytes int64
	// WaitForLock makes a call that finds its session locked by another
	// process wait for the lock, until the call's context is done, instead
	// of failing with ErrLocked. The wait polls every few milliseconds.
	// Without it a lock found held is tried for 50 ms before ErrLocked:
	// a process that starts programs shares a lock file it has just
	// closed with each child for the instant between the fork and the
	// exec (internal/registry's Lock).
	WaitForLock bool
	// ReadOnly opens the store for reading beside a writer in another
	// process: List, Meta, Head, NextParent, Load, LoadPath, FullPath,
	// Event, Tree, Children, Abandoned, InterruptedToolCalls, Resolve,
	// Verify, Revision, Subscribe and Publish work; every call that would
	// write returns
	// ErrReadOnly. A read-only store takes no lock and never creates,
	// writes, truncates, renames or removes a file. Each call sees every
	// event whose Append returned before the call started, and perhaps
	// some being appended (durable, not yet acknowledged; through a
	// writer's journal (JournalSize), never one a crash can take back:
	// see journal.go), but never a torn one; it looks again when the session's Revision changes
	// (see readonly.go).
	//
	// With a Remote, ReadOnly makes the Store a follower (follow.go): it
	// reads sessions that Stores on other machines write to the object
	// store, and writes nothing there: no lease, no marker, so it is
	// never fenced and never delays a writer. Its directory is its cache
	// of what it read: it is made when missing, and the follower writes
	// the sessions it reads into it (each under its LOCK, as a writer
	// would), so it must not be a writing Store's directory. Each call on
	// a session first reads what the log gained since the follower's last
	// look (one listing, and a read of each new object), so it sees every
	// event whose Append returned before the call started; Subscribe
	// polls so every Options.FollowInterval.
	ReadOnly bool

	// DurableDeltas makes Publish write each delta to the session's
	// delta stream (docs/streams.md) as well as deliver it: a write
	// system call per delta, with a sync (fdatasync) in the background
	// within DeltaSyncInterval, so that a process that dies loses no
	// delta Publish returned for, and a power loss loses at most the
	// deltas of the last DeltaSyncInterval. Every event appended to the
	// session then also writes a marker to the stream, which supersedes
	// the deltas before it. After a crash, PartialOutput returns the
	// deltas no event superseded; Tail follows the stream from another
	// process. Encrypted sessions keep their deltas live only (the stream
	// is not encrypted). Ignored by a read-only store.
	DurableDeltas bool
	// DeltaSyncInterval bounds how long a durable delta waits for its
	// sync; 0 selects DefaultDeltaSyncInterval.
	DeltaSyncInterval time.Duration
	// TailInterval is how often a Tail that has read everything looks
	// for more (a listing of the stream's directory, a read of its newest
	// segment, a look at the log's revision); 0 selects
	// DefaultTailInterval.
	TailInterval time.Duration
	// DeltaSyncBytes of durable deltas waiting for their sync start it at
	// once; 0 selects DefaultDeltaSyncBytes.
	DeltaSyncBytes int

	// FollowInterval is how often a follower (ReadOnly with a Remote)
	// polls the log of a session it has subscribers for; 0 selects
	// DefaultFollowInterval. Each poll costs one listing request, and a
	// read of each new log object.
	FollowInterval time.Duration

	// DeferCreate makes Create write nothing: it checks and completes the
	// metadata and returns it, and the session's files (and, with a
	// Remote, its objects) are made by its first write through this
	// Store, an Append, AppendBatch or UpdateMeta, just before that write,
	// exactly as Create makes them otherwise. A harness that creates a
	// session for every window it opens then leaves nothing behind for
	// the windows that never started one. Until that first write the
	// session is this Store's knowledge alone: List, Meta, Load, Head and
	// every other Store or process see no session (ErrNotFound), a crash
	// or Close forgets it, and nothing of it is on disk. A crash during
	// the first write may leave the session made and empty, as a crash
	// after an immediate Create does. See defer.go for what two creators
	// of one id get.
	DeferCreate bool

	// TrashFor is how long Delete and Prune keep a deleted session in the
	// root's trash, whole, before it is removed for good (trash.go):
	// meanwhile Undelete brings it back, Trash lists it and Purge removes
	// it at once. Each deleted session carries its own deadline, set by
	// the Store that deleted it; a writable Store removes the expired
	// ones when it opens and at each Delete, Prune, Purge and GCStore.
	// Zero selects DefaultTrashFor; NoTrash (any negative duration)
	// removes deleted sessions at once, as Purge does. With Remote the
	// object store's copy is deleted at once whatever TrashFor says (the
	// delete marker is final), and the local files with it.
	TrashFor time.Duration

	// Keys, when set, makes every session this Store creates encrypted
	// (encrypt.go, docs/encryption.md): its records are sealed with
	// AES-256-GCM under a data key of its own, which is stored only
	// wrapped by Keys. Sessions of the root that are encrypted need Keys
	// to be read or written; without it they fail with a *KeyError
	// (ErrKeyUnavailable). Sessions created without it stay plain. With
	// Remote, each session's key record is an object of its own
	// (encrypt_remote.go).
	Keys KeyProvider

	// Remote keeps every session in an object store, the system of
	// record, with the Store's directory as their cache (see ObjectStore
	// and the package doc, Object storage). An Append then returns nil
	// only when its events are durable in the local chunk and in the
	// object store. Nil (the default) keeps sessions on the local disk
	// only. A read-only store cannot have a remote.
	Remote ObjectStore
	// LeaseTime is how long a session's holder must have written nothing
	// and not renewed its lease, on the object store's clock, before
	// another Store may take the session over without its release (a
	// holder that died). An open session renews its lease while idle,
	// every LeaseTime/3 (a LIST and a small PUT); a holder taken over all the same
	// (paused, cut off) gets ErrFenced from its next write. Default
	// DefaultLeaseTime.
	LeaseTime time.Duration
	// RemoteTimeout bounds each object store call of the commit pipeline
	// and of sealing, which serve many callers and so take none's context.
	// Default DefaultRemoteTimeout.
	RemoteTimeout time.Duration
	// RemoteWindow is how many commit groups' log objects a remote
	// session keeps in flight: a group's Create is issued without waiting
	// for the groups before it (it is acknowledged once it and they are
	// stored: remote.go, "Several Creates in flight"). 1 waits for each
	// Create before the next group's, which spends fewest requests where
	// the object store is bound by its CPU (a server on the same
	// machine); more shortens the tail of appends where its latency is
	// a network's. 0 selects DefaultRemoteWindow; at most 64.
	RemoteWindow int
	// RemoteKeepLog turns marker compaction off: no log object of a
	// remote session is deleted (remote.go, "Numbers freed by
	// compaction"). Set it on every Store of a bucket that Stores of
	// builds before compaction still use: they do not check that their
	// marker is the newest, so a number compaction frees could take a
	// stalled one's marker; once every Store runs a build with
	// compaction, clear it.
	RemoteKeepLog bool
	// RemoteDurability says when an Append to a remote session returns:
	// DurableRemote (the default) once its events are in the local chunk
	// and in the object store; DurableLocal once they are in the local
	// chunk, with the object store's Create issued and following (see
	// Durability for the loss window that buys).
	RemoteDurability Durability

	// JournalSize is the size of the journal a writing Store shares
	// among its sessions (journal/<owner>.wal under the root,
	// preallocated in the background once the Store holds two sessions
	// open; see journal.go): 0 selects DefaultJournalSize; otherwise at
	// least 256 KiB and at most 1 GiB. Appends to every session the Store
	// holds then share one write and one fdatasync of it, and chunks are
	// synced at checkpoints; a commit of 32 KiB or more, or of a Store
	// that never held two sessions open, syncs its own chunk. A negative value turns the journal off: each session
	// syncs its own chunk on every commit, as does every session of a
	// store with a Remote (whose appends wait for the object store).
	JournalSize int64

	// Test seams, unexported: the filesystem, the clock and the id source,
	// and keepPlainOnClose, which leaves the active chunk plain at Close
	// (sealOnClose), for tests of the states a plain newest chunk can be in.
	keepPlainOnClose bool
	storeID          uuid.UUID // set by Open: the holder named in a remote session's log
	fetch            *fetchFS  // set by Open with a Remote: fs, which fetches deferred chunks
	// recoverTail is the Store's (set by Open with a Remote): a session
	// acknowledging after the local sync whose Create failed is opened
	// again in the background, which stores what it acknowledged.
	recoverTail func(uuid.UUID)
	fs          vfs.FS
	// hostFS is fs as given, before Open confines it to the store's
	// directory: the workspace files (workspace.go) are outside it, each
	// directory confined on its own.
	hostFS vfs.FS
	jr     *storeJournal // set by Open for a writing store: the shared journal (journal.go)
	// searchDirty is set by Open: the sessions appended to since the
	// search index last caught up (searchindex.go).
	searchDirty *dirtySessions
	frames      *zchunk.Cache     // set by Open: ReadCacheBytes of frames (nil: none)
	dead        *journal.DeadLogs // set by Open: the dead journal take-overs last read
	now         func() time.Time
	newID       func() (uuid.UUID, error)
}

// defaultBlobThreshold is what a zero BlobThreshold selects:
// DefaultBlobThreshold, except in this package's tests, whose TestMain sets
// it once, before any test runs, to the 16 KiB default of earlier builds,
// so that the many tests of blobs (crash points, faults, GC, Verify) keep
// making them with records of tens of KiB. Nothing else writes it.
var defaultBlobThreshold = DefaultBlobThreshold

// defaultJournalSize is what a zero JournalSize selects:
// DefaultJournalSize, except in this package's tests, whose TestMain sets
// it once to journal.MinSize, so that the many stores of the tests (in
// memory, copied at every crash point) do not each preallocate 64 MiB.
var defaultJournalSize int64 = DefaultJournalSize

// withDefaults returns a validated copy of o with defaults filled in.
func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	c.Prices = maps.Clone(c.Prices)
	switch {
	case c.ChunkSize < 0:
		return c, fmt.Errorf("%w: ChunkSize %d is negative", ErrInvalidOptions, c.ChunkSize)
	case c.MaxRecordSize < 0 || c.MaxRecordSize > maxRecordSizeLimit:
		return c, fmt.Errorf("%w: MaxRecordSize %d is outside 0..%d", ErrInvalidOptions, c.MaxRecordSize, maxRecordSizeLimit)
	case c.MaxOpenSessions < 0:
		return c, fmt.Errorf("%w: MaxOpenSessions %d is negative", ErrInvalidOptions, c.MaxOpenSessions)
	case c.FileMode&^fs.ModePerm != 0 || c.DirMode&^fs.ModePerm != 0:
		return c, fmt.Errorf("%w: FileMode and DirMode take permission bits only", ErrInvalidOptions)
	case c.LeaseTime < 0 || c.RemoteTimeout < 0:
		return c, fmt.Errorf("%w: LeaseTime and RemoteTimeout cannot be negative", ErrInvalidOptions)
	case c.RemoteWindow < 0 || c.RemoteWindow > maxRemoteWindow:
		return c, fmt.Errorf("%w: RemoteWindow %d is outside 0..%d", ErrInvalidOptions, c.RemoteWindow, maxRemoteWindow)
	case c.RemoteDurability != DurableRemote && c.RemoteDurability != DurableLocal:
		return c, fmt.Errorf("%w: RemoteDurability %d is neither DurableRemote nor DurableLocal", ErrInvalidOptions, c.RemoteDurability)
	case c.FollowInterval < 0:
		return c, fmt.Errorf("%w: FollowInterval cannot be negative", ErrInvalidOptions)
	case c.DeltaSyncInterval < 0 || c.DeltaSyncBytes < 0 || c.TailInterval < 0:
		return c, fmt.Errorf("%w: DeltaSyncInterval, DeltaSyncBytes and TailInterval cannot be negative", ErrInvalidOptions)
	case c.JournalSize > 0 && (c.JournalSize < journal.MinSize || c.JournalSize > journal.MaxSize):
		return c, fmt.Errorf("%w: JournalSize %d is outside %d..%d", ErrInvalidOptions, c.JournalSize, journal.MinSize, journal.MaxSize)
	}
	if c.JournalSize == 0 {
		c.JournalSize = defaultJournalSize
	}
	if c.FollowInterval == 0 {
		c.FollowInterval = DefaultFollowInterval
	}
	if c.DeltaSyncInterval == 0 {
		c.DeltaSyncInterval = DefaultDeltaSyncInterval
	}
	if c.TailInterval == 0 {
		c.TailInterval = DefaultTailInterval
	}
	if c.DeltaSyncBytes == 0 {
		c.DeltaSyncBytes = DefaultDeltaSyncBytes
	}
	if c.LeaseTime == 0 {
		c.LeaseTime = DefaultLeaseTime
	}
	if c.RemoteTimeout == 0 {
		c.RemoteTimeout = DefaultRemoteTimeout
	}
	if c.RemoteWindow == 0 {
		c.RemoteWindow = DefaultRemoteWindow
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = DefaultChunkSize
	}
	switch c.Compression {
	case "":
		c.Compression = CompressionZstd
	case CompressionZstd, CompressionNone:
	default:
		return c, fmt.Errorf("%w: Compression %q is neither %q nor %q", ErrInvalidOptions, c.Compression, CompressionZstd, CompressionNone)
	}
	if c.BlobThreshold == 0 {
		c.BlobThreshold = defaultBlobThreshold
	}
	switch {
	case c.StringThreshold == 0:
		c.StringThreshold = DefaultStringThreshold
	case c.StringThreshold > 0 && c.StringThreshold < blob.MinString:
		c.StringThreshold = blob.MinString
	}
	if c.MaxRecordSize == 0 {
		c.MaxRecordSize = DefaultMaxRecordSize
	}
	if c.TrashFor == 0 {
		c.TrashFor = DefaultTrashFor
	}
	if c.MaxOpenSessions == 0 {
		c.MaxOpenSessions = DefaultMaxOpenSessions
	}
	if c.ReadCacheBytes == 0 {
		c.ReadCacheBytes = DefaultReadCacheBytes
	}
	if c.FileMode == 0 {
		c.FileMode = DefaultFileMode
	}
	if c.DirMode == 0 {
		c.DirMode = DefaultDirMode
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.fs == nil {
		c.fs = vfs.Default
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.newID == nil {
		c.newID = uuid.NewV7
	}
	return c, nil
}
