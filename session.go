package sessionstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/catalogue"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// formatVersion is written to the session.json of every new session. A
// store refuses sessions with a version it does not know rather than
// misreading them. Format 2 added the parent's location to each chunk line
// ("parent_loc", see internal/eventline.AppendEvent); format 3 added split
// blobs (a record's long strings stored apart, once: blob.go, "String
// blobs"), which a build that reads format 2 at most would take for
// damage. This build reads formats 1 and 2 too and appends to them in
// their own format, so that older builds still read them; Upgrade moves
// a session to format 3.
const (
	formatVersion = 3
	oldestFormat  = 1
	// splitFormat is the first format whose blobs may be split.
	splitFormat = 3
)

// Meta is a session's metadata, stored in session.json, and copied into
// the store's catalogue (internal/catalogue), which List and ListRecent read.
type Meta struct {
	ID         uuid.UUID         `json:"id"`
	Name       string            `json:"name,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	Model      string            `json:"model,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
	Labels     map[string]string `json:"labels,omitempty"`

	// ForkedFrom is set on a session made by Fork: its history up to and
	// including ForkedFrom.Event is the session ForkedFrom.Session's,
	// read from that session's files, not copied.
	ForkedFrom *ForkPoint `json:"forked_from,omitempty"`
	// ParentSession and SpawnedBy are set on a subagent's session: the
	// session whose turn spawned it, and the event of that session that
	// did. Depth is the delegation depth: 0 for a top-level session, one
	// more than its parent's for a subagent.
	ParentSession uuid.UUID `json:"parent_session,omitzero"`
	SpawnedBy     uuid.UUID `json:"spawned_by,omitzero"`
	Depth         int       `json:"depth,omitempty"`

	// Encrypted is set by Create when the Store has Options.Keys: the
	// session's records are stored sealed under its own data key
	// (encrypt.go). What a caller puts here is ignored; it never changes.
	Encrypted bool `json:"encrypted,omitempty"`

	// Usage is the session's token totals as its session.json records
	// them, with the watermark they cover (usage.go: RecordedUsage); nil
	// for a session without events, or one written before the store kept
	// totals. Written by the store at Flush and Close; what a caller puts
	// here is ignored. Store.Usage gives the exact totals.
	Usage *RecordedUsage `json:"usage,omitempty"`
}

// ForkPoint names an event of another session: where a fork's own history
// starts (Meta.ForkedFrom).
type ForkPoint struct {
	Session uuid.UUID `json:"session"`
	Event   uuid.UUID `json:"event"`
}

// metaRecord is the on-disk form of session.json.
type metaRecord struct {
	Format int `json:"format"`
	Meta
}

func (m Meta) clone() Meta {
	if m.Labels != nil {
		labels := make(map[string]string, len(m.Labels))
		for k, v := range m.Labels {
			labels[k] = v
		}
		m.Labels = labels
	}
	if m.ForkedFrom != nil {
		f := *m.ForkedFrom
		m.ForkedFrom = &f
	}
	if m.Usage != nil {
		u := *m.Usage
		u.Models = slices.Clone(u.Models)
		m.Usage = &u
	}
	return m
}

func (s *Store) sessionDir(id uuid.UUID) string {
	return layout.SessionDir(s.dir, id)
}

// checkMeta reports metadata session.json cannot hold as it is, with
// ErrInvalidMeta: a string that is not valid UTF-8 (JSON would store it
// changed), a time JSON cannot encode (a year past 9999), a subagent's
// lineage that does not hold together (checkLineage, subagent.go), or
// more than maxMetaSize of it, with the longest UpdatedAt a later write
// can give it (so that no later write of the session fails for its size),
// and without the usage totals (Meta.Usage), which a write leaves out
// when they do not fit.
func checkMeta(m Meta) error {
	strs := []string{m.Name, m.WorkingDir, m.Model}
	for k, v := range m.Labels {
		strs = append(strs, k, v)
	}
	for _, s := range strs {
		if !utf8.ValidString(s) {
			return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidMeta, s)
		}
	}
	for _, t := range []time.Time{m.CreatedAt, m.UpdatedAt} {
		if y := t.Year(); y < 0 || y > 9999 { // RFC 3339's range, JSON's for time.Time
			return fmt.Errorf("%w: time %s outside years 0 to 9999", ErrInvalidMeta, t)
		}
	}
	if err := checkLineage(m); err != nil {
		return err
	}
	longest := m
	longest.UpdatedAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	longest.Usage = nil // the store's own, left out where it does not fit (writeMeta)
	_, err := encodeMeta(longest, formatVersion)
	return err
}

// maxMetaSize is the largest session.json: Create and UpdateMeta refuse
// metadata that would be longer (ErrInvalidMeta), and a longer file is
// damage, refused unread. Part of the format.
const maxMetaSize = 1 << 20

// session.json ends with a checksum member, as chunk and index lines do:
// "crc", the CRC-32C of every byte of the file before the metaCRCIntro that
// introduces it, in eight lower-case hex digits, and then metaCRCEnd:
//
//	  "labels": {
//	    "team": "core"
//	  },
//	  "crc": "1f0e3c2b"
//	}
//
// The metadata is held nowhere else, so a changed byte must not read as
// other metadata. A file that does not end that way has no checksum
// (written before session.json had one) and is read without the check;
// older builds ignore the member.
const (
	metaCRCIntro = ",\n  \"crc\": \""
	metaCRCEnd   = "\"\n}\n"
)

// encodeMeta returns session.json for m in format, or ErrInvalidMeta
// when it would be longer than maxMetaSize.
func encodeMeta(m Meta, format int) ([]byte, error) {
	b, err := json.MarshalIndent(metaRecord{Format: format, Meta: m}, "", "  ")
	if err != nil {
		return nil, err
	}
	if n := len(b) + len(metaCRCIntro) + 8 + len(metaCRCEnd) - len("\n}"); n > maxMetaSize {
		return nil, fmt.Errorf("%w: session.json of %d bytes (at most %d)", ErrInvalidMeta, n, maxMetaSize)
	}
	b = b[:len(b)-len("\n}")] // the checksum member goes before the closing brace
	sum := jsonl.Checksum(b)
	b = append(b, metaCRCIntro...)
	b = fmt.Appendf(b, "%08x", sum)
	return append(b, metaCRCEnd...), nil
}

// checkMetaChecksum checks the checksum that ends a session.json, if it
// has one.
func checkMetaChecksum(b []byte, path string) error {
	n := len(b) - len(metaCRCEnd) - 8 - len(metaCRCIntro) // where the member starts
	if n < 0 || !bytes.HasSuffix(b, []byte(metaCRCEnd)) || !bytes.HasPrefix(b[n:], []byte(metaCRCIntro)) {
		return nil
	}
	at := n + len(metaCRCIntro)
	if got, want := string(b[at:at+8]), fmt.Sprintf("%08x", jsonl.Checksum(b[:n])); got != want {
		return corruptf(path, int64(at), "checksum %q does not match the content's %s", got, want)
	}
	return nil
}

// decodeMeta parses session.json, checking its checksum, and checks that
// it belongs to the session directory it was found in, returning the
// metadata and the session's format version. Usage totals that are not
// valid (RecordedUsage.valid) are dropped, not refused: they are derived
// from the log, which Store.Usage then reads.
func decodeMeta(b []byte, want uuid.UUID, path string) (Meta, int, error) {
	if err := checkMetaChecksum(b, path); err != nil {
		return Meta{}, 0, err
	}
	var rec metaRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return Meta{}, 0, corruptf(path, 0, "%w", err)
	}
	if rec.Format < oldestFormat || rec.Format > formatVersion {
		return Meta{}, 0, fmt.Errorf("%w: %s has format %d, this build reads %d to %d", ErrUnsupportedFormat, path, rec.Format, oldestFormat, formatVersion)
	}
	if rec.ID != want {
		return Meta{}, 0, corruptf(path, 0, "id %s does not match its directory", rec.ID)
	}
	if len(rec.Labels) == 0 {
		rec.Labels = nil // "labels":{} and no labels are the same
	}
	if rec.Usage != nil && !rec.Usage.valid() {
		rec.Usage = nil // derived data the store cannot have written: Usage reads the log (usage.go)
	}
	return rec.Meta, rec.Format, nil
}

// noSession reports whether err, from opening a file in the session
// directory dir, means that there is no session there: the file is missing,
// or dir is a regular file (a stray file named like a session id). A dir
// that is a link, a FIFO or a device is no stray file: the store refuses
// it as damage (see refusal).
func noSession(fsys vfs.FS, dir string, err error) bool {
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	info, serr := fsys.Stat(dir)
	return serr == nil && info.Mode().IsRegular()
}

// readMeta reads a session's session.json: its metadata and format.
func readMeta(fsys vfs.FS, dir string, id uuid.UUID) (Meta, int, error) {
	m, format, _, err := readMetaInto(fsys, dir, id, nil)
	return m, format, err
}

// readMetaInto is readMeta reading the file into buf, which it returns
// for reuse (decoding copies what it keeps).
func readMetaInto(fsys vfs.FS, dir string, id uuid.UUID, buf []byte) (Meta, int, []byte, error) {
	path := filepath.Join(dir, metaFile)
	b, err := readFile(fsys, path, buf, maxMetaSize)
	switch {
	case err != nil && noSession(fsys, dir, err):
		return Meta{}, 0, buf, fmt.Errorf("%w: session %s", ErrNotFound, id)
	case err != nil:
		return Meta{}, 0, buf, err
	}
	m, format, err := decodeMeta(b, id, path)
	return m, format, b, err
}

// Create makes a new session and returns its metadata. A zero meta.ID gets
// a new UUIDv7; a zero CreatedAt gets the current time, and UpdatedAt
// starts equal to CreatedAt. The session is held open for writing by this
// Store from then on.
//
// When Create returns nil, the session directory and session.json are
// durable. A crash before that leaves no session, or the whole session
// (session.json whole: an empty session that opens), or a directory
// without session.json, which List ignores and a later Create with the
// same id reuses. Concurrent Creates share their syncs: the catalogue's
// records are written and synced in batches (internal/catalogue), and one sync
// of the sessions directory serves every Create that made its directory
// before the sync began.
//
// A subagent's session (meta.ParentSession set) needs its parent to
// exist, and a zero meta.Depth becomes the parent's Depth + 1 (see
// subagent.go for the lineage rules).
//
// Under Options.DeferCreate, Create makes the same checks and writes
// nothing: the session's first Append, AppendBatch or UpdateMeta makes
// its files, with the durability above, just before its own write (see
// defer.go); until then a crash leaves nothing.
//
// Errors: ErrExists if a session with meta.ID exists; ErrLocked if another
// writer holds that id; ErrInvalidMeta for metadata session.json cannot
// hold as it is (a string that is not valid UTF-8, a year past 9999, more
// than maxMetaSize, 1 MiB, of it) or a lineage that does not hold
// together, and then nothing is created;
// ErrNotFound (wrapped) if meta.ParentSession names no session; ErrClosed. An I/O error writing the catalogue
// (internal/catalogue) before session.json is written leaves no session; one
// after it, or one syncing the sessions directory, leaves the session
// created and stopped for writes (ErrSessionFailed) until the store is
// reopened, as a failed sync does.
func (s *Store) Create(ctx context.Context, meta Meta) (Meta, error) {
	if err := s.begin(ctx); err != nil {
		return Meta{}, err
	}
	defer s.end()
	meta = meta.clone()
	if meta.ID == uuid.Nil {
		id, err := s.opts.newID()
		if err != nil {
			return Meta{}, fmt.Errorf("sessionstore: new session id: %w", err)
		}
		meta.ID = id
	}
	if meta.CreatedAt.IsZero() {
		meta.CreatedAt = s.opts.now()
	}
	meta.CreatedAt = meta.CreatedAt.UTC()
	meta.UpdatedAt = meta.CreatedAt
	if s.opts.ReadOnly {
		return Meta{}, ErrReadOnly
	}
	if err := s.resolveLineage(ctx, &meta); err != nil {
		return Meta{}, err // before anything is created
	}
	if err := checkMeta(meta); err != nil {
		return Meta{}, err // before anything is created
	}
	meta.Encrypted = false
	meta.Usage = nil // the store's own (usage.go)
	var key *sessionKey
	if s.opts.Keys != nil {
		// The key record first: an encrypted session always has its
		// key (makeSessionDir writes it).
		var err error
		if key, err = s.newSessionKey(ctx, meta.ID); err != nil {
			return Meta{}, err
		}
		meta.Encrypted = true
		if s.opts.Remote != nil {
			// The key object, before anything of the session exists
			// (encrypt_remote.go); a deferred session's too, so that
			// its first write seals under the key the object holds.
			if key, err = s.claimRemoteKey(ctx, meta.ID, key); err != nil {
				return Meta{}, err
			}
		}
	}
	if s.opts.DeferCreate {
		return s.deferCreate(ctx, meta, key) // the key cached when its files are made
	}
	out, err := s.createNow(ctx, meta, key)
	if err == nil {
		s.cacheKey(meta.ID, key)
	}
	return out, err
}

// createNow makes the session's files for Create, or for the first write
// of a deferred session (defer.go), inside a call Close waits for.
func (s *Store) createNow(ctx context.Context, meta Meta, key *sessionKey) (Meta, error) {
	// The catalogue's pending record comes first, and the session
	// directory with it, under its lock (internal/catalogue, the protocol).
	if err := s.cat.willWrite(meta.ID, func() (bool, error) { return s.makeSessionDir(meta.ID, key) }); err != nil {
		return Meta{}, err
	}
	h, err := s.reg.acquire(ctx, meta.ID, &meta)
	if err != nil {
		return Meta{}, err
	}
	// The session directory's own entry must survive too, before the
	// commit record says the session is there. One sync of the sessions
	// directory serves every Create that made its entry before it began.
	if err := s.sessionsSync.Do(func() error { return s.opts.fs.SyncDir(filepath.Join(s.dir, sessionsDir)) }); err != nil {
		// session.json is durable, its directory's name perhaps not:
		// the session stops writing, as after any failed sync.
		h.becomeFailed(err)
		s.reg.release(h)
		return Meta{}, fmt.Errorf("sessionstore: create session %s: %w", meta.ID, err)
	}
	if err := s.cat.wrote(h.meta); err != nil {
		// session.json is durable, the catalogue's commit unknown: the
		// session stops writing, as after any failed write.
		h.becomeFailed(err)
		s.reg.release(h)
		return Meta{}, fmt.Errorf("sessionstore: create session %s: catalogue: %w", meta.ID, err)
	}
	out := h.meta.clone()
	s.reg.release(h)
	if out.ForkedFrom != nil {
		// A fork is one once its parent's Delete can see it (forklock.go).
		if err := s.recordFork(ctx, out); err != nil {
			return Meta{}, err
		}
	}
	return out, nil
}

// makeSessionDir makes a new session's directory for Create, with the
// catalogue's lock held; skip says the session exists, so that Create
// will fail (ErrExists, ErrLocked) without writing.
func (s *Store) makeSessionDir(id uuid.UUID, key *sessionKey) (skip bool, err error) {
	dir := s.sessionDir(id)
	if _, err := s.opts.fs.Stat(filepath.Join(dir, metaFile)); err == nil {
		return true, nil
	}
	if key != nil && s.opts.Remote == nil { // with Remote: the key object (Create)
		if skip, err := s.writeKeyRecord(id, key); skip || err != nil {
			return skip, err
		}
	}
	return false, s.opts.fs.MkdirAll(dir, s.opts.DirMode)
}

// createSessionFiles lays out a new session directory under the session's
// lock: when it returns nil, the subdirectories and session.json are
// durable in it. The directory's own entry in the sessions directory is
// the caller's to sync (createNow).
func createSessionFiles(fsys vfs.FS, dir string, meta Meta, opts *Options) error {
	if _, err := fsys.Stat(filepath.Join(dir, metaFile)); err == nil {
		return fmt.Errorf("%w: session %s", ErrExists, meta.ID)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, sub := range []string{chunksDir, blobsDir} {
		if err := fsys.MkdirAll(filepath.Join(dir, sub), opts.DirMode); err != nil {
			return err
		}
	}
	// The subdirectories are durable before session.json names the
	// session: a crash must not keep session.json and lose chunks/, or
	// the session would open and refuse every append.
	if err := fsys.SyncDir(dir); err != nil {
		return err
	}
	b, err := encodeMeta(meta, formatVersion)
	if err != nil {
		return err
	}
	return durable.ReplaceFile(fsys, dir, metaFile, b, opts.FileMode)
}

// List returns the metadata of every session, ordered by id (UUIDv7 ids
// sort by creation time). It reads the catalogue (internal/catalogue) and
// stats the sessions directory once: while the directory's stamp is the
// one the catalogue last recorded, no session was created or deleted
// behind it, and List answers from the catalogue, reading only the
// session.json files it cannot vouch for (being written by a Store,
// unreadable when recorded). Every change a Store makes (in this process
// or another) goes through the catalogue first, so this answer is as
// current as reading every file. What List does not see on this path is
// a session.json changed in place by hand, outside any Store: Meta reads
// the file itself, and List sees the change once the sessions directory
// changes (a session created or deleted, or touch(1) on the directory).
// When the stamp differs, List lists the directory and stats each
// session.json, reading those changed since the catalogue recorded them
// or unknown to it; without a usable catalogue it reads every
// session.json, several at a time, and a writable store then rewrites
// the catalogue. It works while other processes write sessions.
//
// A session whose session.json cannot be read (damaged, of an unknown
// format, unreadable) is not skipped in silence, nor does it hide the
// others: List returns the metadata of every readable session together
// with a *ListError that names each unreadable one and its path. A
// directory without session.json (a Create that did not finish) is not a
// session and is left out.
//
// Errors: *ListError (beside the readable sessions); ErrClosed, a context
// error, or the error reading the sessions directory (then no metadata).
func (s *Store) List(ctx context.Context) ([]Meta, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if s.opts.Remote != nil {
		return s.listRemote(ctx)
	}
	root := filepath.Join(s.dir, sessionsDir)
	// The catalogue (internal/catalogue) says what each session.json
	// holds. While the sessions directory is as the catalogue last
	// recorded it (one stat), the catalogue names every session and its
	// entries are trusted as they are: only those with a write in
	// progress, or unreadable, are read from session.json. Otherwise
	// List lists the directory and stats each session.json, reading
	// those changed behind the catalogue; without a catalogue, it reads
	// them all.
	st := s.cat.State()
	var (
		ids   []uuid.UUID
		metas []Meta
		todo  []int // the sessions to read or stat, by index in ids
		hints []int
	)
	trusted := st != nil && s.cat.Current(st)
	if trusted {
		ids, metas = make([]uuid.UUID, 0, st.Len()), make([]Meta, 0, st.Len())
		st.Each(func(id uuid.UUID, e catalogue.Entry, ok bool) {
			if !ok {
				todo = append(todo, len(ids))
			}
			ids, metas = append(ids, id), append(metas, metaOf(e.Meta))
		})
	} else {
		var err error
		if ids, err = sessionIDs(s.opts.fs, root); err != nil {
			return nil, fmt.Errorf("sessionstore: list sessions: %w", err)
		}
		if st != nil {
			hints = st.Hints(ids)
		}
		metas = make([]Meta, len(ids))
		todo = make([]int, len(ids))
		for i := range todo {
			todo[i] = i
		}
	}
	errs := make([]error, len(ids))
	// The reading is spread over the CPUs, each goroutine reading into a
	// buffer of its own, large enough for a session.json, so that a read
	// needs no fstat to size it.
	workers := min(runtime.GOMAXPROCS(0), (len(todo)+listBatch-1)/listBatch)
	bufs := make([][]byte, max(workers, 1))
	forEach(len(todo), workers, func(w, j int) {
		if ctx.Err() != nil {
			return
		}
		if bufs[w] == nil {
			bufs[w] = make([]byte, 0, 4<<10)
		}
		i := todo[j]
		sdir := filepath.Join(root, ids[i].String())
		if st != nil && !trusted {
			e, _, ok := st.Lookup(ids[i], hints[i])
			metas[i], bufs[w], errs[i] = resolveMeta(s.opts.fs, sdir, ids[i], e, ok, bufs[w])
		} else {
			metas[i], _, bufs[w], errs[i] = readMetaInto(s.opts.fs, sdir, ids[i], bufs[w])
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.reg.live(metas)
	return listResult(ids, metas, errs, ErrNotFound, func(i int) string { return filepath.Join(root, ids[i].String(), metaFile) })
}

// listResult is List's answer from each session's metadata or error:
// those whose error matches absent are left out (a Create that did not
// finish), the others reported in a *ListError beside the readable ones.
func listResult(ids []uuid.UUID, metas []Meta, errs []error, absent error, path func(i int) string) ([]Meta, error) {
	out := metas[:0]
	var bad []UnreadableSession
	for i := range ids {
		switch {
		case errors.Is(errs[i], absent):
			continue
		case errs[i] != nil:
			bad = append(bad, UnreadableSession{ID: ids[i], Path: path(i), Err: errs[i]})
			continue
		}
		out = append(out, metas[i])
	}
	if len(bad) > 0 {
		return out, &ListError{Unreadable: bad}
	}
	return out, nil
}

// ListRecent returns the metadata of the n newest sessions, newest first:
// those with the greatest ids (UUIDv7 ids sort by creation time). n <= 0
// returns none. It reads the newest part of the catalogue (internal/catalogue)
// and the session.json files it cannot vouch for (List's promise: a
// session.json changed in place by hand is not seen while the sessions
// directory is unchanged), and falls back to List when the catalogue is
// unusable or the sessions directory changed behind it. It reports
// unreadable sessions as List does, with a *ListError beside the
// readable ones, but only those it met on its way: sessions newer than
// the oldest one returned (List reports them all).
//
// Errors: as List.
func (s *Store) ListRecent(ctx context.Context, n int) ([]Meta, error) {
	if n <= 0 {
		if err := s.begin(ctx); err != nil {
			return nil, err
		}
		s.end()
		return nil, nil
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	var metas []Meta
	var bad []UnreadableSession
	ok := false
	if s.opts.Remote == nil { // a remote session's metadata is in the object store
		metas, bad, ok = s.cat.recent(n)
	}
	s.end()
	if ok {
		s.reg.live(metas)
		if len(bad) > 0 {
			return metas, &ListError{Unreadable: bad}
		}
		return metas, nil
	}
	all, err := s.List(ctx)
	if all == nil {
		return nil, err
	}
	out := make([]Meta, 0, min(n, len(all)))
	for i := len(all) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, all[i])
	}
	return out, err
}

// listBatch is the number of sessions below which List reads session.json
// files from one goroutine; each further batch may add one.
const listBatch = 64

func bytesLess(a, b []byte) bool { return string(a) < string(b) }

// Meta returns a session's metadata. It reads session.json only, and for
// a session this Store has open, reports as UpdatedAt the time of the
// newest event appended to it if that is later than session.json's: the
// session's last write, which session.json records when the session
// closes or is flushed (Close, Flush, the registry closing an idle
// session). List, ListRecent, ListPage and Sessions report it the same
// way. A session another process writes reports session.json's UpdatedAt
// until that process closes or flushes it; Prune judges such a session
// by its files as well (see Prune).
//
// Errors: ErrNotFound, ErrUnsupportedFormat, *CorruptionError, ErrClosed.
func (s *Store) Meta(ctx context.Context, session uuid.UUID) (Meta, error) {
	if err := s.begin(ctx); err != nil {
		return Meta{}, err
	}
	defer s.end()
	return s.meta(ctx, session)
}

// meta is Meta inside a call that has begun.
func (s *Store) meta(ctx context.Context, session uuid.UUID) (Meta, error) {
	var m Meta
	var err error
	if s.opts.Remote != nil {
		m, err = s.metaRemote(ctx, session)
	} else {
		m, _, err = readMeta(s.opts.fs, s.sessionDir(session), session)
	}
	if err == nil {
		metas := []Meta{m}
		s.reg.live(metas)
		m = metas[0]
	}
	return m, err
}

// UpdateMeta applies fn to a copy of the session's metadata and stores the
// result with UpdatedAt set to now. fn must not change ID or CreatedAt,
// nor the lineage fixed at Create (ForkedFrom, ParentSession, SpawnedBy,
// Depth). On a deferred session (Options.DeferCreate) it first makes the
// session's files, as the first Append does (defer.go).
//
// When UpdateMeta returns nil, the new session.json is durable (written to
// a temporary file, synced, renamed over the old one, directory synced); a
// crash at any point leaves either the old or the new metadata, whole.
//
// The store's catalogue records the change around the write (internal/catalogue);
// an I/O error there, before or after session.json is replaced, stops the
// session's writes (ErrSessionFailed) as a failed sync does.
//
// Errors: ErrNotFound, ErrInvalidMeta, ErrLocked, ErrSessionFailed,
// ErrClosed.
func (s *Store) UpdateMeta(ctx context.Context, session uuid.UUID, fn func(*Meta)) (Meta, error) {
	var out Meta
	if err := s.begin(ctx); err != nil {
		return Meta{}, err
	}
	err := s.materialize(ctx, session) // a deferred session's files first
	s.end()
	if err != nil {
		return Meta{}, err
	}
	err = s.withHandle(ctx, session, func(h *openSession) error {
		if err := h.writable(); err != nil {
			return err
		}
		m := h.meta.clone()
		fn(&m)
		if m.ID != h.meta.ID || !m.CreatedAt.Equal(h.meta.CreatedAt) {
			return fmt.Errorf("%w: ID and CreatedAt cannot change", ErrInvalidMeta)
		}
		m.Encrypted = h.meta.Encrypted
		m.Usage = h.meta.Usage // the store's own (usage.go), the known ones if they moved
		if u, moved := h.recordedUsage(); moved {
			m.Usage = u
		}
		if !sameLineage(m, h.meta) {
			return fmt.Errorf("%w: ForkedFrom, ParentSession, SpawnedBy and Depth cannot change", ErrInvalidMeta)
		}
		m.CreatedAt = h.meta.CreatedAt // the same instant, kept in its stored form
		m.UpdatedAt = s.opts.now().UTC()
		if err := checkMeta(m); err != nil {
			return err
		}
		if err := h.writeMeta(m); err != nil {
			return err
		}
		out = m.clone()
		return nil
	})
	return out, err
}
