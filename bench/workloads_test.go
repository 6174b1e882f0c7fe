package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawRecords reads the lines of a raw floor's raw.log up to the
// preallocated zeros, checks each line's CRC-32C (over the line up to its
// ,"crc" field) and decodes them.
func rawRecords(t *testing.T, dir string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "raw.log"))
	require.NoError(t, err)
	if i := bytes.IndexByte(b, 0); i >= 0 {
		require.Empty(t, bytes.Trim(b[i:], "\x00"), "bytes after the first zero")
		b = b[:i]
	}
	var out []map[string]any
	for line := range bytes.Lines(b) {
		i := bytes.LastIndex(line, []byte(`,"crc":"`))
		require.Positive(t, i, "line without a CRC: %q", line)
		want := fmt.Sprintf("%08x", crc32.Checksum(line[:i], castagnoli))
		var rec map[string]any
		require.NoError(t, json.Unmarshal(line, &rec), "line %q", line)
		assert.Equal(t, want, rec["crc"], "CRC of %q", line)
		out = append(out, rec)
	}
	return out
}

// TestRawFloorCreate: concurrent Creates and Appends on the raw floor
// each leave their line, whole and in the file when the call returns,
// through the one group commit.
func TestRawFloorCreate(t *testing.T) {
	dir := t.TempDir()
	st, err := openRawFloor(dir)
	require.NoError(t, err)
	const writers, per = 16, 5
	ev := message300()
	var (
		mu      sync.Mutex
		created = map[string]string{} // id -> name
		events  = map[string]string{} // event id -> session id
	)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				name := fmt.Sprintf("w%d s%d", w, i)
				sid, err := st.Create(context.Background(), name)
				if !assert.NoError(t, err) {
					return
				}
				id, err := st.Append(context.Background(), sid, ev)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				created[sid.String()] = name
				events[id.String()] = sid.String()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NoError(t, st.Close())
	require.Len(t, created, writers*per)

	gotSessions, gotEvents := map[string]string{}, map[string]bool{}
	for _, rec := range rawRecords(t, dir) {
		if s, ok := rec["session"].(string); ok {
			gotSessions[s] = rec["name"].(string)
			continue
		}
		gotEvents[rec["id"].(string)] = true
	}
	assert.Equal(t, created, gotSessions)
	assert.Len(t, gotEvents, len(events))
	for id := range events {
		assert.True(t, gotEvents[id], "event %s missing", id)
	}
}

// testEnv is an env with tiny sizes on the fleet peers, one repetition.
func testEnv(t *testing.T) *env {
	t.Helper()
	var peers []Peer
	for _, p := range allPeers() {
		if slices.Contains(fleetPeers, p.Name) {
			peers = append(peers, p)
		}
	}
	require.Len(t, peers, len(fleetPeers))
	return &env{
		ctx: context.Background(), scratch: t.TempDir(), peers: peers, reps: 1, res: newResults(),
		sz:   sizes{Fleet: map[int]int{16: 2}, Creates: 40, CreateWriters: 8},
		logf: t.Logf,
	}
}

// TestFleetWorkloads runs append300-16s and create at tiny sizes: every
// fleet peer gets throughput, p50 and p99 (create: 40 rounded up to 40
// sessions, each listed afterwards by the peers that list), and their
// targets are reported without failing the run.
func TestFleetWorkloads(t *testing.T) {
	e := testEnv(t)
	require.NoError(t, e.fleetAppends(16))
	require.NoError(t, e.create())
	for _, key := range []string{"append300-16s/rate", "append300-16s/p50", "append300-16s/p99", "create/rate", "create/p50", "create/p99"} {
		r := e.res.byKey[key]
		require.NotNil(t, r, key)
		for _, p := range fleetPeers {
			v, ok := r.value(p)
			assert.True(t, ok, "%s: no value for %s", key, p)
			assert.Positive(t, v, "%s: %s", key, p)
		}
	}
	var b strings.Builder
	missed := e.res.writeTargets(&b)
	for _, text := range []string{
		"16 sessions, one writer each: >= 0.9x the raw floor",
		"16 sessions, one writer each: >= 1.5x bbolt",
		"durable Create, 32 goroutines: >= 2,000 sessions/s",
	} {
		assert.Contains(t, b.String(), text)
	}
	assert.NotContains(t, b.String(), "256 sessions", "no target for a workload that did not run")
	assert.LessOrEqual(t, missed, 3)
	// The report is written whatever the targets' status.
	writeReport(io.Discard, e, machine{}, true, 0)
}

// TestWorkspaceWorkload runs the workspace workload at a tiny size:
// sessionstore and git both get every row (their snapshots, file lists
// and restores checked inside the workload), and the targets are
// reported without failing the run.
func TestWorkspaceWorkload(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed:", err)
	}
	var peers []Peer
	for _, p := range allPeers() {
		if p.Name == "sessionstore" || p.Name == gitPeerName {
			peers = append(peers, p)
		}
	}
	require.Len(t, peers, 2)
	e := &env{
		ctx: context.Background(), scratch: t.TempDir(), peers: peers, reps: 2, res: newResults(),
		sz:   sizes{WSFiles: 40, WSBytes: 200 << 10, WSSnapshots: 4},
		logf: t.Logf,
	}
	require.NoError(t, e.workspace())
	for _, key := range []string{"workspace/snapshot-ms", "workspace/snapshot-bytes", "workspace/files-ms", "workspace/files-path-ms", "workspace/restore-ms", "workspace/restore-nosync-ms"} {
		r := e.res.byKey[key]
		require.NotNil(t, r, key)
		for _, p := range []string{"sessionstore", gitPeerName} {
			v, ok := r.value(p)
			assert.True(t, ok, "%s: no value for %s", key, p)
			assert.Positive(t, v, "%s: %s", key, p)
		}
		_, ok := r.ratio(gitPeerName)
		assert.True(t, ok, "%s: no ratio", key)
	}
	var b strings.Builder
	e.res.writeTargets(&b)
	assert.Contains(t, b.String(), "workspace: snapshot after a change of 3 files")
	assert.Contains(t, b.String(), "workspace: Restore into an empty directory with NoSync")
	require.Len(t, e.res.details, 1)
	assert.Contains(t, e.res.details[0], "git add -A")
	writeReport(io.Discard, e, machine{}, true, 0)
}
