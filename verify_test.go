package sessionstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/chunk"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

func TestVerifyClean(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{ChunkSize: 700})
	evs := appendN(t, s, id, 15)
	require.NoError(t, s.Close())

	s = openMem(t, m, Options{})
	defer s.Close()
	before := m.String()
	r, err := s.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	assert.Empty(t, r.Repairs)
	assert.Equal(t, len(evs), r.Records)
	assert.Equal(t, len(evs), r.Indexed)
	assert.Greater(t, r.Chunks, 2)
	assert.Equal(t, evs[len(evs)-1].ID, r.Head)
	assert.Equal(t, evs[len(evs)-1].ID, r.HeadOnDisk)
	assert.Equal(t, before, m.String(), "Verify writes nothing")

	_, err = s.Verify(ctx, uuid.New())
	assert.ErrorIs(t, err, ErrNotFound)
}

// TestVerifyRecordBytes: RecordBytes counts the records' lines, while
// ChunkBytes is what the files take, with the active chunk's preallocated
// free space.
func TestVerifyRecordBytes(t *testing.T) {
	m, s, id := memSession(t, Options{Compression: CompressionNone})
	defer s.Close()
	appendN(t, s, id, 5)
	b, err := vfs.ReadFile(m, newestChunk(t, m, id))
	require.NoError(t, err)
	data := len(b) - chunk.ZeroTail(b)
	require.Greater(t, len(b), data, "the active chunk is preallocated")
	r, err := s.Verify(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, int64(data), r.RecordBytes)
	assert.Equal(t, int64(len(b)), r.ChunkBytes)
}

// TestVerifyAfterCrash: the leftovers of a crash are repairs, not problems,
// and Verify leaves them for the next open.
func TestVerifyAfterCrash(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test fails, cuts or checks.
	ctx := context.Background()
	m, s, id := memSession(t, Options{JournalSize: -1, ChunkSize: 700})
	evs := appendN(t, s, id, 10)
	crashed := m.CrashClone(vfs.KeepSynced, 0)
	require.NoError(t, s.Close())
	last := newestChunk(t, crashed, id)
	b, err := vfs.ReadFile(crashed, last)
	require.NoError(t, err)
	writeMemFile(t, crashed, last, append(b, `{"id":"01a0`...))

	v := openMem(t, crashed, Options{JournalSize: -1})
	before := crashed.String()
	r, err := v.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	assert.Equal(t, len(evs), r.Records)
	assert.Less(t, r.Indexed, len(evs), "the index was never synced")
	assert.NotEmpty(t, r.Repairs)
	joined := ""
	for _, rep := range r.Repairs {
		joined += rep + "\n"
	}
	assert.Contains(t, joined, "torn tail")
	assert.Contains(t, joined, "index entries")
	assert.Contains(t, joined, "set HEAD")
	assert.Equal(t, before, crashed.String(), "Verify writes nothing")
	require.NoError(t, v.Close())

	// Opening for writing carries out the repairs; Verify is then clean.
	s2 := checkAll(t, crashed, id, evs)
	defer s2.Close()
	r, err = s2.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK())
	assert.Empty(t, r.Repairs)
}

// TestVerifyLockedSession: Verify takes no lock, so it works beside the
// writer that holds the session.
func TestVerifyLockedSession(t *testing.T) {
	ctx := context.Background()
	m, writer, id := memSession(t, Options{})
	appendN(t, writer, id, 5)
	defer writer.Close()
	other := openMem(t, m, Options{})
	defer other.Close()
	_, err := other.Append(ctx, id, UserText("second writer"))
	require.ErrorIs(t, err, ErrLocked)
	r, err := other.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	assert.Equal(t, 5, r.Records)
}

// flipsEnv sizes TestByteFlipDetection; by default it makes one change in
// flipsSample (the checks of a change to a derived file open, repair and
// verify the session twice, so a tenth would take some 20 s under -race).
const (
	flipsEnv    = "SESSIONSTORE_FLIPS"
	flipsSample = 100
)

// flipRole is what a file of a store is for, which decides what a changed
// byte in it must lead to (see TestByteFlipDetection).
type flipRole int

const (
	flipData      flipRole = iota // chunks and blobs: the records, held nowhere else
	flipDerived                   // index.jsonl and HEAD: rebuilt from the chunks
	flipMeta                      // session.json: the metadata, held nowhere else
	flipRoot                      // sessionstore.json: the root's compression mode
	flipCatalogue                 // catalogue.jsonl and .log: derived from every session.json
)

// flipKinds are the kinds of file the flip test changes, in the order of
// its counts.
var flipKinds = []string{"sealed chunk", "full chunk", "active chunk", "blob", indexName, headfile.Name, metaFile, rootConfigName, catalogueName, catalogueLogName}

// flipFile is one file of the flip test's store.
type flipFile struct {
	path string
	kind string // one of flipKinds
	role flipRole
	orig []byte
}

// flipCounts is what the changes to the files of one kind led to.
type flipCounts struct {
	files, flips int
	detected     int // by Verify (data, derived), or by every reader (session.json, sessionstore.json)
	byRead       int // data: by reading every event back
	repaired     int // derived: by an open for writing, with nothing lost
	leftDamaged  int // derived: reported by Verify, and still after an open for writing
	harmless     int // session.json, sessionstore.json: read back equal in meaning
	failed       int
	took         time.Duration
}

// flipSession is the committed session the flip test changes, and what
// it must read back as.
type flipSession struct {
	o      Options
	id     uuid.UUID
	evs    []Event // every event, in append order
	path   []uuid.UUID
	meta   Meta
	format int
	root   rootConfig
}

// TestByteFlipDetection changes every byte of every file of a committed
// store, one at a time and four ways (xor 0x01, 0x20, 0x80 and 0xff), with
// plain chunks and with sealed chunks compressed. The session has full
// chunks (sealed, or plain when not compressed) and an active one, blobs
// (a threshold of 200 bytes; one blob is referred to twice; their strings
// of 200 bytes and more stored apart, so split blobs and string blobs),
// a branch, and metadata with every field set. What a change must lead to follows from
// the file's role:
//
//   - Chunks (their lines, and in a sealed chunk its frames, embedded
//     index, frame table and footer) and blobs hold the records: Verify
//     detects the change, and so does reading every event back, blobs
//     resolved. The one exception is a change to a blob that zstd's
//     decoder ignores (a bit of the frame header's window size, for a
//     record smaller than any window): counted as harmless, since Verify
//     and Resolve both decompressed it to exactly the record its SHA-256
//     digest names.
//   - index.jsonl and HEAD are derived from the chunks: Verify reports the
//     change as damage, or lists a repair, and an open for writing then
//     repairs it with nothing lost: every event there with its record,
//     HEAD the newest event, Load the active path, and Verify clean, with
//     no repair left, before and after the store is closed. A change
//     Verify reported as damage may instead be left so by the open, if
//     Verify still reports it (counted apart); a change Verify does not
//     see at all fails, and so does an open that leaves a session Verify
//     calls clean with an event lost or changed.
//   - session.json holds the metadata, which nothing else holds: Meta,
//     List and Verify all report the change, each naming the file, or the
//     file reads back equal in meaning: the same format and the same Meta
//     (times as instants, no labels and empty labels alike), with every
//     event intact. A case change in a member name is such a change
//     (encoding/json matches member names without regard to case), and so
//     is one to the name of the checksum member, which makes the file read
//     as one written before session.json had a checksum, with the same
//     content; a change that makes the file read as other metadata fails.
//   - sessionstore.json: Open refuses it (ErrCompressionMismatch,
//     ErrUnsupportedFormat, or a *CorruptionError naming the file), or the
//     file still reads as the same format and mode (a case change in a
//     member name); and Open in the other mode is refused either way, so
//     that no change switches the mode in silence.
//
// The LOCK file is empty: it has no byte to change. A file of a kind the
// test does not know fails it, to be given a role. Counts per kind of file
// are logged, and every change that fails is named by file, offset and
// mask (the first five of each kind in full).
//
// SESSIONSTORE_FLIPS sets the number of changes per compression mode. By
// default one in 100 of the possible ones (about 260 and 170 of some
// 26,000 and 17,000), evenly spread over every file, one byte in about 25,
// the four ways taking turns. "all", or a number at least the possible
// changes, changes every byte four ways, as .ci/run's long step does.
func TestByteFlipDetection(t *testing.T) {
	t.Parallel() // CPU-bound on MemFS instances of its own, like the other parallel tests
	for _, mode := range []string{CompressionNone, CompressionZstd} {
		t.Run(mode, func(t *testing.T) {
			m, fs := flipStore(t, mode)
			files := flipFiles(t, m, fs)

			masks := []byte{0x01, 0x20, 0x80, 0xff}
			possible := 0
			for _, f := range files {
				possible += len(masks) * len(f.orig)
			}
			// Change g of the possible ones (file by file, byte by byte,
			// four per byte) is made if g*n mod possible < n: n changes,
			// evenly spread, the first included.
			n := min(possible, testSize(t, flipsEnv, (possible+flipsSample-1)/flipsSample, possible))
			counts := map[string]*flipCounts{}
			for _, k := range flipKinds {
				counts[k] = &flipCounts{}
			}
			failures := map[string][]string{} // by kind
			total, g := 0, 0
			for _, f := range files {
				c := counts[f.kind]
				c.files++
				inFile := 0
				for pos := range f.orig {
					// The changes this byte takes, and which: the masks
					// take turns over the changes made.
					k := 0
					for range masks {
						if g*n%possible < n {
							k++
						}
						g++
					}
					for i := range k {
						x := masks[(total+i)%len(masks)]
						inFile++
						c.flips++
						t0 := time.Now()
						flipped := m.CrashClone(vfs.KeepAll, 0)
						b := bytes.Clone(f.orig)
						b[pos] ^= x
						writeMemFile(t, flipped, f.path, b)
						if what := fs.check(t, flipped, f, b, c); what != "" {
							c.failed++
							failures[f.kind] = append(failures[f.kind], fmt.Sprintf("%s offset %d (byte %q) xor %#02x: %s", f.path, pos, f.orig[pos], x, what))
						}
						c.took += time.Since(t0)
					}
					total += k
				}
				require.Positive(t, inFile, "%s: no byte changed", f.path)
			}
			t.Logf("%s: byte changes: %d of %d possible (every byte four ways) in %d files", mode, total, possible, len(files))
			for _, k := range flipKinds {
				c := counts[k]
				if k == map[string]string{CompressionNone: "sealed chunk", CompressionZstd: "full chunk"}[mode] {
					require.Zero(t, c.files, "%s: no %s", mode, k)
					continue
				}
				require.Positive(t, c.files, "the store has a file of kind %s", k)
				t.Logf("%s: %-17s %d files, %5d changes: %5d detected by Verify or on reading it, %5d by reading every event, %4d repaired by an open (%d left damaged), %3d harmless, %d failed; %v",
					mode, k, c.files, c.flips, c.detected, c.byRead, c.repaired, c.leftDamaged, c.harmless, c.failed, c.took.Round(time.Millisecond))
			}
			if total < possible {
				t.Logf("a sample: %s=all changes every byte four ways", flipsEnv)
			}
			for _, k := range flipKinds {
				for i, f := range failures[k] {
					if i == 5 {
						t.Logf("... and %d more changes of a %s", len(failures[k])-i, k)
						break
					}
					t.Log(f)
				}
				assert.Empty(t, failures[k], "%s: every change of a %s is detected, repaired or harmless, as its role requires", mode, k)
			}
		})
	}
}

// flipStore makes the flip test's store in compression mode mode, closes
// it, and returns its filesystem and session.
func flipStore(t *testing.T, mode string) (*vfs.MemFS, *flipSession) {
	t.Helper()
	ctx := context.Background()
	fs := &flipSession{o: Options{ChunkSize: 900, Compression: mode, BlobThreshold: 200, StringThreshold: 200 /* split blobs and string blobs to flip */, keepPlainOnClose: true /* an active chunk to flip */}}
	m := vfs.NewMemFS()
	s := openMem(t, m, fs.o)
	meta, err := s.Create(ctx, Meta{Name: "flip", WorkingDir: "/work/flip", Model: "test-model", Labels: map[string]string{"team": "storage"}})
	require.NoError(t, err)
	fs.id = meta.ID
	fs.evs = appendN(t, s, fs.id, 3)
	require.NoError(t, s.Branch(ctx, fs.id, fs.evs[0].ID))
	// Then blobs: records over the threshold, one of them twice, and a
	// small record, so that the active chunk holds blob lines and inline
	// ones.
	for _, ev := range []Event{
		UserText("a branch"),
		ToolResultEvent(ToolResult{CallID: "call-1", Output: strings.Repeat("result one; ", 25)}),
		ToolResultEvent(ToolResult{CallID: "call-2", Output: strings.Repeat("result two; ", 25)}),
		ToolResultEvent(ToolResult{CallID: "call-1", Output: strings.Repeat("result one; ", 25)}),
		UserText("after the blobs"),
	} {
		out, err := s.Append(ctx, fs.id, ev)
		require.NoError(t, err)
		fs.evs = append(fs.evs, out)
	}
	require.NoError(t, s.Close())

	// The active path, from the events' parents.
	byID := map[uuid.UUID]Event{}
	for _, ev := range fs.evs {
		byID[ev.ID] = ev
	}
	for id := fs.evs[len(fs.evs)-1].ID; id != uuid.Nil; id = byID[id].ParentID {
		fs.path = append([]uuid.UUID{id}, fs.path...)
	}
	require.Len(t, fs.path, len(fs.evs)-2, "the branch leaves two events off the active path")
	fs.meta, fs.format, err = readMeta(m, sessionPath(fs.id), fs.id)
	require.NoError(t, err)
	b, err := vfs.ReadFile(m, filepath.Join(memRoot, rootConfigName))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &fs.root))
	require.Equal(t, rootConfig{Format: rootFormat, Compression: mode}, fs.root)
	return m, fs
}

// flipFiles returns every file of the store with its kind and role. It
// fails the test on a file it does not know, which must be given a role.
func flipFiles(t *testing.T, m *vfs.MemFS, fs *flipSession) []flipFile {
	t.Helper()
	sdir := sessionPath(fs.id)
	chunks, err := listChunks(m, filepath.Join(sdir, chunksDir))
	require.NoError(t, err)
	active := filepath.Join(sdir, chunksDir, chunkName(chunks[len(chunks)-1]))
	var files []flipFile
	var walk func(dir string)
	walk = func(dir string) {
		names, err := m.ReadDir(dir)
		require.NoError(t, err)
		slices.Sort(names)
		for _, name := range names {
			path := filepath.Join(dir, name)
			info, err := m.Stat(path)
			require.NoError(t, err)
			if info.IsDir() {
				walk(path)
				continue
			}
			b, err := vfs.ReadFile(m, path)
			require.NoError(t, err)
			f := flipFile{path: path, orig: b}
			rel, err := filepath.Rel(sdir, path)
			require.NoError(t, err)
			_, isChunk := parseChunkName(name)
			switch {
			case path == filepath.Join(memRoot, rootConfigName):
				f.kind, f.role = rootConfigName, flipRoot
			case path == filepath.Join(memRoot, catalogueName), path == filepath.Join(memRoot, catalogueLogName):
				f.kind, f.role = name, flipCatalogue
			case path == filepath.Join(memRoot, catalogueLockName):
				require.Empty(t, b, "the catalogue's lock file holds nothing")
				continue
			case rel == metaFile:
				f.kind, f.role = metaFile, flipMeta
			case rel == headfile.Name, rel == indexName:
				f.kind, f.role = rel, flipDerived
			case rel == lockName:
				require.Empty(t, b, "the LOCK file holds nothing")
				continue
			case filepath.Dir(rel) == chunksDir && isChunk:
				f.role = flipData
				switch {
				case strings.HasSuffix(name, sealedExt):
					f.kind = "sealed chunk"
				case path == active:
					f.kind = "active chunk"
				default:
					f.kind = "full chunk"
				}
			case strings.HasPrefix(rel, filepath.Join(blobsDir, "sha256")+"/") && strings.HasSuffix(name, blobExt):
				f.kind, f.role = "blob", flipData
			default:
				require.Failf(t, "a file the flip test does not know", "%s: give it a role", path)
			}
			require.NotEmpty(t, b, "%s is empty", path)
			files = append(files, f)
		}
	}
	walk(memRoot)
	for _, f := range files {
		t.Logf("%s %s: %d bytes", f.kind, f.path, len(f.orig))
	}
	return files
}

// check checks the store on fsys, where file f now holds b, as f's role
// requires and counts the outcome in c. It returns what went wrong, or ""
// if nothing did.
func (fs *flipSession) check(t *testing.T, fsys *vfs.MemFS, f flipFile, b []byte, c *flipCounts) string {
	t.Helper()
	ctx := context.Background()
	switch f.role {
	case flipData:
		v := openMem(t, fsys, fs.o)
		defer v.Close()
		r, err := v.Verify(ctx, fs.id)
		require.NoError(t, err)
		byVerify, byRead := !r.OK(), readDetects(ctx, v, fs.id, fs.evs) != ""
		if byVerify {
			c.detected++
		}
		if byRead {
			c.byRead++
		}
		switch {
		case !byVerify && !byRead && f.kind == "blob":
			// Verify and Resolve both decompressed the blob and checked
			// the record against the digest that names it: the change is
			// to a field zstd's decoder ignores.
			c.harmless++
		case !byVerify && !byRead:
			return "undetected: Verify is clean and every event reads back as appended"
		case !byVerify:
			return "Verify is clean, though reading the events detects the change"
		case !byRead:
			return "every event reads back as appended, though Verify detects the change"
		}
		return ""

	case flipDerived:
		v := openMem(t, fsys, fs.o)
		r, err := v.Verify(ctx, fs.id)
		require.NoError(t, err)
		detected := !r.OK()
		if detected {
			c.detected++
		} else if len(r.Repairs) == 0 {
			v.Close()
			return "Verify sees neither damage nor a repair to make"
		}
		// An open for writing makes the repairs (reading every event opens
		// the session and loads its index), losing nothing; or, if Verify
		// reported damage, it may leave the session damaged, as long as
		// Verify still reports it: the chunks are intact, so no open may
		// lose an event in silence.
		what := fs.intact(ctx, v)
		if what != "" {
			after, err := v.Verify(ctx, fs.id)
			require.NoError(t, err)
			v.Close()
			if detected && !after.OK() {
				c.leftDamaged++
				return ""
			}
			return fmt.Sprintf("Verify found problems %v and repairs %q; after the open, %s", r.Problems, r.Repairs, what)
		}
		require.NoError(t, v.Close())
		// Close checkpoints HEAD: still clean.
		v = openMem(t, fsys, fs.o)
		defer v.Close()
		if after, err := v.Verify(ctx, fs.id); err != nil || !after.OK() || len(after.Repairs) > 0 {
			return fmt.Sprintf("Verify found problems %v and repairs %q; after the repairing store was closed, Verify: %v, problems %v, repairs %q",
				r.Problems, r.Repairs, err, after.Problems, after.Repairs)
		}
		c.repaired++
		return ""

	case flipMeta:
		v := openMem(t, fsys, fs.o)
		defer v.Close()
		got, merr := v.Meta(ctx, fs.id)
		list, lerr := v.List(ctx)
		r, verr := v.Verify(ctx, fs.id)
		if merr != nil {
			var problems []string
			if !flipNames(merr, f.path) {
				problems = append(problems, fmt.Sprintf("Meta's error does not name the file: %v", merr))
			}
			// List trusts the catalogue while the sessions directory is
			// unchanged (a change in place is not seen): it must then
			// return the metadata as the store wrote it, never the
			// damaged file's; else report the file.
			var le *ListError
			switch {
			case lerr == nil && len(list) == 1 && flipSameMeta(list[0], fs.meta):
			case !errors.As(lerr, &le) || len(le.Unreadable) != 1 || le.Unreadable[0].Path != f.path || len(list) != 0:
				problems = append(problems, fmt.Sprintf("List neither reports the file nor returns the metadata the store wrote: %d sessions, %v", len(list), lerr))
			}
			switch {
			case verr != nil && !flipNames(verr, f.path):
				problems = append(problems, fmt.Sprintf("Verify's error does not name the file: %v", verr))
			case verr == nil && (r.OK() || r.Problems[0].Path != f.path):
				problems = append(problems, fmt.Sprintf("Verify does not report the file: %v", r.Problems))
			}
			if len(problems) > 0 {
				return fmt.Sprintf("Meta: %v; but %s", merr, strings.Join(problems, "; "))
			}
			c.detected++
			return ""
		}
		// Read without an error: it must mean what it meant.
		_, format, err := readMeta(fsys, sessionPath(fs.id), fs.id)
		require.NoError(t, err, "Meta read it")
		switch {
		case !flipSameMeta(got, fs.meta) || format != fs.format:
			return fmt.Sprintf("undetected: reads as format %d, %+v; was format %d, %+v", format, got, fs.format, fs.meta)
		case lerr != nil || len(list) != 1 || !flipSameMeta(list[0], fs.meta):
			return fmt.Sprintf("Meta reads it as it was, but List returns %+v, %v", list, lerr)
		case verr != nil || !r.OK():
			return fmt.Sprintf("Meta reads it as it was, but Verify reports %v, %v", verr, r.Problems)
		}
		if what := readDetects(ctx, v, fs.id, fs.evs); what != "" {
			return "Meta reads it as it was, but " + what
		}
		c.harmless++
		return ""

	case flipCatalogue:
		// Whatever the changed byte does to the catalogue, List and
		// ListRecent answer as session.json says, for a read-only store
		// (which reads around it) and a writer (which rewrites it).
		for _, ro := range []bool{true, false} {
			o := fs.o
			o.ReadOnly = ro
			v := openMem(t, fsys, o)
			list, lerr := v.List(ctx)
			recent, rerr := v.ListRecent(ctx, 5)
			require.NoError(t, v.Close())
			if lerr != nil || rerr != nil || !assert.ObjectsAreEqual([]Meta{fs.meta}, list) || !assert.ObjectsAreEqual([]Meta{fs.meta}, recent) {
				return fmt.Sprintf("read-only %v: List %v (%v), ListRecent %v (%v), want %v", ro, list, lerr, recent, rerr, fs.meta)
			}
		}
		c.harmless++
		return ""

	case flipRoot:
		o := fs.o
		o.fs = fsys
		s, err := Open(memRoot, &o)
		if err != nil {
			var ce *CorruptionError
			if !errors.Is(err, ErrCompressionMismatch) && !errors.Is(err, ErrUnsupportedFormat) && !(errors.As(err, &ce) && ce.Path == f.path) {
				return fmt.Sprintf("Open fails with an error that does not report the file: %v", err)
			}
			c.detected++
			return ""
		}
		defer s.Close()
		var cfg rootConfig
		if err := json.Unmarshal(b, &cfg); err != nil || cfg != fs.root {
			return fmt.Sprintf("Open accepts it, though it reads as %+v (%v), not %+v", cfg, err, fs.root)
		}
		other := o
		other.Compression = CompressionZstd
		if fs.o.Compression == CompressionZstd {
			other.Compression = CompressionNone
		}
		if so, err := Open(memRoot, &other); !errors.Is(err, ErrCompressionMismatch) {
			if err == nil {
				so.Close()
			}
			return fmt.Sprintf("Open in mode %s: %v, not ErrCompressionMismatch", other.Compression, err)
		}
		if what := readDetects(ctx, s, fs.id, fs.evs); what != "" {
			return "Open accepts it, but " + what
		}
		c.harmless++
		return ""
	}
	panic(fmt.Sprintf("flip role %d", f.role))
}

// intact returns what is wrong with the session as s reads it, "" if
// nothing: every event reads back as appended, HEAD is the newest event,
// Load returns the active path, and Verify is clean with no repair left.
func (fs *flipSession) intact(ctx context.Context, s *Store) string {
	if what := readDetects(ctx, s, fs.id, fs.evs); what != "" {
		return what
	}
	if head, err := s.Head(ctx, fs.id); err != nil || head != fs.evs[len(fs.evs)-1].ID {
		return fmt.Sprintf("HEAD is %s (%v), not the newest event %s", head, err, fs.evs[len(fs.evs)-1].ID)
	}
	path, err := s.Load(ctx, fs.id)
	if err != nil || !slices.Equal(apiIDs(path), fs.path) {
		return fmt.Sprintf("Load returns %v (%v), not the active path %v", apiIDs(path), err, fs.path)
	}
	r, err := s.Verify(ctx, fs.id)
	if err != nil || !r.OK() || len(r.Repairs) > 0 {
		return fmt.Sprintf("Verify: %v, problems %v, repairs %q", err, r.Problems, r.Repairs)
	}
	return ""
}

// flipNames reports whether err names the file path: a *CorruptionError
// with that Path, or another error whose message holds it.
func flipNames(err error, path string) bool {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		return ce.Path == path
	}
	return strings.Contains(err.Error(), path)
}

// flipSameMeta reports whether two metadata are equal in meaning: the same
// fields, times as instants, no labels and empty labels alike.
func flipSameMeta(a, b Meta) bool {
	return a.ID == b.ID && a.Name == b.Name && a.WorkingDir == b.WorkingDir && a.Model == b.Model &&
		a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt) && maps.Equal(a.Labels, b.Labels)
}

// readDetects returns how reading every event of the session (resolving
// blobs) shows damage: an error, or data that differs from what was
// appended; "" if every event reads back as appended.
func readDetects(ctx context.Context, s *Store, id uuid.UUID, evs []Event) string {
	for _, want := range evs {
		got, err := s.Event(ctx, id, want.ID)
		if err == nil && got.Digest != "" {
			got, err = s.Resolve(ctx, id, got)
		}
		if err != nil {
			return fmt.Sprintf("reading event %s: %v", want.ID, err)
		}
		if got.ParentID != want.ParentID || got.BranchFrom != want.BranchFrom || string(got.Record) != string(want.Record) ||
			!got.Time.Equal(want.Time) || got.Kind != want.Kind || got.Role != want.Role || got.Digest != want.Digest || got.Size != want.Size {
			return fmt.Sprintf("event %s reads back as %+v, not as appended, %+v", want.ID, got, want)
		}
	}
	return ""
}

// TestVerifyResealedInvalidRecord: a record that is not valid JSON inside a
// line whose checksum matches (written by some other tool) is corruption
// to Verify, which validates every record, and to the scan that indexes a
// chunk, though Load, trusting the checksum of an indexed line, does not
// parse the record again.
func TestVerifyResealedInvalidRecord(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	evs := appendN(t, s, id, 3)
	require.NoError(t, s.Close())
	chunkPath := sessionPath(id, chunksDir, chunkName(0))
	chunk, err := vfs.ReadFile(m, chunkPath)
	require.NoError(t, err)
	chunk = bytes.TrimRight(chunk, "\x00") // the preallocated free space
	lines := bytes.SplitAfter(chunk, []byte("\n"))
	off := len(lines[0])
	line := lines[1]
	require.Contains(t, string(line), `"message 1 `)
	body := bytes.Replace(line[:len(line)-1-jsonl.SuffixLen], []byte(`"message 1 `), []byte(`"messa"e 1 `), 1)
	resealed := jsonl.Seal(nil, append(body, '}'))
	require.Len(t, resealed, len(line), "same length: the index still locates every record")
	require.NoError(t, jsonl.Verify(resealed[:len(resealed)-1]), "the checksum matches")
	copy(chunk[off:], resealed)
	writeMemFile(t, m, chunkPath, chunk)

	s = openMem(t, m, Options{})
	r, err := s.Verify(ctx, id)
	require.NoError(t, err)
	require.False(t, r.OK())
	assert.Equal(t, chunkPath, r.Problems[0].Path)
	assert.Equal(t, int64(off), r.Problems[0].Offset)
	assert.Contains(t, r.Problems[0].Error(), "not valid JSON")
	require.NoError(t, s.Close())

	// Without index.jsonl the open scans the chunk and stops at the record.
	require.NoError(t, m.Remove(sessionPath(id, indexName)))
	s = openMem(t, m, Options{})
	defer s.Close()
	path, err := s.Load(ctx, id)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, chunkPath, ce.Path)
	assert.Equal(t, int64(off), ce.Offset)
	require.Len(t, path, 1, "the valid prefix")
	assert.Equal(t, evs[0].ID, path[0].ID)
}

// TestVerifyDamagedRecordInTheMiddle: damaged records in the middle of a
// chunk are reported once, with one problem for the index entries naming
// them and one for the unknown parent of the record after them; the index
// entries after the damage still match their records.
func TestVerifyDamagedRecordInTheMiddle(t *testing.T) {
	for _, tc := range []struct {
		damaged int    // records damaged, from the third on
		entries string // how the index problem names them
	}{
		{1, " names offset "},
		{2, " and the 1 after it name offsets "},
	} {
		t.Run(fmt.Sprint(tc.damaged), func(t *testing.T) {
			ctx := context.Background()
			m, s, id := memSession(t, Options{})
			evs := appendN(t, s, id, 6)
			require.NoError(t, s.Close())
			path := newestChunk(t, m, id)
			b, err := vfs.ReadFile(m, path)
			require.NoError(t, err)
			lines := bytes.SplitAfter(b, []byte("\n"))
			require.Greater(t, len(lines), 2+tc.damaged)
			off := int64(len(lines[0]) + len(lines[1]))
			next := off
			damaged := bytes.Clone(b)
			for i := 2; i < 2+tc.damaged; i++ {
				require.Contains(t, string(lines[i]), evs[i].ID.String())
				damaged[next+int64(len(lines[i]))/2] ^= 0x01
				next += int64(len(lines[i]))
			}
			writeMemFile(t, m, path, damaged)

			v := openMem(t, m, Options{ReadOnly: true})
			defer v.Close()
			r, err := v.Verify(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, len(evs)-tc.damaged, r.Records)
			assert.Equal(t, len(evs), r.Indexed)
			var msgs []string
			for _, p := range r.Problems {
				msgs = append(msgs, p.Error())
				assert.NotContains(t, p.Error(), "disagrees", "entries after the damage match their records")
			}
			require.Len(t, r.Problems, 3, strings.Join(msgs, "\n"))
			assert.Equal(t, path, r.Problems[0].Path)
			assert.Equal(t, off, r.Problems[0].Offset)
			assert.Contains(t, r.Problems[0].Error(), fmt.Sprintf("invalid record followed by a valid one at offset %d", next))
			assert.Equal(t, path, r.Problems[1].Path)
			assert.Equal(t, next, r.Problems[1].Offset)
			assert.Contains(t, r.Problems[1].Error(), "unknown parent "+evs[1+tc.damaged].ID.String())
			assert.Equal(t, filepath.Join(filepath.Dir(filepath.Dir(path)), indexName), r.Problems[2].Path)
			assert.Contains(t, r.Problems[2].Error(), "index entry "+evs[2].ID.String()+tc.entries)
		})
	}
}
