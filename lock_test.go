package sessionstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sessionstore/sessionstore/internal/journal"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Environment of the helper process that TestMain runs instead of the tests
// when apiHelperEnv is set.
const (
	apiHelperEnv  = "SESSIONSTORE_TEST_HELPER"  // what the helper does
	apiDirEnv     = "SESSIONSTORE_TEST_DIR"     // the store's root
	apiSessionEnv = "SESSIONSTORE_TEST_SESSION" // the session id
	apiSeedEnv    = "SESSIONSTORE_TEST_SEED"    // seed of the append-loop workload
	apiLoopEnv    = "SESSIONSTORE_TEST_LOOP"    // variants of the append-loop workload; see apiAppendLoop
)

func TestMain(m *testing.M) {
	// The tests of blobs were written when records over 16 KiB were blobs
	// by default; they keep that threshold (options.go). The production
	// default has tests of its own (TestDefaultBlobThreshold).
	defaultBlobThreshold = testBlobThreshold
	defaultJournalSize = journal.MinSize
	prepareJournal = false
	journalAlways = true
	if mode := os.Getenv(apiHelperEnv); mode != "" {
		fmt.Print(apiHelper(mode, os.Getenv(apiDirEnv), os.Getenv(apiSessionEnv)))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testBlobThreshold is the blob threshold of this package's tests when
// Options leave it zero.
const testBlobThreshold = 16 << 10

// apiHelper runs in a child process. Modes:
//
//	append          open the store, append one event, close; print "ok" or the error
//	append-noclose  the same, but exit without closing the store (a crash)
//	list            open the store and print the number of sessions List returns
//	append-loop     open the store with small chunks and append forever,
//	                printing each acknowledged event id on a line of its own
//	                (with its parent and record digest in the "digest"
//	                variant); see apiAppendLoop; SESSIONSTORE_TEST_LOOP
//	                selects variants
//	lane-loop       change lanes and append forever (lanes_kill_test.go)
func apiHelper(mode, dir, session string) string {
	ctx := context.Background()
	id, err := uuid.Parse(session)
	if err != nil && mode != "list" {
		return "bad session id: " + err.Error()
	}
	if mode == "append-loop" {
		return apiAppendLoop(dir, id, os.Getenv(apiSeedEnv), os.Getenv(apiLoopEnv))
	}
	if mode == "lane-loop" {
		return laneLoop(dir, id, os.Getenv(apiSeedEnv)) // lanes_kill_test.go
	}
	s, err := Open(dir, nil)
	if err != nil {
		return "open: " + err.Error()
	}
	switch mode {
	case "append", "append-noclose":
		if _, err := s.Append(ctx, id, UserText("from child "+mode)); err != nil {
			s.Close()
			return err.Error()
		}
		if mode == "append-noclose" {
			return "ok"
		}
		if err := s.Close(); err != nil {
			return "close: " + err.Error()
		}
		return "ok"
	case "catalogue-writes": // catalogue_test.go: TestCatalogueXproc
		defer s.Close()
		for i := range 10 {
			meta, err := s.Create(ctx, Meta{Name: fmt.Sprint("child ", i)})
			if err != nil {
				return err.Error()
			}
			if _, err := s.UpdateMeta(ctx, meta.ID, func(m *Meta) { m.Model = "updated" }); err != nil {
				return err.Error()
			}
		}
		if err := s.Close(); err != nil {
			return "close: " + err.Error()
		}
		return "ok"
	case "list":
		defer s.Close()
		list, err := s.List(ctx)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprint(len(list))
	}
	return "unknown helper mode " + mode
}

// apiLoopChunkSize is the ChunkSize of the append-loop helper: small, so
// that chunk rotation happens every few dozen events.
const apiLoopChunkSize = 16 << 10

// apiLoopBlobThreshold is the BlobThreshold of the append-loop helper's
// "blobs" variant: about half its tool results (1-8 KiB) are then blobs.
const apiLoopBlobThreshold = 4 << 10

// apiAppendLoop appends to session forever, until the process is killed; it
// never closes the store. The workload, drawn from seed: mostly small user
// messages, some assistant messages and tool calls, every few events a tool
// result of 1-8 KiB (spanning pages, so a kill can tear it), and now and
// then a Branch to an event appended earlier by this process, so the next
// event starts a branch. After each Append that returned nil, and never
// before, it writes the event's id and a newline to stdout with one Write
// (os.Stdout is unbuffered, so the line leaves the process at once). It
// returns, and so exits, only on a failure, with a line starting "error:".
//
// variants is a comma-separated list (empty for the workload above):
//
//	linear  never Branch: every event is a child of the one before, so the
//	        active path holds every event
//	flush   call Flush after every 25th append, which syncs the index and
//	        replaces the HEAD file while the loop goes on
//	digest  print "<id> <parent id> <sha256>" instead of the id alone: the
//	        parent Append returned, and the SHA-256, in lower-case hex, of
//	        the record as the store must give it back (compacted as
//	        prepareRecord does), computed from what this process appends
//	blobs   open the store with BlobThreshold apiLoopBlobThreshold, so
//	        that about half the tool results are stored as blobs, and make
//	        the first event and every eighth after it a tool result
//	        above it, so that a child killed after its first
//	        acknowledgement has stored a blob whatever its draws (a
//	        loaded host can leave every child of a short run killed after
//	        one)
func apiAppendLoop(dir string, session uuid.UUID, seed, variants string) string {
	ctx := context.Background()
	n, err := strconv.ParseUint(seed, 10, 64)
	if err != nil {
		return "error: bad seed: " + err.Error() + "\n"
	}
	var linear, flush, digest, blobs bool
	opts := &Options{ChunkSize: apiLoopChunkSize}
	for v := range strings.SplitSeq(variants, ",") {
		switch v {
		case "":
		case "linear":
			linear = true
		case "flush":
			flush = true
		case "digest":
			digest = true
		case "blobs":
			opts.BlobThreshold = apiLoopBlobThreshold
			blobs = true
		default:
			return "error: unknown append-loop variant " + v + "\n"
		}
	}
	rng := rand.New(rand.NewPCG(n, 0x5e5510))
	s, err := Open(dir, opts)
	if err != nil {
		return "error: open: " + err.Error() + "\n"
	}
	var mine []uuid.UUID // events appended by this process, oldest first
	for i := 0; ; i++ {
		// Branch to an earlier event (not HEAD, which would cancel it).
		if !linear && len(mine) >= 2 && rng.IntN(10) == 0 {
			from := mine[rng.IntN(len(mine)-1)]
			if err := s.Branch(ctx, session, from); err != nil {
				return fmt.Sprintf("error: branch to %s: %v\n", from, err)
			}
		}
		var ev Event
		switch r := rng.IntN(10); {
		case blobs && i%8 == 0:
			size := apiLoopBlobThreshold + 1 + rng.IntN(4<<10)
			ev = ToolResultEvent(ToolResult{CallID: fmt.Sprintf("call-%d", i), Output: strings.Repeat(string(rune('a'+i%26)), size)})
		case r < 6:
			ev = UserText(fmt.Sprintf("user message %d of loop %d", i, n))
		case r < 7:
			ev = AssistantMessage(Message{Content: fmt.Sprintf("assistant reply %d", i), Model: "test-model", Usage: &Usage{InputTokens: int64(i), OutputTokens: 7}})
		case r < 8:
			ev = ToolCallEvent(ToolCall{CallID: fmt.Sprintf("call-%d", i), Name: "read_file", Arguments: []byte(`{"path":"/tmp/x"}`)})
		default:
			size := 1<<10 + rng.IntN(7<<10)
			ev = ToolResultEvent(ToolResult{CallID: fmt.Sprintf("call-%d", i), Output: strings.Repeat(string(rune('a'+i%26)), size)})
		}
		var sum [sha256.Size]byte
		if digest {
			// The hash of what this process appends, taken before the
			// store sees it.
			var rec bytes.Buffer
			if err := json.Compact(&rec, ev.Record); err != nil {
				return fmt.Sprintf("error: record %d: %v\n", i, err)
			}
			sum = sha256.Sum256(rec.Bytes())
		}
		out, err := s.Append(ctx, session, ev)
		if err != nil {
			return fmt.Sprintf("error: append %d: %v\n", i, err)
		}
		line := out.ID.String() + "\n"
		if digest {
			line = out.ID.String() + " " + out.ParentID.String() + " " + hex.EncodeToString(sum[:]) + "\n"
		}
		if _, err := os.Stdout.Write([]byte(line)); err != nil {
			return "" // the parent is gone
		}
		mine = append(mine, out.ID)
		if flush && i%25 == 24 {
			if err := s.Flush(ctx, session); err != nil {
				return fmt.Sprintf("error: flush after append %d: %v\n", i, err)
			}
		}
	}
}

// apiRunHelper runs the test binary as a helper process and returns what it
// printed.
func apiRunHelper(t *testing.T, mode, dir string, session uuid.UUID) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), exe, "-test.run=^$")
	// A race-enabled helper would sleep a second at exit by default.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), apiHelperEnv+"="+mode, apiDirEnv+"="+dir, apiSessionEnv+"="+session.String(), "GORACE="+gorace)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "helper %s failed; stderr:\n%s", mode, stderr.String())
	return string(out)
}

func TestAPILockCrossProcess(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := apiOpen(t, dir, nil)
	id := apiNewSession(t, s)
	mine := apiAppend(t, s, id, UserText("from parent"))

	// While this Store holds the session, a writer in another process is
	// refused at once, naming the lock file.
	out := apiRunHelper(t, "append", dir, id)
	lockPath := filepath.Join(apiSessionDir(dir, id), "LOCK")
	assert.Contains(t, out, lockPath, "the error names the lock file")
	assert.Contains(t, out, ErrLocked.Error(), "the error is ErrLocked")
	assert.NotEqual(t, "ok", out)

	// Readers of metadata take no lock.
	assert.Equal(t, "1", apiRunHelper(t, "list", dir, id))

	// The refused child wrote nothing.
	apiSameEvents(t, []Event{mine}, apiLoad(t, s, id))

	// Once this Store closes, the child can write.
	require.NoError(t, s.Close())
	assert.Equal(t, "ok", apiRunHelper(t, "append", dir, id))

	s2 := apiOpen(t, dir, nil)
	path := apiLoad(t, s2, id)
	require.Len(t, path, 2, "the child's event is there after reopening")
	apiSameEvent(t, mine, path[0])
	assert.Equal(t, mine.ID, path[1].ParentID)
	m, err := path[1].Message()
	require.NoError(t, err)
	assert.Equal(t, "from child append", m.Content)

	// Now this process holds the lock again and the child is refused.
	out = apiRunHelper(t, "append", dir, id)
	assert.Contains(t, out, lockPath)
	assert.Contains(t, out, ErrLocked.Error())
	require.NoError(t, s2.Close())

	// A writer that exits without Close (as in a crash) leaves no lock
	// behind: the kernel releases it, and reconciliation restores HEAD.
	assert.Equal(t, "ok", apiRunHelper(t, "append-noclose", dir, id))
	s3 := apiOpen(t, dir, nil)
	path = apiLoad(t, s3, id)
	require.Len(t, path, 3)
	m, err = path[2].Message()
	require.NoError(t, err)
	assert.Equal(t, "from child append-noclose", m.Content)
	head, err := s3.Head(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, path[2].ID, head)
}

func TestAPILockInProcess(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s1 := apiOpen(t, dir, nil)
	id := apiNewSession(t, s1)
	ev := apiAppend(t, s1, id, UserText("first"))
	lockPath := filepath.Join(apiSessionDir(dir, id), "LOCK")

	s2 := apiOpen(t, dir, nil)
	for _, m := range apiMethods() {
		if m.name == "Create" || m.name == "List" || m.name == "Meta" {
			continue // no lock needed, or not about this session
		}
		t.Run(m.name, func(t *testing.T) {
			err := m.call(ctx, s2, id, ev.ID)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrLocked)
			var pe *fs.PathError
			if assert.True(t, errors.As(err, &pe), "ErrLocked comes in an *fs.PathError: %v", err) {
				assert.True(t, strings.HasSuffix(pe.Path, "LOCK"), "path %q", pe.Path)
				assert.Equal(t, lockPath, pe.Path)
			}
			assert.Contains(t, err.Error(), lockPath)
		})
	}
	_, err := s2.Create(ctx, Meta{ID: id})
	assert.ErrorIs(t, err, ErrLocked)

	// List and Meta take no lock.
	list, err := s2.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	_, err = s2.Meta(ctx, id)
	require.NoError(t, err)

	// The lock is per session: s2 can write a session of its own.
	other := apiNewSession(t, s2)
	apiAppend(t, s2, other, UserText("other"))
	_, err = s1.Append(ctx, other, UserText("x"))
	assert.ErrorIs(t, err, ErrLocked, "and s1 cannot write s2's")

	// The refusals were not cached: once s1 closes, s2 takes the session.
	require.NoError(t, s1.Close())
	next := apiAppend(t, s2, id, UserText("from s2"))
	assert.Equal(t, ev.ID, next.ParentID)
	apiSameEvents(t, []Event{ev, next}, apiLoad(t, s2, id))

	// And a third Store is now refused by s2.
	s3 := apiOpen(t, dir, nil)
	_, err = s3.Head(ctx, id)
	assert.ErrorIs(t, err, ErrLocked)
}
