package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The crash tests here cut the power at every operation of one protocol
// that orders a directory change against file data (an atomic replace, a
// sealing) and check its promise in many KeepRandomSectors states, the
// mode that keeps or loses each unsynced create, rename and remove on its
// own (vfs.CrashClone). TestCrashPoints covers these operations too, but
// by default at a sample of its crash points and with one seed each.

// dirCrashSeeds is the number of KeepRandomSectors seeds per crash point
// under SESSIONSTORE_CRASH_STATES=all (.ci/run's long step), and
// dirCrashSeedsSample the number by default; every other mode gets one.
const (
	dirCrashSeeds       = 16
	dirCrashSeedsSample = 4
)

// dirSeeds returns the number of KeepRandomSectors seeds dirCrashStates
// checks per crash point: dirCrashSeeds when SESSIONSTORE_CRASH_STATES
// is set (to "all" or a number), dirCrashSeedsSample otherwise.
func dirSeeds() int {
	if strings.TrimSpace(os.Getenv(crashStatesEnv)) != "" {
		return dirCrashSeeds
	}
	return dirCrashSeedsSample
}

// dirCrashState is a crash state to check, and its name.
type dirCrashState struct {
	name string
	fs   *vfs.MemFS
}

// dirCrashStates returns the crash states checked at crash point k of m:
// every mode once, and KeepRandomSectors with dirSeeds() seeds.
func dirCrashStates(m *vfs.MemFS, k int) []dirCrashState {
	var out []dirCrashState
	for _, mode := range vfs.CrashModes {
		n := 1
		if mode == vfs.KeepRandomSectors {
			n = dirSeeds()
		}
		for seed := range n {
			name := fmt.Sprintf("crash point %d, %s seed %d", k, mode, seed)
			out = append(out, dirCrashState{name, m.CrashClone(mode, uint64(k*100+seed))})
		}
	}
	return out
}

// readRaw returns the bytes of the file at path, or "absent".
func readRaw(t *testing.T, m *vfs.MemFS, path string) string {
	t.Helper()
	b, err := vfs.ReadFile(m, path)
	if errors.Is(err, fs.ErrNotExist) {
		return "absent"
	}
	require.NoError(t, err)
	return string(b)
}

// TestReplaceCrashPoints: a file replaced atomically (session.json by
// UpdateMeta; HEAD and session.json by Close) holds, after a power cut at
// any operation of the replace, its old content or its new one, whole,
// and the session opens with every acknowledged event, the metadata the
// old or the new, and Verify clean. A replace that renamed the temporary
// file before syncing its data would leave the name holding an empty or
// zeroed file when the rename reaches the disk and the data does not.
func TestReplaceCrashPoints(t *testing.T) {
	// The per-session commit (JournalSize -1): what its chunk holds
	// after a crash is what this test cuts, repairs or checks.
	t.Parallel() // CPU-bound on MemFS instances of its own, like the other parallel tests
	ctx := context.Background()
	tests := []struct {
		name  string
		files []string // the files the operation replaces
		op    func(s *Store, id uuid.UUID) error
		names []string // the metadata names the session may have after a crash
	}{
		{"UpdateMeta", []string{metaFile}, func(s *Store, id uuid.UUID) error {
			_, err := s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "new" })
			return err
		}, []string{"old", "new"}},
		{"Close", []string{headfile.Name, metaFile}, func(s *Store, id uuid.UUID) error {
			return s.Close()
		}, []string{"old"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// run prepares a closed session of two events named "old",
			// reopens it and appends a third, then runs tt.op with the
			// power cut at its k-th mutating operation (never if k is 0).
			// The clock and ids are fake, so every run writes the same
			// bytes. It returns the frozen filesystem, the session, the
			// acknowledged events, the replaced files' bytes before tt.op,
			// and whether the power was cut.
			run := func(k int) (*vfs.MemFS, uuid.UUID, []Event, map[string]string, bool) {
				m := vfs.NewMemFS()
				o := deterministic(Options{JournalSize: -1, ChunkSize: 1 << 20})
				s := openMem(t, m, o)
				meta, err := s.Create(ctx, Meta{Name: "old"})
				require.NoError(t, err)
				evs := appendN(t, s, meta.ID, 2)
				require.NoError(t, s.Close())
				before := map[string]string{}
				for _, f := range tt.files {
					before[f] = readRaw(t, m, sessionPath(meta.ID, f))
					require.NotEqual(t, "absent", before[f], "%s is there before the replace", f)
				}
				s = openMem(t, m, o)
				evs = append(evs, appendN(t, s, meta.ID, 1)...)
				n := 0
				m.SetFault(func(op vfs.Op, path string) error {
					if vfs.Mutating(op) {
						n++
						if n == k {
							return vfs.ErrPowerLoss
						}
					}
					return nil
				})
				err = tt.op(s, meta.ID)
				m.SetFault(nil) // the operations of tt.op only
				s.Close()       // after a power cut it fails and changes nothing
				cut := m.PowerCut() != nil
				require.Equal(t, cut, err != nil, "crash point %d: the operation fails exactly when the power is cut (%v)", k, err)
				m.PowerOff()
				return m, meta.ID, evs, before, cut
			}

			m, id, _, before, _ := run(0)
			after := map[string]string{}
			synced := m.CrashClone(vfs.KeepSynced, 0) // what is durable once the operation returned
			for _, f := range tt.files {
				after[f] = readRaw(t, synced, sessionPath(id, f))
				require.NotEqual(t, before[f], after[f], "%s is replaced by new content", f)
			}
			points := 0
			for k := 1; ; k++ {
				m, id, evs, _, cut := run(k)
				if !cut {
					break
				}
				points++
				var pe *fs.PathError
				require.ErrorAs(t, m.PowerCut(), &pe)
				for _, st := range dirCrashStates(m, k) {
					state, c := st.name, st.fs
					for _, f := range tt.files {
						got := readRaw(t, c, sessionPath(id, f))
						require.Contains(t, []string{before[f], after[f]}, got,
							"%s (cut at %s %s): %s is neither its old content nor its new one, whole", state, pe.Op, filepath.Base(pe.Path), f)
					}
					s := openMem(t, c, Options{JournalSize: -1, ChunkSize: 1 << 20})
					meta, err := s.Meta(ctx, id)
					require.NoError(t, err, state)
					require.Contains(t, tt.names, meta.Name, state)
					got, err := s.Load(ctx, id)
					require.NoError(t, err, state)
					require.Len(t, got, len(evs), "%s: every acknowledged event", state)
					for i := range evs {
						require.Equal(t, evs[i].ID, got[i].ID, state)
					}
					r, err := s.Verify(ctx, id)
					require.NoError(t, err, state)
					require.True(t, r.OK(), "%s: %v", state, r.Problems)
					require.NoError(t, s.Close())
				}
			}
			t.Logf("%s: %d crash points, %d states each", tt.name, points, len(vfs.CrashModes)-1+dirSeeds())
			require.GreaterOrEqual(t, points, 5*len(tt.files), "every operation of each replace is a crash point")
		})
	}
}

// sealingOp reports whether an operation is part of sealing a chunk (see
// chunkwriter.Writer.seal and zchunk.Write): the compressed file's temporary
// file, its rename, the directory syncs (a chunk's creation syncs the
// directory too), the plain file's removal, and the index rewrite (its
// temporary file and rename, or a truncation in place; the directory
// sync after the rename is TestIndexRewriteCrashPoints's).
func sealingOp(op vfs.Op, path string) bool {
	switch {
	case strings.Contains(filepath.Base(path), sealedExt) && vfs.Mutating(op):
		return true
	case op == vfs.OpSyncDir && filepath.Base(path) == chunksDir:
		return true
	case op == vfs.OpRemove && filepath.Base(filepath.Dir(path)) == chunksDir:
		return true
	case op == vfs.OpTruncate && filepath.Base(path) == indexName:
		return true
	case filepath.Base(path) == indexName+".tmp" && vfs.Mutating(op):
		return true
	case op == vfs.OpRename && filepath.Base(path) == indexName:
		return true
	}
	return false
}

// TestSealingCrashPoints: power cut at every operation of the sealing of
// three chunks (while appends go on) leaves every acknowledged event there,
// whole, and Verify clean (checkCrashState). The sealed file must be
// durable under its final name before the plain chunk is removed, or a
// crash that keeps the removal and loses the rename loses the chunk.
func TestSealingCrashPoints(t *testing.T) {
	t.Parallel() // CPU-bound on MemFS instances of its own, like the other parallel tests
	ctx := context.Background()
	session := uuid.MustParse("01a02f3f-0000-7000-8000-00000005ea1d")
	const events = 30 // of about 300 bytes: three chunks of crashChunkSize sealed
	// run appends the events with the power cut at the k-th operation of
	// the sealing (never if k is 0), then closes the store, and returns the
	// frozen filesystem, the workload's record, the sealing operations
	// seen, and the operation the power was cut at (nil if none).
	run := func(k int) (*vfs.MemFS, *crashWorkload, int, error) {
		m := vfs.NewMemFS()
		w := newCrashWorkload(events, 0)
		w.session = session
		n := 0
		m.SetFault(func(op vfs.Op, path string) error {
			if sealingOp(op, path) {
				n++
				if n == k {
					return vfs.ErrPowerLoss
				}
			}
			return nil
		})
		o := Options{ChunkSize: crashChunkSize, BlobThreshold: crashBlobThreshold}
		s := openMem(t, m, o)
		defer func() {
			s.Close() // after a power cut it fails and changes nothing
			m.PowerOff()
		}()
		w.pending = "seal"
		if _, err := s.Create(ctx, Meta{ID: session, Name: w.pending}); err != nil {
			return m, w, n, m.PowerCut()
		}
		w.created, w.names, w.pending = true, []string{w.pending}, ""
		for i := range events {
			ev := UserText(fmt.Sprintf("event %d %s", i, strings.Repeat("s", 200)))
			w.inflight = []Event{ev}
			out, err := s.Append(ctx, session, ev)
			if err != nil {
				return m, w, n, m.PowerCut()
			}
			w.inflight = nil
			w.acked[out.ID] = out
			w.order = append(w.order, out.ID)
		}
		s.Close()
		return m, w, n, m.PowerCut()
	}

	m, w, total, cut := run(0)
	require.NoError(t, cut)
	require.Len(t, w.order, events)
	chunks, err := vfs.ReadFile(m.CrashClone(vfs.KeepSynced, 0), sessionPath(session, chunksDir, chunkName(1)+sealedExt))
	require.NoError(t, err, "the workload seals chunk 1")
	require.NotEmpty(t, chunks)
	points := 0
	for k := 1; ; k++ {
		m, w, _, cut := run(k)
		if cut == nil {
			break
		}
		points++
		var pe *fs.PathError
		require.ErrorAs(t, cut, &pe)
		for _, st := range dirCrashStates(m, k) {
			func() {
				defer func() {
					if t.Failed() {
						t.Logf("in %s (cut at %s %s)", st.name, pe.Op, filepath.Base(pe.Path))
					}
				}()
				checkCrashState(t, st.fs, w)
			}()
		}
	}
	t.Logf("%d crash points (%d sealing operations in the run without a cut), %d states each", points, total, len(vfs.CrashModes)-1+dirSeeds())
	// The count varies by one or two between runs (a sealing that finds
	// two chunks full rewrites the index once), never below the seven
	// operations of each of the three sealings.
	assert.GreaterOrEqual(t, points, 3*7)
}
